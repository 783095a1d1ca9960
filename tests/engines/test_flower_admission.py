"""Admission on a loopback deployment, with certificates made here: TLS between SuperNodes and SuperLink, and
SuperNode authentication that lets a registered node join and run the federation and keeps an unregistered
one out (slow: real flower-superlink / flower-supernode processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("flwr")

from flower_keys import write_node_key, write_pki  # noqa: E402

from fedpref.apps import federation as fed  # noqa: E402
from fedpref.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.flower, pytest.mark.slow]


DATA = ["data.group_sizes=[1, 1, 0, 0]", "data.pairs_per_axis=6", "data.val_pairs=2", "data.test_pairs=2"]


def test_tls_and_node_authentication_admit_only_the_registered_node(tmp_path):
    pooled, clients = tmp_path / "pooled.jsonl", tmp_path / "clients"
    sets = [a for d in [*DATA, "federation.clients_per_round=2"] for a in ("--set", d)]
    assert main(["data", "export", "tiny", *sets, "--out", str(pooled)]) == 0
    assert main(["data", "split-clients", str(pooled), "--out", str(clients), "--user-key", "client"]) == 0
    mine, stranger = fed.client_files(clients)
    tls = write_pki(tmp_path)
    keys = {name: write_node_key(tmp_path, name) for name in ("mine", "stranger")}
    out, logs = tmp_path / "run", tmp_path / "logs"
    logs.mkdir()
    env, link = fed.loopback_env(tmp_path / "flwr", tls)
    processes = []
    try:
        processes.append(fed.start_superlink(link, env, logs, logs / "superlink.log", tls, node_auth=True))
        registered = fed.register_node(keys["mine"][1], env)
        for path, name in ((mine, "mine"), (stranger, "stranger")):
            home = tmp_path / "nodes" / name
            home.mkdir(parents=True)
            own = f'data-path="{path.resolve()}"'
            node_log = logs / f"node-{name}.log"
            processes.append(fed.start_supernode(link, own, env, home, node_log, tls.ca, keys[name][0]))

        def online() -> list[str]:
            return [n["node-id"] for n in fed.list_nodes(env) if n["status"] == "online"]

        fed.wait_until(lambda: online() == [registered], 90, "the registered node coming online")
        refused = processes[-1]
        fed.wait_until(lambda: refused.poll() is not None, 120, "the unregistered node giving up")
        assert refused.returncode != 0 and "Failed to activate SuperNode" in (logs / "node-stranger.log").read_text()
        assert online() == [registered] and len(fed.list_nodes(env)) == 1  # it was never admitted

        # the admitted node runs a federation over TLS to the end
        sets = [*DATA, "data.source=jsonl", "data.path=own.jsonl", "federation.rounds=1"]
        sets += ["federation.clients_per_round=1", "personalization.steps=[0]"]
        fed.submit(ROOT / "src/fedpref/configs/quick/tiny.toml", 1, out, ["FL"], sets, env, logs)
        results = fed.wait_for_results(out / "results.json", ["FL"], processes[:-1], 600, print)
        assert len(results["methods"]["FL"]["personalization"]["per_client"]) == 1
    finally:
        fed.stop(processes)
    assert all(p.poll() is not None for p in processes)
