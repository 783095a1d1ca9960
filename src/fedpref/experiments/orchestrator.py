"""The one orchestrator: check a config once into a Plan, open its run folder, run the plan's methods."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torch import nn

from fedpref.algorithms.registry import check_methods, method_spec
from fedpref.config import ExperimentConfig, validate
from fedpref.engines.checkpoint import CheckpointStore
from fedpref.errors import ConfigError, FedprefError
from fedpref.experiments.outputs import prepare_run_dir
from fedpref.experiments.runner import INPROCESS, Checkpoints, Federation, execute_method
from fedpref.experiments.setup import Setup
from fedpref.models.adapters import State
from fedpref.models.factory import check_model_config
from fedpref.results import MethodResult, RunResults

FLOWER = "flower"
ENGINES = (INPROCESS, FLOWER)

# How the run-folder refusals name the options: the command line's flags, or the Python API's arguments.
CLI_WORDS = {"resume": "--resume", "overwrite": "--overwrite", "out": "--out"}
API_WORDS = {"resume": "resume=True", "overwrite": "overwrite=True", "out": "out"}


@dataclass(frozen=True)
class Plan:
    """A checked config and what runs where: the federated methods on `engine`, the centralized references
    (they pool raw data) always in-process."""

    cfg: ExperimentConfig
    source: str  # the config's name in messages
    engine: str = INPROCESS
    federated: list[str] = field(default_factory=list)
    centralized: list[str] = field(default_factory=list)

    @property
    def methods(self) -> list[str]:
        """Every method, in the config's order."""
        return list(self.cfg.algorithm.methods)


def check_config(
    cfg: ExperimentConfig, source: str = "<config>", engine: str = INPROCESS, overrides: Sequence[str] = ()
) -> Plan:
    """Every check a config gets before any data or model loads, in one place: its values (config.validate),
    the methods' (names, the rules each method declares, options, privacy, secure aggregation), the model's
    (device, head) and the engine's. The rules that need the client count run again once the data is loaded
    (setup.check_client_count). Returns the plan; raises a one-line ConfigError."""
    if engine not in ENGINES:
        raise ConfigError(f"engine = '{engine}': must be '{INPROCESS}' or '{FLOWER}'")
    validate(cfg, source, list(overrides))
    check_methods(cfg, source)
    check_model_config(cfg)
    central = [name for name in cfg.algorithm.methods if method_spec(name).centralized]
    federated = [name for name in cfg.algorithm.methods if name not in central]
    return Plan(cfg, source, engine, federated, central)


def open_run_dir(
    run_dir: Path,
    overwrite: bool = False,
    resume: bool = False,
    resumable: bool = True,
    words: dict = CLI_WORDS,
    resume_needs: str = "config.toml",
) -> Path:
    """The run folder's rules, once for every entry point: resume and overwrite exclude each other; resuming
    needs a run there (a file matching `resume_needs`, a glob inside the folder: its config.toml, or a kind's
    checkpoint); otherwise the folder is made (outputs.prepare_run_dir: a non-empty one only with `overwrite`,
    a partial run of a `resumable` kind pointed at resume)."""
    if resume and overwrite:
        raise FedprefError(f"{words['resume']} and {words['overwrite']} exclude each other")
    if resume:
        if not any(p.is_file() for p in run_dir.glob(resume_needs)):
            raise FedprefError(f"{run_dir}: nothing to resume (no {resume_needs})")
        return run_dir
    return prepare_run_dir(run_dir, overwrite, resumable, words)


def resume_point(saved: dict | None, name: str) -> dict | None:
    """The saved state of method `name` when the checkpoint stopped inside it (None: start it afresh)."""
    current = saved["current"] if saved else None
    return current if current and current["name"] == name else None


def run_methods(
    plan: Plan,
    pending: Sequence[str],
    federation: Federation,
    results: RunResults,
    save: Callable[[dict | None], None],
    saved: dict | None = None,
    *,
    local: Federation | None = None,
    setup: Setup | None = None,
    fresh_model: Callable[[], tuple[nn.Module, State]] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    on_round: Callable[[dict], None] | None = None,
    models_dir: Path | None = None,
    on_method: Callable[[str, dict], None] | None = None,
) -> None:
    """Run the `pending` methods of the plan in turn over `federation`'s transport (the centralized references
    over `local`, in-process, when given), each checkpointed through `save` (the method's state, or None between
    methods) and resumed from `saved`; each result goes into `results`, then `on_method(name, result)`.
    `setup`: this process holds the clients; `fresh_model`: when it does not, (reward model, its initial state)
    for each method."""
    for name in pending:
        chosen = local if local is not None and method_spec(name).centralized else federation
        checkpoints = Checkpoints(save, plan.cfg.federation.checkpoint_every, resume_point(saved, name))
        model = fresh_model() if fresh_model else None
        result, _ = execute_method(name, plan.cfg, chosen, setup, progress, on_round, models_dir, checkpoints, model)
        if chosen is not federation:
            result["engine"] = "inprocess (centralized reference: pools raw data, not federated)"
        results.methods[name] = MethodResult.from_dict(result)
        save(None)
        if on_method:
            on_method(name, result)


def checkpoint_payload(cfg: ExperimentConfig, results: RunResults, rounds: list[dict], current: dict | None) -> dict:
    """What a checkpoint keeps: the results as plain data (an older checkpoint's v0 dict upgrades on resume)."""
    return {"config_hash": cfg.digest(), "results": results.to_dict(), "rounds": list(rounds), "current": current}


def checkpoint_saver(
    store: CheckpointStore | None, cfg: ExperimentConfig, results: RunResults, rounds: list[dict]
) -> Callable[[dict | None], None]:
    """Save the run's state (the current method's, or None between methods) into `store`; no-op without one.
    `rounds` is the round log's list of records, read at each save."""

    def save(current: dict | None) -> None:
        if store is not None:
            store.save(checkpoint_payload(cfg, results, rounds, current))

    return save


def load_resume_state(store: CheckpointStore, cfg: ExperimentConfig) -> dict | None:
    """The last complete checkpoint, checked against the config being resumed (None: nothing to resume)."""
    saved = store.load()
    if saved is not None and not cfg.matches(saved["config_hash"]):  # a hash of this version or an older one
        raise FedprefError(
            f"{store.folder}: the checkpoint belongs to a different config (hash {saved['config_hash']}, "
            f"this config {cfg.digest()}); resume with the run's own config.toml"
        )
    return saved
