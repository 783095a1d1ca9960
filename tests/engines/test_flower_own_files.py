"""Loopback federations where each node holds only its own file: by hand (each node in a folder holding that
file alone, the SuperLink and ServerApp in a folder holding none) and with `fedpref federation`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_flower_deployment import ROOT, wait_for_results

from fedpref.apps.federation import BIN, loopback_env, processes_of, start_superlink, start_supernode, stop
from fedpref.cli import main
from fedpref.data.client_files import split_by_user

pytestmark = [pytest.mark.flower, pytest.mark.slow]

DATA = ["data.group_sizes=[1, 1, 0, 0]", "data.pairs_per_axis=6", "data.val_pairs=2", "data.test_pairs=2"]
DATA += ["federation.clients_per_round=2"]
RUN = [*DATA, "data.source='jsonl'", "data.path='own.jsonl'", "federation.rounds=2"]


def test_nodes_holding_only_their_own_files_run_fedavg(tmp_path: Path) -> None:
    pooled = tmp_path / "pooled.jsonl"
    sets = [arg for item in DATA for arg in ("--set", item)]
    assert main(["data", "export", "tiny", *sets, "--out", str(pooled)]) == 0
    own = split_by_user(pooled, "client", tmp_path / "split")
    pooled.unlink()
    env, link = loopback_env(tmp_path / "flwr")
    server_dir = tmp_path / "server"
    server_dir.mkdir()
    processes = []
    try:
        processes.append(start_superlink(link, env, server_dir, tmp_path / "link.log"))
        for user, path in own.items():
            folder = tmp_path / f"node-{user}"
            folder.mkdir()
            path.rename(folder / "own.jsonl")  # the node's folder holds its own file and nothing else
            config = f'data-path="{folder / "own.jsonl"}"'
            processes.append(start_supernode(link, config, env, folder, tmp_path / f"node-{user}.log"))
        out = tmp_path / "out"
        run_config = f'config-path="tiny" method="FL" clients={len(own)} out-dir="{out}" '
        run_config += f'overrides="{"; ".join(RUN)}"'
        submit = [str(BIN / "flwr"), "run", str(ROOT), "loopback", "--run-config", run_config]
        done = subprocess.run(submit, env=env, cwd=server_dir, timeout=120, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        results = wait_for_results(out / "results.json", "FL", timeout_s=600)
    finally:
        stop(processes)
    assert not list(server_dir.rglob("*.jsonl"))  # the server side never held any client's data
    rounds = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [0, 1] and all(r["dropped"] == [] for r in rounds)
    curves = results["methods"]["FL"]["personalization"]
    assert sorted(curves["per_client"]) == sorted(own) and set(curves["by_group"]) == {"G1", "G2"}
    assert all(p.poll() is not None for p in processes)


def test_fedpref_federation_runs_fl_and_fedgd_on_four_client_files(tmp_path: Path) -> None:
    sets = ["data.group_sizes=[1, 1, 1, 1]", "data.pairs_per_axis=6", "data.val_pairs=2", "data.test_pairs=2"]
    pooled, out = tmp_path / "pooled.jsonl", tmp_path / "run"
    flags = [arg for item in sets for arg in ("--set", item)]
    assert main(["data", "export", "tiny", *flags, "--out", str(pooled)]) == 0
    assert main(["data", "split-clients", str(pooled), "--out", str(tmp_path / "clients"), "--user-key", "client"]) == 0
    run = [*sets, "data.source=jsonl", f"data.path={pooled.name}", "federation.rounds=2"]
    run += ["algorithm.methods=['FL','FedGD']"]
    pooled.unlink()  # only the per-client files exist
    assert main(["federation", "tiny", "--clients-dir", str(tmp_path / "clients"), "--out", str(out),
                 *[a for r in run for a in ("--set", r)]]) == 0  # fmt: skip
    results = json.loads((out / "results.json").read_text())["methods"]
    assert list(results) == ["FL", "FedGD"]
    for result in results.values():
        assert sorted(result["personalization"]["per_client"]) == ["c000", "c001", "c002", "c003"]
    assert (out / "table.md").is_file() and (out / "personalization.png").is_file()
    assert processes_of(out / "flwr") == []  # nothing left behind
