"""`fedpref estimate`: the prediction formula by hand, and the dry run's work and byte counts against the config."""

import json
from pathlib import Path

import pytest

from fedpref.cli import main
from fedpref.client.cost import CPU_MAX_RSS
from fedpref.config import load_config
from fedpref.experiments.estimate import Prober, UnitCost, Work, dry_run, predict_seconds, size
from fedpref.experiments.runner import trainers
from fedpref.experiments.setup import build_setup

ROOT = Path(__file__).resolve().parents[2]


def test_predicted_seconds_add_up_by_hand():
    costs = {"train": UnitCost(per_task=0.5, per_step=0.1), "personalize": UnitCost(per_step=0.2, per_pair=0.01)}
    works = [Work("train", 8, 0), Work("train", 8, 0), Work("personalize", 10, 3 * 40)]
    # train: 2 x (0.5 + 8 x 0.1) = 2.6; personalize: 10 x 0.2 + 120 x 0.01 = 3.2
    assert predict_seconds(works, costs) == pytest.approx(5.8)


def test_dry_run_counts_fedavg_work_as_the_config_says():
    cfg = load_config("tiny", ["federation.eval_every=1"])
    setup = build_setup(cfg)
    prober = Prober(trainers(cfg, setup.model), probe_steps=2)
    run = dry_run("FL", cfg, setup, prober)
    global_works, local_works = run.global_works, run.local_works
    # each of 2 rounds: 3 clients train 2 local steps, then evaluate the new global model on their 4 val pairs
    one_round = [Work("train", 2, 0)] * 3 + [Work("evaluate", 0, 4)] * 3
    assert global_works == one_round * 2
    # all 8 clients personalize for max(steps) = 2 steps, tested at 2 checkpoints on their 6 test pairs
    assert local_works == [Work("personalize", 2, 2 * 6)] * 8
    assert set(prober.costs) == {"train", "evaluate", "personalize"}
    assert prober.costs["train"].per_step > 0 and prober.costs["evaluate"].per_pair > 0
    assert run.server_s >= 0
    # tests/engines/test_traffic.py's hand count: a model is 28,033 fp32 LoRA + head parameters, 112,132 B. Each of
    # 3 clients a round gets it to train (and sends it back with its train_loss, 8 B), then the new global model
    # to evaluate (and sends back its val_loss and val_acc, 16 B)
    down, up = 2 * 112132, 112132 + 8 + 16
    assert run.traffic == {"down": 3 * down, "up": 3 * up, "down_per_client": down, "up_per_client": up}
    assert prober.memory_kind == CPU_MAX_RSS and prober.peak_bytes["train"] > 0  # this machine has no GPU in the tests


def test_estimate_command_writes_a_prediction_per_method(tmp_path, capsys):
    out = tmp_path / "estimate.json"
    tiny = "tiny"
    assert main(["estimate", tiny, "--set", "algorithm.methods=['Local','FL']", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "predicted wall time" in printed and "predicted bytes a round" in printed and "timed on" in printed
    estimate = json.loads(out.read_text())
    assert set(estimate["methods"]) == {"Local", "FL"}
    fl = estimate["methods"]["FL"]
    assert fl["work"]["train"] == {"tasks": 6, "steps": 12, "pairs": 0}
    assert fl["bytes_a_round"]["down_per_client"] == 112132 and estimate["methods"]["Local"]["bytes_a_round"]["up"] == 0
    assert fl["peak_memory_bytes"] > 0 and estimate["measured_on"]["machine"]
    assert estimate["total_s"] == pytest.approx(
        estimate["setup_s"] + sum(m["total_s"] for m in estimate["methods"].values()), abs=0.2
    )


def test_every_method_dry_runs_on_stand_in_replies():
    """The stand-ins satisfy every algorithm: phases, reassignments, latent priors and selectors all run."""
    from fedpref.algorithms.registry import names

    cfg = load_config("tiny", ["data.unseen_clients=2", "algorithm.methods=['FL']"])
    setup = build_setup(cfg)
    prober = Prober(trainers(cfg, setup.model), probe_steps=1)
    for name in (n for n in names() if n != "Multi-CL"):  # Multi-CL cannot start unseen clients
        run = dry_run(name, cfg, setup, prober)
        global_works, local_works = run.global_works, run.local_works
        assert len(local_works) >= len(setup.splits), name  # every client personalizes (and more for selectors)
        assert all(w.kind in prober.costs for w in global_works + local_works), name


def test_sizes_print_in_powers_of_a_thousand():
    assert [size(x) for x in (None, 512, 112132, 1137828, 2.1e9)] == ["–", "512 B", "112 kB", "1.1 MB", "2.1 GB"]
