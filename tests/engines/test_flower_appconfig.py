"""The Flower run config maps onto the typed ExperimentConfig; `fedpref run --engine` picks the engine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fedpref.config import load_config
from fedpref.engines.flower import appconfig
from fedpref.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "src/fedpref/configs/quick/tiny.toml"


def test_run_config_gives_the_same_config_as_load_config() -> None:
    run_config = {
        "config-path": str(TINY),
        "overrides": "federation.rounds=3; data.group_sizes=[1, 1, 0, 0]; federation.clients_per_round=2;",
    }
    expected = load_config(
        TINY, ["federation.rounds=3", "data.group_sizes=[1, 1, 0, 0]", "federation.clients_per_round=2"]
    )
    assert appconfig.experiment_config(run_config) == expected


def test_relative_config_path_falls_back_to_the_app_folder_on_sys_path(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(ROOT), *sys.path])
    assert appconfig.experiment_config({"config-path": "tiny"}) == load_config(TINY)


def test_bad_run_configs_are_named() -> None:
    with pytest.raises(ConfigError, match="config-path"):
        appconfig.experiment_config({})
    with pytest.raises(ConfigError, match="unknown key"):
        appconfig.experiment_config({"config-path": str(TINY), "overrides": "federation.roundz=3"})
    with pytest.raises(ConfigError, match="method"):
        appconfig.server_settings({})
    with pytest.raises(ConfigError, match="pull-interval"):
        appconfig.server_settings({"method": "FL", "pull-interval": 0})


def test_server_settings() -> None:
    s = appconfig.server_settings({"method": "FL, FedGD", "reply-timeout": 30, "out-dir": "/tmp/x"})
    assert s.methods == ("FL", "FedGD") and s.reply_timeout_s == 30.0 and s.out_dir == "/tmp/x"
    assert s.node_wait_s == appconfig.DEFAULT_NODE_WAIT_S and s.pull_interval_s == appconfig.DEFAULT_PULL_INTERVAL_S
    assert appconfig.server_settings({"method": "FL", "pull-interval": 0.5}).pull_interval_s == 0.5


def test_pyproject_app_config_names_the_apps_and_valid_keys() -> None:
    import tomllib

    app = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["flwr"]["app"]
    assert app["components"] == {
        "serverapp": "fedpref.apps.deployment:app",
        "clientapp": "fedpref.engines.flower.node_app:app",
    }
    settings = appconfig.server_settings(app["config"])
    assert settings.reply_timeout_s == appconfig.DEFAULT_REPLY_TIMEOUT_S
    assert settings.pull_interval_s == appconfig.DEFAULT_PULL_INTERVAL_S
    assert appconfig.experiment_config({**app["config"], "config-path": str(ROOT / app["config"]["config-path"])})


def test_cli_engine_flag() -> None:
    from fedpref.cli import build_parser

    assert build_parser().parse_args(["run", "c.toml"]).engine == "inprocess"
    assert build_parser().parse_args(["run", "c.toml", "--engine", "flower"]).engine == "flower"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "c.toml", "--engine", "grpc"])
