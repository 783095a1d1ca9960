"""The Flower app config ([tool.flwr.app.config] or --run-config) mapped onto the typed ExperimentConfig."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedpref.config import ExperimentConfig, find_config, load_config
from fedpref.errors import ConfigError

DEFAULT_REPLY_TIMEOUT_S = 600.0  # the longest a stage waits for its replies (mirrored in pyproject.toml)
DEFAULT_NODE_WAIT_S = 120.0  # the longest the server waits for every partition's node to connect
DEFAULT_PULL_INTERVAL_S = 0.2  # how often a deployed stage asks the SuperLink for its replies (Flower's own: 3 s)


@dataclass(frozen=True)
class ServerSettings:
    """What the ServerApp needs besides the experiment config."""

    methods: tuple[str, ...]
    reply_timeout_s: float = DEFAULT_REPLY_TIMEOUT_S
    node_wait_s: float = DEFAULT_NODE_WAIT_S
    out_dir: str = ""
    expected_clients: int = 0  # nodes with their own data file: how many to wait for (0: partitions say)
    resume: bool = False  # continue from the last complete checkpoint in out_dir
    pull_interval_s: float = DEFAULT_PULL_INTERVAL_S


def split_overrides(text: str) -> list[str]:
    """`--set`-style overrides, separated by ';' (e.g. "federation.rounds=2; train.local_steps=1")."""
    return [item.strip() for item in text.split(";") if item.strip()]


def resolve_config_path(text: str) -> Path:
    """An absolute path; a relative one against the working directory, else the installed app (FAB) folder,
    else the shipped config of that name ('tiny').

    Flower puts the app folder on sys.path, and the FAB carries src/**/*.toml (see fab-include).
    """
    path = Path(text).expanduser()
    if path.is_absolute() or path.is_file():
        return path
    found = (Path(base) / path for base in sys.path if base)
    try:
        return next((p for p in found if p.is_file()), None) or find_config(text)
    except ConfigError:
        return path  # loading it says what is missing


def experiment_config(run_config: Mapping[str, Any]) -> ExperimentConfig:
    """The experiment config named by the run config: `config-path` (a TOML file) plus `overrides`."""
    path = str(run_config.get("config-path", ""))
    if not path:
        raise ConfigError("the Flower run config needs 'config-path' (an experiment TOML file)")
    return load_config(resolve_config_path(path), split_overrides(str(run_config.get("overrides", ""))))


def server_settings(run_config: Mapping[str, Any]) -> ServerSettings:
    """`method` names one method or several, comma-separated ("FL,FedGD"); they run one after another."""
    methods = tuple(name.strip() for name in str(run_config.get("method", "")).split(",") if name.strip())
    if not methods:
        raise ConfigError('the Flower run config needs \'method\' (e.g. "FL" or "FL,FedGD")')
    pull_interval_s = float(run_config.get("pull-interval", DEFAULT_PULL_INTERVAL_S))
    if pull_interval_s <= 0:
        raise ConfigError(f"the Flower run config's 'pull-interval' must be > 0 seconds, got {pull_interval_s}")
    return ServerSettings(
        methods=methods,
        reply_timeout_s=float(run_config.get("reply-timeout", DEFAULT_REPLY_TIMEOUT_S)),
        node_wait_s=float(run_config.get("node-wait", DEFAULT_NODE_WAIT_S)),
        out_dir=str(run_config.get("out-dir", "")),
        expected_clients=int(run_config.get("clients", 0)),
        resume=bool(run_config.get("resume", False)),
        pull_interval_s=pull_interval_s,
    )
