"""Flower's Simulation Engine as a transport: start it, find the nodes, run the caller's methods over the Grid."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from fedpref.config import ExperimentConfig
from fedpref.data.load import load_pairs
from fedpref.data.splits import split_clients
from fedpref.engines.flower.appconfig import DEFAULT_NODE_WAIT_S, DEFAULT_REPLY_TIMEOUT_S
from fedpref.models.factory import resolve_device

if TYPE_CHECKING:
    from fedpref.engines.flower.server_app import GridTransport

T = TypeVar("T")
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


def backend_config(cfg: ExperimentConfig, cpus_per_client: float | None = None) -> dict[str, Any]:
    """Flower's Ray backend config from the [flower] section: each client's CPUs (`cpus_per_client` overrides
    flower.num_cpus) and GPU fraction (on CUDA only), and `ray.init`'s arguments (the cluster's address, if set)."""
    gpus = cfg.flower.num_gpus if resolve_device(cfg.device).startswith("cuda") else 0.0
    cpus = cfg.flower.num_cpus if cpus_per_client is None else cpus_per_client
    init_args: dict[str, Any] = {"logging_level": "ERROR"}
    if cfg.flower.ray_address:
        init_args["address"] = cfg.flower.ray_address
    return {"client_resources": {"num_cpus": cpus, "num_gpus": gpus}, "init_args": init_args}


def run_simulated(
    cfg: ExperimentConfig,
    body: Callable[[GridTransport], T],
    reply_timeout_s: float = DEFAULT_REPLY_TIMEOUT_S,
    cpus_per_client: float | None = None,
    memory_dir: Path | None = None,
) -> T:
    """Start the Simulation Engine (one SuperNode per client), find the nodes, and return `body(transport)`
    run in the ServerApp; an error in `body` is raised here once the simulation has stopped. Clients keep
    their private memory snapshots in `memory_dir` (for resuming). Each client holds cfg.flower's resources
    (`cpus_per_client`, if given, overrides its CPUs); with flower.ray_address the clients run on that Ray cluster."""
    offline_env()
    from flwr.simulation import run_simulation

    from fedpref.engines.flower.client_app import fixed_config, make_client_app
    from fedpref.engines.flower.server_app import GridTransport, discover, make_server_app

    outcome: dict[str, Any] = {}

    def main(grid) -> None:
        try:
            peers = discover(grid, cfg.digest(), DEFAULT_NODE_WAIT_S, reply_timeout_s)
            outcome["value"] = body(GridTransport(grid, peers, reply_timeout_s, cfg.digest(), cfg.secure_aggregation))
        except BaseException as e:  # noqa: BLE001 - re-raised below, outside Flower's own handling
            outcome["error"] = e

    server, client = make_server_app(main), make_client_app(fixed_config(cfg), memory_dir)
    pythonpath = os.environ.get("PYTHONPATH")
    try:
        run_simulation(server, client, num_clients(cfg), backend_config=backend_config(cfg, cpus_per_client))
    finally:
        restore_env("PYTHONPATH", pythonpath)  # Flower's Ray backend rewrites it in this process
    if "error" in outcome:
        raise outcome["error"]
    if "value" not in outcome:
        raise RuntimeError("the Flower simulation ended before the server finished (see the log above)")
    return outcome["value"]
