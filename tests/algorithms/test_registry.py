"""The method registry: names, flags, checks and options of every method, and every method builds."""

import pytest
from tiny_runs import tiny

from fedpref.algorithms.registry import (
    METHOD_MODULES,
    build_algorithm,
    check_methods,
    help_rows,
    method_options,
    methods,
    names,
)
from fedpref.config import load_config
from fedpref.errors import ConfigError
from fedpref.experiments.outputs import to_toml

PAPERS = [
    "Local", "CL", "Multi-CL", "FL", "FL_target", "FedGD", "FedBiscuit", "Soft-FL",
    "FedVPL", "FedVPL+Ortho", "FedVPL+GB", "FedVPA-GP",
]  # fmt: skip


def test_every_method_in_module_order():
    assert list(methods()) == [*PAPERS, "FedAvgM"]
    assert names(centralized=True) == ["CL", "Multi-CL"]
    assert len(METHOD_MODULES) == len(set(METHOD_MODULES))


def test_every_method_builds_on_the_tiny_config(tiny_setup):
    s = tiny_setup
    cfg = tiny(list(methods()), "algorithm.num_models=2")
    check_methods(cfg)
    for name in methods():
        algorithm = build_algorithm(name, cfg, s.infos, s.init_state, s.model, held_out=["x"])
        assert (algorithm.name, algorithm.held_out) == (name, ["x"])


def test_unknown_method_names_the_available_ones(tiny_setup):
    s = tiny_setup
    with pytest.raises(ConfigError, match=r"method 'FedAvgg' is not implemented yet \(available: Local, CL, .*FedAvgM"):
        build_algorithm("FedAvgg", tiny(["FL"]), s.infos, s.init_state, s.model)
    with pytest.raises(ConfigError, match=r"^x.toml: 'algorithm.methods' has unknown method\(s\) \['FedAvgg'\]"):
        check_methods(load_config(None, ["algorithm.methods=['FL', 'FedAvgg']"]), "x.toml")


def test_impossible_settings_are_one_line_config_errors(tiny_setup):
    s = tiny_setup
    with pytest.raises(ConfigError, match="^FedBiscuit: .*algorithm.num_models = 9 models, but there are 8 clients"):
        build_algorithm("FedBiscuit", tiny(["FL"], "algorithm.num_models=9"), s.infos, s.init_state, s.model)


def test_method_options_from_the_config():
    assert method_options(load_config(None), "FedAvgM").momentum == 0.9  # the defaults
    cfg = load_config(None, ["algorithm.options.FedAvgM.momentum=0", "algorithm.options.FedAvgM.server_lr=2"])
    assert (method_options(cfg, "FedAvgM").momentum, method_options(cfg, "FedAvgM").server_lr) == (0.0, 2.0)
    assert method_options(cfg, "FL") is None
    wrong = {
        "algorithm.options.FedAvgM.beta=0.5": r"unknown key 'algorithm.options.FedAvgM.beta' \(known here: momentum",
        "algorithm.options.FedAvgM.momentum=1.5": r"'algorithm.options.FedAvgM': momentum must be in \[0, 1\)",
        "algorithm.options.FedAvgM.momentum='high'": "'algorithm.options.FedAvgM.momentum' must be float",
        "algorithm.options.FL.beta=0.5": "'algorithm.options.FL': FL has no options",
        "algorithm.options.FedAvgN.beta=0.5": "'algorithm.options.FedAvgN' names no method; choose from Local",
    }
    for item, message in wrong.items():
        with pytest.raises(ConfigError, match=message):
            check_methods(load_config(None, [item]))
    with pytest.raises(ConfigError, match="'algorithm.options.FedAvgM' must be a table"):
        load_config(None, ["algorithm.options.FedAvgM=0.5"])


def test_options_keep_old_config_hashes_and_round_trip(tmp_path):
    plain = load_config(None)
    assert "options" not in plain.to_dict()["algorithm"]  # the hash of a config without options is unchanged
    cfg = load_config(None, ["algorithm.options.FedAvgM.momentum=0.5"])
    assert cfg.digest() != plain.digest()
    (tmp_path / "config.toml").write_text(to_toml(cfg.to_dict()))
    assert load_config(tmp_path / "config.toml") == cfg


def test_help_lists_every_method_and_option():
    rows = dict(help_rows())
    assert set(methods()) <= set(rows)
    assert rows["  algorithm.options.FedAvgM.momentum"].endswith("(default 0.9)")
    assert "in-process" in rows["CL"] and "K models" in rows["FedGD"]


def test_method_rules_are_declared_by_the_methods():
    """Multi-CL declares its own rule; every multi-model method the K <= clients one (by its flag)."""
    from fedpref.algorithms.centralized import no_unseen_clients
    from fedpref.algorithms.registry import check_method_rules, method_spec, models_fit_clients

    assert method_spec("Multi-CL").rules() == (no_unseen_clients,)
    assert all(method_spec(m).rules() == (models_fit_clients,) for m in ("FedGD", "FedBiscuit", "Soft-FL"))
    assert method_spec("FL").rules() == ()
    cfg = load_config(None, ["algorithm.methods=['FL', 'FedGD', 'Soft-FL']", "algorithm.num_models=4"])
    check_method_rules(cfg, None)  # before the data loads: the client count is not known
    check_method_rules(cfg, 4)
    with pytest.raises(
        ConfigError, match=r"^d.jsonl: 3 client\(s\), fewer than algorithm.num_models = 4 for FedGD, Soft-FL$"
    ):
        check_method_rules(cfg, 3, "d.jsonl")
