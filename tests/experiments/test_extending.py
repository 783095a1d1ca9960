"""docs/extending.md's worked example, FedAvgM, through the command line on both engines, with the same numbers."""

import json
from pathlib import Path

import pytest

from fedpref.cli import main

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.toml"
SETS = [
    "algorithm.methods=['FedAvgM']",
    "algorithm.options.FedAvgM.momentum=0.5",
    # seconds, not minutes: 4 clients (4 Flower nodes), 1 local step, no personalization steps; the two rounds
    # still take a momentum step each
    "data.group_sizes=[1, 1, 1, 1]",
    "train.local_steps=1",
    "personalization.steps=[0]",
]


def run_example(out: Path, *engine: str) -> tuple[dict, list[dict]]:
    """(results.json's FedAvgM entry, its round log) of `fedpref run configs/tiny.toml` with SETS."""
    sets = [arg for item in SETS for arg in ("--set", item)]
    assert main(["run", str(TINY), "--out", str(out), *sets, *engine]) == 0
    log = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    return json.loads((out / "results.json").read_text())["methods"]["FedAvgM"], log


@pytest.fixture(scope="module")
def inprocess(tmp_path_factory) -> tuple[dict, list[dict]]:
    return run_example(tmp_path_factory.mktemp("fedavgm") / "inprocess")


def test_the_example_runs_inprocess(inprocess):
    result, log = inprocess
    assert [r["round"] for r in log] == [0, 1] and all(len(r["sampled"]) == 3 for r in log)
    assert len(result["personalization"]["per_client"]) == 4


@pytest.mark.flower
def test_the_example_runs_on_flower_with_the_same_numbers(inprocess, tmp_path):
    pytest.importorskip("ray", reason="the Flower Simulation Engine needs flwr[simulation] (Ray)")
    (ours, our_log), (theirs, their_log) = inprocess, run_example(tmp_path / "flower", "--engine", "flower")
    assert theirs["engine"] == "flower"
    assert [r["sampled"] for r in their_log] == [r["sampled"] for r in our_log]
    assert [r["train_loss"] for r in their_log] == pytest.approx([r["train_loss"] for r in our_log], rel=1e-5)
    assert theirs["personalization"]["acc_mean"] == pytest.approx(ours["personalization"]["acc_mean"], abs=1e-9)


def test_help_and_checks_know_the_example(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "algorithm.options.FedAvgM.momentum" in capsys.readouterr().out
    sets = ["--set", "algorithm.methods=['FedAvgMM']"]
    assert main(["run", str(TINY), "--out", str(tmp_path / "o"), *sets]) == 2  # before any data or model loads
    error = capsys.readouterr().err
    assert "unknown method(s) ['FedAvgMM']; choose from" in error and "FedAvgM" in error.split("choose from")[1]
    assert not (tmp_path / "o").exists()
