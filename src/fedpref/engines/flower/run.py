"""Run methods through Flower's Simulation Engine, returning what the in-process runner returns."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fedpref.algorithms.base import Algorithm
from fedpref.config import ExperimentConfig
from fedpref.data.splits import split_clients
from fedpref.engines.flower.appconfig import DEFAULT_NODE_WAIT_S, DEFAULT_REPLY_TIMEOUT_S, ServerSettings
from fedpref.experiments.setup import Setup, load_pairs

CENTRALIZED_METHODS = ("CL", "Multi-CL")  # they pool raw data, so they have no federated form
Progress = Callable[[str, int, int], None]
QUIET_ENV = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
}


def offline_env() -> None:
    """No telemetry, no run-time dependency installation, no Ray usage stats (unless the caller set them)."""
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)


def restore_env(key: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = value


def num_clients(cfg: ExperimentConfig) -> int:
    """How many SuperNodes the simulation needs: one per client (partition), in the in-process client order."""
    return len(split_clients(load_pairs(cfg), cfg.data.val_pairs, cfg.data.test_pairs, cfg.seed))


def backend_config(cfg: ExperimentConfig, cpus_per_client: float) -> dict[str, Any]:
    gpus = 1.0 if cfg.device.startswith("cuda") else 0.0
    return {
        "client_resources": {"num_cpus": cpus_per_client, "num_gpus": gpus},
        "init_args": {"logging_level": "ERROR"},
    }


def run_flower_simulation(
    cfg: ExperimentConfig,
    method: str,
    progress: Progress | None = None,
    on_round: Callable[[dict], None] | None = None,
    reply_timeout_s: float = DEFAULT_REPLY_TIMEOUT_S,
    inspect: Callable[[Algorithm], None] | None = None,
) -> tuple[dict, list[dict]]:
    """(result, round log) of `method`, as `runner.run_method` returns them; `inspect` sees the final algorithm."""
    see = (lambda name, algorithm: inspect(algorithm)) if inspect else None
    return run_flower_methods(cfg, [method], progress, on_round, reply_timeout_s, inspect=see)[method]


def run_flower_methods(
    cfg: ExperimentConfig,
    methods: list[str],
    progress: Progress | None = None,
    on_round: Callable[[dict], None] | None = None,
    reply_timeout_s: float = DEFAULT_REPLY_TIMEOUT_S,
    cpus_per_client: float = 1.0,
    inspect: Callable[[str, Algorithm], None] | None = None,
) -> dict[str, tuple[dict, list[dict]]]:
    """Several federated methods in one simulation (one Ray start; each node encodes its data once)."""
    offline_env()
    from flwr.simulation import run_simulation

    from fedpref.engines.flower.client_app import fixed_config, make_client_app
    from fedpref.engines.flower.server_app import make_server_app

    out: dict[str, tuple[dict, list[dict]]] = {}

    def round_done(record: dict) -> None:
        if progress:
            progress(f"{record['method']}: rounds (flower)", record["round"] + 1, cfg.federation.rounds)
        if on_round:
            on_round(record)

    def sink(method: str, result: dict, log: list[dict], algorithm: Algorithm) -> None:
        out[method] = result, log
        if inspect:
            inspect(method, algorithm)

    settings = ServerSettings(tuple(methods), reply_timeout_s, DEFAULT_NODE_WAIT_S)
    server, client = make_server_app(cfg, settings, sink, round_done), make_client_app(fixed_config(cfg))
    pythonpath = os.environ.get("PYTHONPATH")
    try:
        run_simulation(server, client, num_clients(cfg), backend_config=backend_config(cfg, cpus_per_client))
    finally:
        restore_env("PYTHONPATH", pythonpath)  # Flower's Ray backend rewrites it in this process
    if missing := [name for name in methods if name not in out]:
        raise RuntimeError(f"the Flower simulation ended without a result for {missing} (see the log above)")
    return out


def run_flower_experiment(
    names: list[str],
    cfg: ExperimentConfig,
    setup: Setup,
    progress: Progress | None = None,
    on_round: Callable[[dict], None] | None = None,
    models_dir: Path | None = None,
) -> dict[str, dict]:
    """`fedpref run --engine flower`: every federated method of `names` in one simulation (one Ray start; each
    node encodes its data once), then on this side (which holds every client in a simulation) what the
    in-process runner adds: the saved initializations, the diagnostics when enabled, and a latent selector's
    evaluation. CL and Multi-CL pool raw data, so they stay in-process. Returns method -> results.json entry,
    in the order of `names`."""
    from fedpref.experiments import runner

    federated = [name for name in names if name not in CENTRALIZED_METHODS]
    final: dict[str, Algorithm] = {}
    outcome = run_flower_methods(cfg, federated, progress, on_round, inspect=final.__setitem__) if federated else {}
    results = {}
    for name in names:
        if name in CENTRALIZED_METHODS:
            result, _ = runner.run_method(name, cfg, setup, progress, on_round, models_dir)
            result["engine"] = "inprocess (centralized reference: pools raw data, not federated)"
        else:
            result = outcome[name][0]
            add_server_side_results(result, final[name], cfg, setup, models_dir)
        results[name] = result
    return results


def add_server_side_results(
    result: dict, algorithm: Algorithm, cfg: ExperimentConfig, setup: Setup, models_dir: Path | None
) -> None:
    from fedpref.experiments import runner

    inits = runner.initializations(algorithm, setup)
    if models_dir is not None:
        runner.save_initializations(inits, models_dir / f"{algorithm.name}.pt")
    if cfg.diagnostics.enabled:
        result["diagnostics"] = runner.run_diagnostics(algorithm.name, inits, cfg, setup)
    if hasattr(algorithm, "selector_tasks"):  # a latent-conditioned selector: seen and unseen clients
        result["selector"] = runner.evaluate_selector(algorithm, cfg, setup)
