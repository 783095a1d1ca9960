"""docs/extending.md's worked example, FedAvgM: the registry, `--help` and the checks know it. It runs on both
engines in the shared tiny runs (tests/conftest.py), whose numbers tests/test_pinned_numbers.py pins for each."""

import json
from pathlib import Path

import pytest

from fedpref.cli import main
from fedpref.config import load_config

TINY = Path(__file__).resolve().parents[2] / "src/fedpref/configs/quick/tiny.toml"


def test_the_example_runs_with_its_own_options(tiny_every_method):
    out, _ = tiny_every_method
    results = json.loads((out / "results.json").read_text())
    assert load_config(out / "config.toml").algorithm.options == {"FedAvgM": {"momentum": 0.5}}
    log = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    rounds = [r for r in log if r["method"] == "FedAvgM"]
    assert [r["round"] for r in rounds] == [0, 1] and all(len(r["sampled"]) == 3 for r in rounds)
    fedavg, momentum = (results["methods"][m]["personalization"]["acc_mean"] for m in ("FL", "FedAvgM"))
    assert momentum != fedavg  # the momentum step changed the model


def test_help_and_checks_know_the_example(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "algorithm.options.FedAvgM.momentum" in capsys.readouterr().out
    sets = ["--set", "algorithm.methods=['FedAvgMM']"]
    assert main(["run", str(TINY), "--out", str(tmp_path / "o"), *sets]) == 2  # before any data or model loads
    error = capsys.readouterr().err
    assert "unknown method(s) ['FedAvgMM']; choose from" in error and "FedAvgM" in error.split("choose from")[1]
    assert not (tmp_path / "o").exists()
