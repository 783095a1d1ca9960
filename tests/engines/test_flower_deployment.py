"""A real loopback deployment: one SuperLink and two SuperNodes on 127.0.0.1, two rounds of FedAvg."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from fedpref.apps.federation import BIN, loopback_env, start_superlink, start_supernode, stop

pytestmark = [pytest.mark.flower, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NODES = 2
OVERRIDES = "data.group_sizes=[1, 1, 0, 0]; federation.rounds=2; federation.clients_per_round=2"


def wait_for_results(path: Path, method: str, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.is_file() and method in (results := json.loads(path.read_text()))["methods"]:
            return results
        time.sleep(2)
    raise TimeoutError(f"no results for {method} in {path} after {timeout_s} s")


def test_loopback_deployment_runs_two_rounds_of_fedavg(tmp_path: Path) -> None:
    env, link = loopback_env(tmp_path / "flwr")
    processes = []
    try:
        processes.append(start_superlink(link, env, tmp_path, tmp_path / "link.log"))
        for i in range(NODES):
            config = f"partition-id={i} num-partitions={NODES}"
            processes.append(start_supernode(link, config, env, tmp_path, tmp_path / f"node{i}.log"))
        out = tmp_path / "out"
        # A relative config-path: the nodes run in tmp_path, so it resolves inside the installed app (FAB).
        run_config = f'config-path="tiny" method="FL" out-dir="{out}" overrides="{OVERRIDES}"'
        submit = [str(BIN / "flwr"), "run", str(ROOT), "loopback", "--run-config", run_config]
        subprocess.run(submit, env=env, cwd=tmp_path, check=True, timeout=120, capture_output=True)
        results = wait_for_results(out / "results.json", "FL", timeout_s=600)
    finally:
        stop(processes)
    rounds = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [0, 1]
    assert all(r["dropped"] == [] and sorted(r["sampled"]) == ["c000", "c001"] for r in rounds)
    fl = results["methods"]["FL"]
    assert fl["engine"] == "flower"
    assert sorted(fl["personalization"]["per_client"]) == ["c000", "c001"]
    assert len(fl["personalization"]["acc_mean"]) == 2  # configs/quick/tiny.toml: steps [0, 2]
    assert all(p.poll() is not None for p in processes)
