"""The Flower deployment ServerApp (`flwr run .`): the run config's methods over the SuperNodes' grid."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedpref.algorithms.registry import check_methods, method_spec
from fedpref.engines.flower.appconfig import experiment_config, server_settings
from fedpref.engines.flower.server_app import GridTransport, discover
from fedpref.errors import ConfigError
from fedpref.experiments import outputs
from fedpref.experiments.experiment import FLOWER, pools_raw_data
from fedpref.experiments.runner import Federation, execute_method
from fedpref.models.adapters import trainable_state
from fedpref.models.factory import build_reward_model

LOG = logging.getLogger("flwr").getChild("fedpref")


def main(grid: Grid, context: Context) -> None:
    """Config and methods from the run config; results into `out-dir` (if set) and the log."""
    cfg, settings = experiment_config(context.run_config), server_settings(context.run_config)
    for name in settings.methods:
        method_spec(name)  # an unknown name: one line naming the available methods
    check_methods(cfg, "the run config")
    if central := [name for name in settings.methods if pools_raw_data(name)]:
        raise ConfigError(f"{', '.join(central)} pool raw data (centralized references); they run only in-process")
    out = Path(settings.out_dir).expanduser() if settings.out_dir else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
        outputs.write_config(cfg, out)
        (out / "rounds.jsonl").write_text("", encoding="utf-8")
    peers = discover(grid, cfg.digest(), settings.node_wait_s, settings.reply_timeout_s, settings.expected_clients)
    transport = GridTransport(grid, peers, settings.reply_timeout_s, cfg.digest())
    federation = Federation(transport, peers.infos, peers.held_out, FLOWER)
    model = build_reward_model(cfg)
    summary = {"engine": FLOWER, "config_hash": cfg.digest(), "seed": cfg.seed, "methods": {}}

    def on_round(record: dict) -> None:
        LOG.info("fedpref: %s", record)
        if out:
            with (out / "rounds.jsonl").open("a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

    for method in settings.methods:
        result, _ = execute_method(
            method, cfg, federation, None, on_round=on_round, model=(model, trainable_state(model))
        )
        LOG.info("fedpref: %s acc_mean %s", method, result["personalization"]["acc_mean"])
        summary["methods"][method] = result
        if out:
            outputs.write_json(summary, out / "results.json")


app = ServerApp()
app.main()(main)
