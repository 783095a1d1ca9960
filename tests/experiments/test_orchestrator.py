"""The orchestrator: one config check that returns a plan, and the run folder's rules, once."""

import pytest

from fedpref.config import load_config
from fedpref.errors import ConfigError, FedprefError
from fedpref.experiments.orchestrator import API_WORDS, FLOWER, check_config, open_run_dir


def test_check_config_plans_where_each_method_runs():
    cfg = load_config(None, ["algorithm.methods=['CL', 'FL', 'Multi-CL', 'FedGD']"])
    plan = check_config(cfg, "x.toml", FLOWER)
    assert (plan.engine, plan.federated, plan.centralized) == (FLOWER, ["FL", "FedGD"], ["CL", "Multi-CL"])
    assert plan.methods == ["CL", "FL", "Multi-CL", "FedGD"] and plan.cfg is cfg


@pytest.mark.parametrize(
    "overrides, engine, message",
    [
        ([], "ray", "engine = 'ray': must be 'inprocess' or 'flower'"),
        (["algorithm.methods=['FLL']"], "inprocess", r"x.toml: 'algorithm.methods' has unknown method\(s\) \['FLL'\]"),
        (  # a rule Multi-CL declares on its MethodSpec
            ["data.unseen_clients=2", "algorithm.methods=['FL', 'Multi-CL']"],
            "inprocess",
            "x.toml: 'data.unseen_clients' cannot go with Multi-CL",
        ),
        (  # the rule the multi-model flag implies, with the synthetic benchmark's 4 clients
            [
                "data.group_sizes=[1, 1, 1, 1]",
                "federation.clients_per_round=2",
                "algorithm.num_models=5",
                "algorithm.methods=['FedGD', 'Soft-FL']",
            ],
            "inprocess",
            r"x.toml: 4 client\(s\), fewer than algorithm.num_models = 5 for FedGD, Soft-FL$",
        ),
        (["model.head='selector'", "model.backbone='minilm'"], "inprocess", "'selector' needs a causal-LM backbone"),
    ],
)
def test_check_config_refuses_with_one_line(overrides, engine, message):
    cfg = load_config(None, [o for o in overrides if not o.startswith("model.head")])
    if any(o.startswith("model.head") for o in overrides):
        cfg.model.head = "selector"  # set after loading: check_config validates the values again
    with pytest.raises(ConfigError, match=message):
        check_config(cfg, "x.toml", engine)


def test_open_run_dir_rules_in_the_words_of_each_entry_point(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(FedprefError, match="--resume and --overwrite exclude each other"):
        open_run_dir(run, overwrite=True, resume=True)
    with pytest.raises(FedprefError, match="resume=True and overwrite=True exclude each other"):
        open_run_dir(run, overwrite=True, resume=True, words=API_WORDS)
    with pytest.raises(FedprefError, match="nothing to resume"):
        open_run_dir(run, resume=True)
    assert open_run_dir(run) == run and run.is_dir()
    (run / "notes.txt").write_text("mine")
    with pytest.raises(FedprefError, match="is not empty; pass --overwrite or choose another --out"):
        open_run_dir(run)
    with pytest.raises(FedprefError, match="is not empty; pass overwrite=True or choose another out"):
        open_run_dir(run, words=API_WORDS)
    open_run_dir(run, overwrite=True)
    assert run.is_dir() and not any(run.iterdir())
