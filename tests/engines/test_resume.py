"""Runs survive SIGKILL: resuming gives exactly the results and weights of an uninterrupted run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from fedpref.cli import main
from fedpref.engines.checkpoint import CheckpointStore

MEASURED_COST = ("_s_per_round", "peak_memory_bytes", "peak_memory_kind")

ROOT = Path(__file__).resolve().parents[2]
ARGS = [
    "--set",
    "algorithm.methods=['FL','CL']",
    "--set",
    "federation.rounds=4",
    "--set",
    "federation.checkpoint_every=1",
]


def comparable(run_dir: Path) -> tuple[dict, dict]:
    """results.json without wall-clock timings and peak memory (the machine's, not the run's), and every saved
    initialization."""
    results = json.loads((run_dir / "results.json").read_text())
    methods = {name: {k: v for k, v in r.items() if k != "timing"} for name, r in results["methods"].items()}
    for r in methods.values():
        r["cost"] = {k: v for k, v in r.get("cost", {}).items() if not k.endswith(MEASURED_COST)}
    weights = {p.name: torch.load(p, weights_only=True) for p in sorted((run_dir / "models").glob("*.pt"))}
    return methods, weights


def assert_same(a: Path, b: Path) -> None:
    (ma, wa), (mb, wb) = comparable(a), comparable(b)
    assert ma == mb
    assert wa.keys() == wb.keys()
    for name in wa:
        assert wa[name]["client_state"] == wb[name]["client_state"]
        for sa, sb in zip(wa[name]["states"], wb[name]["states"], strict=True):
            assert all(torch.equal(sa[k], sb[k]) for k in sa), name


def fedpref(out: Path, *extra: str, env: dict | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "fedpref.cli", "run", "tiny", "--out", str(out), *ARGS, *extra]
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def wait_for(condition, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"run ended before the kill point: {proc.stderr.read().decode()[-2000:]}")
        if time.time() > deadline:
            raise AssertionError("kill point not reached in time")
        time.sleep(0.02)


def rounds_logged(out: Path) -> int:
    path = out / "rounds.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "run"
    assert main(["run", "tiny", "--out", str(out), *ARGS]) == 0
    return out


def kill_and_resume(out: Path, condition, env: dict | None = None) -> None:
    proc = fedpref(out, env=env)
    try:
        wait_for(lambda: condition(out), proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (out / "table.md").exists()  # it really was interrupted
    done = subprocess.run(
        [sys.executable, "-m", "fedpref.cli", "run", "tiny", "--out", str(out), *ARGS, "--resume"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_kill_mid_round_then_resume_is_identical(reference, tmp_path):
    out = tmp_path / "run"
    kill_and_resume(out, lambda o: rounds_logged(o) >= 2)  # FL's third round is running
    assert_same(reference, out)


@pytest.mark.slow
def test_kill_while_writing_a_checkpoint_then_resume_is_identical(reference, tmp_path):
    out = tmp_path / "run"
    pause = {"FEDPREF_FAULT_PAUSE": "checkpoint", "FEDPREF_FAULT_PAUSE_S": "3"}
    kill_and_resume(out, lambda o: rounds_logged(o) >= 3 and (o / "checkpoints" / "latest.ckpt.tmp").exists(), pause)
    assert_same(reference, out)


@pytest.mark.slow
def test_kill_during_the_second_method_then_resume_is_identical(reference, tmp_path):
    out = tmp_path / "run"
    kill_and_resume(out, lambda o: rounds_logged(o) >= 7)  # inside CL's global phase
    assert_same(reference, out)


def test_other_seed_differs(reference, tmp_path):
    # the same seed giving the same results is what every resume test above (and the pinned numbers) checks
    other = tmp_path / "other"
    assert main(["run", "tiny", "--out", str(other), *ARGS, "--set", "seed=1"]) == 0
    assert comparable(reference)[0] != comparable(other)[0]


def test_resume_refuses_another_config(reference, tmp_path, capsys):
    code = main(["run", "tiny", "--out", str(reference), *ARGS, "--set", "seed=5", "--resume"])
    assert code == 2 and "different config" in capsys.readouterr().err


def test_run_records_version_hash_and_seed(reference):
    results = json.loads((reference / "results.json").read_text())
    assert results["fedpref_version"] and len(results["config_hash"]) == 12 and results["seed"] == 0


def test_fedvpa_resume_restores_each_clients_private_memory(tmp_path):
    """FedVPA-GP's Gumbel logits live on the clients; a resumed run must get them back from the checkpoint."""
    args = ["--set", "algorithm.methods=['FedVPA-GP']", "--set", "federation.rounds=4"]
    args += ["--set", "federation.checkpoint_every=1"]
    ref, out = tmp_path / "ref", tmp_path / "run"
    assert main(["run", "tiny", "--out", str(ref), *args]) == 0
    cmd = [sys.executable, "-m", "fedpref.cli", "run", "tiny", "--out", str(out), *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_for(lambda: rounds_logged(out) >= 3, proc)  # the mixture prior and Gumbel logits are in use
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    saved = CheckpointStore(out / "checkpoints").load()
    assert saved["current"]["client_memory"]  # some client holds Gumbel logits
    assert main(["run", "tiny", "--out", str(out), *args, "--resume"]) == 0
    assert_same(ref, out)
