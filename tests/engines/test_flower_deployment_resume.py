"""A loopback federation whose SuperLink and ServerApp are SIGKILLed mid-run, continued with
`fedpref federation --resume`: the same results as an uninterrupted run, DP accountant included."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedpref.apps.federation import processes_of
from fedpref.cli import main

pytestmark = [pytest.mark.flower, pytest.mark.slow]
DATA = ["data.group_sizes=[1, 1, 1, 0]", "data.pairs_per_axis=6", "data.val_pairs=2", "data.test_pairs=2"]
# FL under client-level DP: the model, the algorithm's RNG and the accountant's state must all come back
RUN = ["algorithm.methods=['FL']", "federation.rounds=5", "federation.checkpoint_every=1"]
RUN += ["federation.clients_per_round=3", "privacy.clip_norm=1.0", "privacy.noise_multiplier=0.5"]


def sets(items: list[str]) -> list[str]:
    return [arg for item in items for arg in ("--set", item)]


def command_lines(pids: list[int]) -> dict[int, str]:
    out = {}
    for pid in pids:
        try:
            out[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            pass
    return out


def kill_server_side(flwr_home: Path) -> list[str]:
    """SIGKILL the federation's SuperLink and ServerApp processes (not its SuperNodes); what was killed."""
    killed = []
    for pid, cmd in command_lines(processes_of(flwr_home)).items():
        if "flower-superlink" in cmd or "flwr-serverapp" in cmd:
            os.kill(pid, signal.SIGKILL)
            killed.append(cmd)
    return killed


def test_a_killed_superlink_resumes_to_the_same_results(tmp_path: Path) -> None:
    pooled, clients, out = tmp_path / "pooled.jsonl", tmp_path / "clients", tmp_path / "run"
    assert main(["data", "export", "tiny", *sets(DATA), "--out", str(pooled)]) == 0
    assert main(["data", "split-clients", str(pooled), "--out", str(clients), "--user-key", "client"]) == 0
    run = [*DATA, "data.source='jsonl'", f"data.path='{pooled}'", *RUN]

    # the reference: the same run in-process, uninterrupted (the engines agree: tests/test_pinned_numbers.py)
    assert main(["run", "tiny", *sets(run), "--out", str(tmp_path / "reference")]) == 0
    reference = json.loads((tmp_path / "reference" / "results.json").read_text())["methods"]["FL"]

    federation = [sys.executable, "-m", "fedpref.cli", "federation", "tiny", "--clients-dir", str(clients)]
    federation += ["--out", str(out), *sets(run)]
    first = subprocess.Popen(federation, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 600
    while not (out / "rounds.jsonl").is_file() or len((out / "rounds.jsonl").read_text().splitlines()) < 2:
        assert first.poll() is None and time.monotonic() < deadline, "the federation ended before round 2"
        time.sleep(1)
    killed = kill_server_side(out / "flwr")
    printed = first.communicate(timeout=120)[0]
    assert any("flower-superlink" in cmd for cmd in killed) and first.returncode != 0, printed[-2000:]
    assert processes_of(out / "flwr") == []  # the command stopped every process it had started
    done_before = len((out / "rounds.jsonl").read_text().splitlines())
    assert done_before < 5 and not (out / "results.json").is_file()

    assert main(["federation", "tiny", "--clients-dir", str(clients), "--out", str(out),
                 *sets(run), "--resume"]) == 0  # fmt: skip
    resumed = json.loads((out / "results.json").read_text())["methods"]["FL"]
    rounds = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [0, 1, 2, 3, 4]
    assert resumed["personalization"] == reference["personalization"]
    assert resumed["privacy"] == reference["privacy"] and resumed["privacy"]["releases"] == 5
    assert processes_of(out / "flwr") == []
