"""A Flower run survives SIGKILL: `--resume` continues it on a fresh simulation with the results of an
uninterrupted Flower run (each client restores its own private memory snapshot)."""

import json
import os
import signal
import subprocess
import sys

import pytest
from test_resume import ROOT, assert_same, rounds_logged, wait_for

from fedpref.cli import main

pytestmark = [pytest.mark.flower, pytest.mark.slow]  # three Ray starts and a kill: minutes; run with -m slow
pytest.importorskip("ray", reason="the Flower Simulation Engine needs flwr[simulation] (Ray)")

# FedVPA-GP keeps Gumbel logits on its clients from round 1 on: the kill falls inside its global phase.
ARGS = ["--engine", "flower", "--set", "algorithm.methods=['FL','FedVPA-GP']", "--set", "federation.rounds=4"]
ARGS += ["--set", "federation.checkpoint_every=1"]


def run_args(out) -> list[str]:
    return ["run", "tiny", "--out", str(out), *ARGS]


def test_flower_run_killed_then_resumed_equals_an_uninterrupted_one(tmp_path):
    ref, out = tmp_path / "ref", tmp_path / "run"
    assert main(run_args(ref)) == 0
    cmd = [sys.executable, "-m", "fedpref.cli", *run_args(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_for(lambda: rounds_logged(out) >= 7, proc)  # FL's 4 rounds, then FedVPA-GP's third has started
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (out / "table.md").exists()  # it really was interrupted
    snapshots = list((out / "checkpoints" / "clients").glob("*/FedVPA-GP/round-*.json"))
    assert snapshots  # the clients' own memory, on their side
    assert main([*run_args(out), "--resume"]) == 0
    assert_same(ref, out)  # results.json without timings, and every saved initialization, bit for bit
    logged = [json.loads(line)["method"] for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert logged == ["FL"] * 4 + ["FedVPA-GP"] * 4  # resumed rounds are not logged twice
