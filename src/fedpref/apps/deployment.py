"""The Flower deployment ServerApp (`flwr run .`): the run config's methods over the SuperNodes' grid."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedpref.algorithms.registry import method_spec
from fedpref.config import ExperimentConfig
from fedpref.engines.checkpoint import CheckpointStore
from fedpref.engines.flower.appconfig import experiment_config, server_settings
from fedpref.engines.flower.polling_grid import PollingGrid
from fedpref.engines.flower.server_app import GridTransport, discover
from fedpref.errors import ConfigError
from fedpref.experiments import outputs
from fedpref.experiments.experiment import new_results
from fedpref.experiments.orchestrator import FLOWER, check_config, checkpoint_saver, load_resume_state, run_methods
from fedpref.experiments.runner import Federation
from fedpref.models.adapters import trainable_state
from fedpref.models.factory import build_reward_model
from fedpref.results import RUNNING, ResultsWriter, RunResults

LOG = logging.getLogger("flwr").getChild("fedpref")


def main(grid: Grid, context: Context) -> None:
    """Config and methods from the run config; results, rounds and checkpoints into `out-dir` (if set) and the log.
    With `resume = true` the run continues from the last complete checkpoint in `out-dir` (after the SuperLink or
    this ServerApp was killed): finished methods are kept, the interrupted one resumes at its next round, and the
    results equal an uninterrupted run's."""
    cfg, settings = experiment_config(context.run_config), server_settings(context.run_config)
    for name in settings.methods:
        method_spec(name)  # an unknown name: one line naming the available methods
    plan = check_config(cfg, "the run config", FLOWER)
    if central := [name for name in settings.methods if name in plan.centralized]:
        raise ConfigError(f"{', '.join(central)} pool raw data (centralized references); they run only in-process")
    out = Path(settings.out_dir).expanduser() if settings.out_dir else None
    saved = resume_state(out, cfg, settings.resume)
    started = time.perf_counter()
    results = RunResults.from_dict(saved["results"]) if saved else new_results(cfg)
    results.engine = FLOWER
    if out:
        out.mkdir(parents=True, exist_ok=True)
        if saved is None:
            outputs.write_config(cfg, out)
    grid = PollingGrid(grid, settings.pull_interval_s)
    peers = discover(grid, cfg.digest(), settings.node_wait_s, settings.reply_timeout_s, settings.expected_clients)
    transport = GridTransport(grid, peers, settings.reply_timeout_s, cfg.digest(), cfg.secure_aggregation)
    federation = Federation(transport, peers.infos, peers.held_out, FLOWER)
    model = build_reward_model(cfg)
    log = RoundsLog(out, saved["rounds"] if saved else [])
    save = checkpoint_saver(CheckpointStore(out / "checkpoints") if out else None, cfg, results, log.records)
    # No file before the first method is done (a deployment's out-dir holds only config and rounds until then);
    # then one after each method but the last, whose results come in the finished file: `fedpref federation`
    # stops the processes once every method is in the file, which so is already the final one.
    writer = ResultsWriter(out)
    pending = [name for name in settings.methods if name not in results.methods]

    def on_method(name: str, result: dict) -> None:
        LOG.info("fedpref: %s acc_mean %s", name, result["personalization"]["acc_mean"])
        if name != pending[-1]:
            writer.write(results, RUNNING)

    def fresh_model() -> tuple:
        return model, trainable_state(model)  # each method starts from the untrained state

    try:
        run_methods(
            plan, pending, federation, results, save, saved, fresh_model=fresh_model, on_round=log, on_method=on_method
        )
    except BaseException as e:
        if results.methods:  # only a file that exists already: the first method's results create it
            writer.fail(results, e)
        raise
    results.timing = {"wall_s": round(time.perf_counter() - started, 1)}
    writer.finish(results)


def resume_state(out: Path | None, cfg: ExperimentConfig, resume: bool) -> dict | None:
    """The last complete checkpoint in `out` when resuming (an error when there is none to resume)."""
    if not resume:
        return None
    if out is None:
        raise ConfigError("resume = true needs the run config's 'out-dir' (where the checkpoints are)")
    saved = load_resume_state(CheckpointStore(out / "checkpoints"), cfg)
    if saved is None:
        raise ConfigError(f"{out}: nothing to resume (no complete checkpoint in {out / 'checkpoints'})")
    return saved


class RoundsLog:
    """Each round's record into the log and, with a run folder, rounds.jsonl (rewritten from `records` on resume)."""

    def __init__(self, out: Path | None, records: list[dict]):
        self.file = outputs.RoundLog(out / "rounds.jsonl", records) if out else None
        self.records = self.file.records if self.file else list(records)  # what a checkpoint keeps of the rounds

    def __call__(self, record: dict) -> None:
        LOG.info("fedpref: %s", record)
        if self.file:
            self.file(record)
        else:
            self.records.append(record)


app = ServerApp()
app.main()(main)
