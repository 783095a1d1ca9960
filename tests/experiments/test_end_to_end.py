"""One end-to-end run of every implemented method on the tiny config, through the CLI (tests/conftest.py)."""

import json
import shutil

from fedpref.algorithms.registry import methods, names
from fedpref.cli import main


def test_every_method_end_to_end(tiny_every_method):
    out, printed = tiny_every_method  # its numbers are pinned in tests/test_pinned_numbers.py
    assert "acc^0" in printed

    results = json.loads((out / "results.json").read_text())
    assert set(methods()) == set(results["methods"])  # docs/extending.md's example FedAvgM too
    assert results["config_hash"] and results["seed"] == 0
    for name, r in results["methods"].items():
        curves = r["personalization"]
        assert curves["steps"] == [0, 2]
        assert len(curves["per_client"]) == 8, name
        assert set(curves["by_group"]) == {"G1", "G2", "G3", "G4"}
    for name in names(variational=True):
        assert set(results["methods"][name]["selector"]) == {"seen", "latent_trace"}
        assert len(results["methods"][name]["selector"]["seen"]["per_client"]) == 8
    for name in ("config.toml", "rounds.jsonl", "table.md", "personalization.png", "latents.png"):
        assert (out / name).stat().st_size > 0, name
    from fedpref.config import load_config

    assert load_config(out / "config.toml").to_dict()["algorithm"]["methods"] == list(results["methods"])
    log = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert {r["method"] for r in log} >= {"FL", "CL", "Multi-CL"}
    assert all(len(r["sampled"]) == 3 for r in log if r["method"] == "FL")


def test_diagnose_a_finished_run(tiny_every_method, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(tiny_every_method[0], out)  # diagnose writes into the run folder
    assert (out / "models" / "FL.pt").is_file()
    assert main(["diagnose", str(out), "--set", "diagnostics.steps=2", "--method", "FL"]) == 0
    methods = json.loads((out / "results.json").read_text())["methods"]
    diag = methods["FL"]["diagnostics"]
    assert diag["GQ_mean"] >= 0 and 0 <= diag["H+_W"] <= 100
    assert not methods["CL"]["diagnostics"]  # only the method asked for
    assert "GQ_B" in capsys.readouterr().out
    assert "Diagnostics" in (out / "table.md").read_text()
    assert main(["diagnose", str(out), "--method", "FedGPT"]) == 2
    assert "no method FedGPT" in capsys.readouterr().err


def test_unseen_clients_never_train_and_are_evaluated(tmp_path):
    out = tmp_path / "run"
    args = ["--set", "algorithm.methods=['FL','CL','FedBiscuit','FedVPA-GP']", "--set", "data.unseen_clients=2"]
    assert main(["run", "tiny", "--out", str(out), *args]) == 0
    results = json.loads((out / "results.json").read_text())
    unseen = set(results["methods"]["FedVPA-GP"]["selector"]["unseen"]["per_client"])
    seen = set(results["methods"]["FedVPA-GP"]["selector"]["seen"]["per_client"])
    assert len(unseen) == 2 and len(seen) == 6 and not unseen & seen
    log = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    sampled = {c for r in log if r["method"] in ("FL", "FedVPA-GP") for c in r["sampled"]}
    sampled |= {
        c
        for r in log
        if r["method"] == "FedBiscuit" and "sampled" in r
        for per_model in r["sampled"]
        for c in per_model
    }
    assert sampled and not sampled & unseen
    final_selection = results["methods"]["FedBiscuit"]["assignments"][-1]["assignment"]
    assert set(final_selection) == seen | unseen  # unseen clients pick a model on their own validation data
    assert set(results["methods"]["FL"]["personalization"]["per_client"]) == seen | unseen  # still personalized
    assert results["data"]["unseen_clients"] == sorted(unseen)
