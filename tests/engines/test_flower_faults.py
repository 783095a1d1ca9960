"""A SuperNode killed mid-run on a loopback deployment: its round goes on without it (dropped, logged), and the
node restarted on its own file is found again and trains in later rounds: as a new node id without node
authentication, on its registered node id with it (slow: real processes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from flower_keys import write_node_key, write_pki  # noqa: E402

from fedpref.apps import federation as fed  # noqa: E402
from fedpref.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.flower, pytest.mark.slow]

DATA = ["data.group_sizes=[1, 1, 1, 0]", "data.pairs_per_axis=6", "data.val_pairs=2", "data.test_pairs=2"]
DATA += ["federation.clients_per_round=3"]
RUN = [*DATA, "data.source=jsonl", "data.path=own.jsonl", "federation.rounds=6"]
VICTIM = "c001"


def logged_rounds(out: Path) -> list[dict]:
    path = out / "rounds.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def finished(out: Path) -> bool:
    path = out / "results.json"
    return path.is_file() and "FL" in json.loads(path.read_text())["methods"]


def kill_and_restart(tmp_path: Path, authenticated: bool) -> tuple[list[dict], dict, set[str], set[str]]:
    """Run FL on 3 nodes, kill c001's SuperNode after round 0 and start it again once a round went on without
    it; returns the rounds, the results, and the node ids before the kill and at the end. `authenticated`: TLS,
    every node registered by its key and started with it (the restarted node too)."""
    pooled, clients, out, logs = tmp_path / "pooled.jsonl", tmp_path / "clients", tmp_path / "run", tmp_path / "logs"
    sets = [a for d in DATA for a in ("--set", d)]
    assert main(["data", "export", "tiny", *sets, "--out", str(pooled)]) == 0
    assert main(["data", "split-clients", str(pooled), "--out", str(clients), "--user-key", "client"]) == 0
    files = {p.stem: p.resolve() for p in fed.client_files(clients)}
    logs.mkdir()
    tls = write_pki(tmp_path) if authenticated else None
    keys = {c: write_node_key(tmp_path, c) for c in files} if authenticated else {}
    env, link = fed.loopback_env(tmp_path / "flwr", tls)

    def node(client: str, attempt: int) -> subprocess.Popen:
        home = tmp_path / "nodes" / client
        home.mkdir(parents=True, exist_ok=True)
        log = logs / f"node-{client}-{attempt}.log"
        key = keys[client][0] if authenticated else None
        return fed.start_supernode(link, f'data-path="{files[client]}"', env, home, log, tls and tls.ca, key)

    def online() -> set[str]:
        return {n["node-id"] for n in fed.list_nodes(env) if n["status"] == "online"}

    processes = [fed.start_superlink(link, env, logs, logs / "superlink.log", tls, node_auth=authenticated)]
    try:
        for client in keys:
            fed.register_node(keys[client][1], env)
        nodes = {client: node(client, 0) for client in files}
        processes += nodes.values()
        fed.wait_until(lambda: len(online()) == len(files), 120, "every node online")
        before = online()
        run_config = f'config-path="{ROOT / "src/fedpref/configs/quick/tiny.toml"}" method="FL" clients={len(files)} '
        run_config += f'out-dir="{out}" overrides="{"; ".join(RUN)}" reply-timeout=60'
        submit = [str(fed.BIN / "flwr"), "run", str(fed.app_dir()), "loopback", "--run-config", run_config]
        done = subprocess.run(submit, env=env, cwd=logs, timeout=300, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

        fed.wait_until(lambda: len(logged_rounds(out)) >= 1, 600, "round 0")
        os.killpg(nodes[VICTIM].pid, signal.SIGKILL)  # the SuperNode and the app process it runs
        nodes[VICTIM].wait()
        fed.wait_until(lambda: any(VICTIM in r["dropped"] for r in logged_rounds(out)), 600, "a round without it")
        processes.append(node(VICTIM, 1))
        fed.wait_until(lambda: finished(out), 900, "the end of the run")
        after = online()
    finally:
        fed.stop(processes)
    return logged_rounds(out), json.loads((out / "results.json").read_text())["methods"]["FL"], before, after


def assert_dropped_then_back(rounds: list[dict], results: dict) -> None:
    dropped_at = [r["round"] for r in rounds if VICTIM in r["dropped"]]
    back_at = [r["round"] for r in rounds[dropped_at[0] + 1 :] if VICTIM in r["sampled"] and VICTIM not in r["dropped"]]
    assert dropped_at and back_at, rounds  # dropped in a round, trained again in a later one
    assert len(rounds) == 6 and rounds[0]["dropped"] == []
    assert VICTIM in results["personalization"]["per_client"]  # personalized on its restarted node


def test_a_killed_node_is_dropped_then_found_again_after_a_restart(tmp_path):
    rounds, results, before, after = kill_and_restart(tmp_path, authenticated=False)
    assert_dropped_then_back(rounds, results)
    assert len(after) == 3 and len(after - before) == 1  # without authentication it came back as a new node


def test_an_authenticated_node_restarted_keeps_its_node_id(tmp_path):
    rounds, results, before, after = kill_and_restart(tmp_path, authenticated=True)
    assert_dropped_then_back(rounds, results)
    assert after == before  # the same registered node ids; the restarted node rebuilt its state on the same id
