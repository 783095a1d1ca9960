"""`fedpref sweep`: cells, validation before any run, skipping finished cells and resuming interrupted ones."""

import contextlib
import io
import json
import os
import signal
from pathlib import Path

import pytest
import torch

from fedpref.cli import main
from fedpref.errors import ConfigError
from fedpref.experiments import sweep as sweep_module
from fedpref.experiments.sweep import folder_part, parse_grid, parse_seeds

# One round, one step: seconds per cell. Without the frozen-prefix cache no client's data is encoded up front
# (4x faster here); four clients halve the personalization phase, the longest part of such a run.
FAST = ["algorithm.methods=['FL']", "federation.rounds=1", "train.local_steps=1", "personalization.steps=[0,1]"]
FAST += ["lora.cache_frozen_prefix=false", "data.group_sizes=[1,1,1,1]"]
SETS = [x for item in FAST for x in ("--set", item)]
FOLDERS = [f"train.lr={lr}/seed={s}" for s in (0, 1) for lr in ("1e-3", "3e-4")]  # seeds outer, grid inner


def sweep(out: Path, *extra: str) -> tuple[int, str]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        rc = main(
            [
                "sweep",
                "tiny",
                "--seeds",
                "0,1",
                "--grid",
                "train.lr=1e-3,3e-4",
                *SETS,
                "--out",
                str(out),
                *extra,
            ]
        )
    return rc, printed.getvalue()


def metrics(run_dir: Path) -> tuple[dict, dict]:
    """results.json's methods without wall-clock timings, and the saved initializations."""
    results = json.loads((run_dir / "results.json").read_text())
    methods = {name: {k: v for k, v in r.items() if k != "timing"} for name, r in results["methods"].items()}
    weights = torch.load(run_dir / "models" / "FL.pt", weights_only=True)
    return methods, weights


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("sweep") / "s"
    rc, printed = sweep(out)
    assert rc == 0, printed[-2000:]
    return out, printed


def test_parse_seeds_and_grid():
    assert parse_seeds("0, 1,2") == [0, 1, 2]
    assert parse_grid(["train.lr=1e-3,3e-4", "federation.rounds=2"]) == {
        "train.lr": ["1e-3", "3e-4"],
        "federation.rounds": ["2"],
    }
    for bad in ("", ",", "a,b", "1,1"):
        with pytest.raises(ConfigError, match="--seeds"):
            parse_seeds(bad)
    for bad, message in [
        ("train.lr", "expected KEY=V1,V2"),
        ("train.lr=1e-3,", "expected KEY=V1,V2"),
        ("algorithm.methods=['FL'],['CL']", "only scalar values"),
        ("seed=1,2", "--seeds"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_grid([bad])
    assert folder_part("model.backbone", '"org/model x"') == "model.backbone=_org_model_x_"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--grid", "train.lrr=1,2"], "unknown key 'train.lrr'"),
        (["--seeds", ""], "--seeds"),
        (["--grid", "train.lr=1e-3,0.001"], "have the same config"),
        (["--grid", "federation.rounds=0,1"], "federation.rounds"),
        (["--set", "seed=3"], "--seeds"),
    ],
)
def test_bad_input_stops_before_any_run(tmp_path, capsys, extra, message):
    out = tmp_path / "s"
    argv = ["sweep", "tiny", "--seeds", "0,1", *SETS, "--out", str(out), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_every_cell_runs_into_its_folder(swept):
    out, printed = swept
    index = json.loads((out / "sweep.json").read_text())
    assert [c["folder"] for c in index["cells"]] == FOLDERS
    assert [c["status"] for c in index["cells"]] == ["done"] * 4
    assert index["cells"][1]["overrides"] == {"train.lr": "3e-4"} and index["cells"][1]["seed"] == 0
    for folder, cell in zip(FOLDERS, index["cells"]):
        results = json.loads((out / folder / "results.json").read_text())
        assert results["config_hash"] == cell["config_hash"] and results["seed"] == cell["seed"]
    assert "[2/4] seed=0 train.lr=3e-4: done in" in printed
    hashes = {json.loads((out / f / "results.json").read_text())["config_hash"] for f in FOLDERS}
    assert len(hashes) == 4


def test_a_finished_sweep_is_skipped(swept):
    out, _ = swept
    rc, printed = sweep(out)
    assert rc == 0
    assert [line for line in printed.splitlines() if line.startswith("[")] == [
        f"[{i}/4] {label}: skipped (finished)"
        for i, label in enumerate(
            ["seed=0 train.lr=1e-3", "seed=0 train.lr=3e-4", "seed=1 train.lr=1e-3", "seed=1 train.lr=3e-4"], 1
        )
    ]
    assert [c["status"] for c in json.loads((out / "sweep.json").read_text())["cells"]] == ["skipped"] * 4


def test_an_interrupted_cell_is_resumed_to_the_same_metrics(swept):
    out, _ = swept
    cell = out / FOLDERS[3]
    before = metrics(cell)
    # as if killed after FL's global phase: its last checkpoint is the one before personalization
    for name in ("results.json", "table.md", "checkpoints/latest.ckpt"):
        (cell / name).unlink()
    rc, printed = sweep(out)
    assert rc == 0
    assert (
        "[4/4] seed=1 train.lr=3e-4: resuming in" in printed
        and "[4/4] seed=1 train.lr=3e-4: resumed, done in" in printed
    )
    assert printed.count("skipped (finished)") == 3
    statuses = [c["status"] for c in json.loads((out / "sweep.json").read_text())["cells"]]
    assert statuses == ["skipped"] * 3 + ["resumed"]
    after = metrics(cell)
    assert after[0] == before[0]
    assert after[1]["client_state"] == before[1]["client_state"]
    for a, b in zip(after[1]["states"], before[1]["states"], strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_folder_of_another_config_is_refused(swept, capsys):
    out, _ = swept
    rc, _ = sweep(out, "--set", "train.batch_size=2")
    assert rc == 2
    assert "holds a run of another config" in capsys.readouterr().err


def test_sigterm_marks_the_running_cell_interrupted(tmp_path, monkeypatch):
    """`kill` during a cell: sweep.json says interrupted (not running), the exit code is 130, the next cells wait."""

    def killed(cell, console, engine):
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not interrupt the cell")

    monkeypatch.setattr(sweep_module, "run_cell", killed)
    before = signal.getsignal(signal.SIGTERM)  # not always the default: Ray, started by earlier tests, sets one
    out = tmp_path / "s"
    rc, printed = sweep(out)
    assert rc == 130
    assert "[1/4] seed=0 train.lr=1e-3: interrupted (the same command continues it)" in printed
    statuses = [c["status"] for c in json.loads((out / "sweep.json").read_text())["cells"]]
    assert statuses == ["interrupted", "pending", "pending", "pending"]
    assert signal.getsignal(signal.SIGTERM) is before  # the sweep's handler does not outlive it


def test_two_sweeps_into_one_folder_keep_each_others_cells(tmp_path, monkeypatch):
    """A second `fedpref sweep --seeds 1` started while `--seeds 0` runs into the same folder: sweep.json keeps
    both seeds' cells, whichever writes last."""
    out = tmp_path / "s"
    args = ["sweep", "tiny", *SETS, "--out", str(out), "--seeds"]
    inner_started = []

    def fake_run(cell, console, engine):
        if not inner_started:  # the first cell of the first sweep: the second sweep runs meanwhile
            inner_started.append(cell.seed)
            with contextlib.redirect_stdout(io.StringIO()):
                assert main([*args, "1"]) == 0
        return 0.0

    monkeypatch.setattr(sweep_module, "run_cell", fake_run)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([*args, "0"]) == 0
    index = json.loads((out / "sweep.json").read_text())
    assert [(c["folder"], c["status"]) for c in index["cells"]] == [("seed=0", "done"), ("seed=1", "done")]
    assert index["seeds"] == [0]  # the top-level keys are the last writer's


def test_a_killed_sweeps_running_cell_is_listed_interrupted_by_the_next(tmp_path, monkeypatch):
    """SIGKILL runs no handler, so sweep.json still says running; the running entry names its process, and the
    next sweep into the folder lists a cell whose process is gone as interrupted (one still alive stays running)."""
    import socket
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = socket.gethostname()
    out = tmp_path / "s"
    out.mkdir()
    listed = [
        {"folder": "seed=1", "seed": 1, "status": "running", "pid": gone.pid, "host": host},
        {"folder": "seed=2", "seed": 2, "status": "running", "pid": os.getpid(), "host": host},
        {"folder": "seed=3", "seed": 3, "status": "running", "pid": gone.pid, "host": "another-host"},
    ]
    (out / "sweep.json").write_text(json.dumps({"cells": listed}))
    seen_while_running = []

    def fake_run(cell, console, engine):
        seen_while_running.extend(json.loads((out / "sweep.json").read_text())["cells"])
        return 0.0

    monkeypatch.setattr(sweep_module, "run_cell", fake_run)
    args = ["sweep", "tiny", *SETS, "--out", str(out), "--seeds", "0"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(args) == 0
    ours = next(c for c in seen_while_running if c["folder"] == "seed=0")
    assert (ours["status"], ours["pid"], ours["host"]) == ("running", os.getpid(), host)
    cells = {c["folder"]: c for c in json.loads((out / "sweep.json").read_text())["cells"]}
    assert cells["seed=0"]["status"] == "done" and "pid" not in cells["seed=0"]
    assert cells["seed=1"] == {"folder": "seed=1", "seed": 1, "status": "interrupted"}
    assert cells["seed=2"]["status"] == "running"
    assert cells["seed=3"]["status"] == "running"
