"""Run one method on any engine: build it, run the round loop (with checkpoints), finish it, time it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from fedpref.algorithms.base import Algorithm
from fedpref.algorithms.centralized import Centralized
from fedpref.algorithms.registry import build_algorithm
from fedpref.client.trainer import LocalTrainer, optim_configs
from fedpref.client.worker import EncodedClient, Trainers, concat, task_generator
from fedpref.config import ExperimentConfig
from fedpref.engines.inprocess import InProcessTransport
from fedpref.engines.loop import (
    Transport,
    communication,
    finish_method,
    method_cost,
    personalize,
    run_rounds,
    summarize_curves,
)
from fedpref.experiments.setup import Setup
from fedpref.models.adapters import State
from fedpref.protocol import ClientInfo

Progress = Callable[[str, int, int], None]  # (what, done, total)
INPROCESS = "inprocess"


@dataclass
class Federation:
    """Who takes part and how to reach them: every client in split order (held-out ones included)."""

    transport: Transport
    clients: list[ClientInfo]
    held_out: list[str] = field(default_factory=list)  # unseen clients: never trained, still evaluated
    engine: str = INPROCESS

    def trained(self) -> list[ClientInfo]:
        return [c for c in self.clients if c.client_id not in self.held_out]


@dataclass
class Checkpoints:
    """Where a method's global phase saves its progress (`save` gets the method's state) and what it resumes."""

    save: Callable[[dict], None]
    every: int = 0
    resume_from: dict | None = None  # the method's saved state: next_round, algorithm, client_memory, records


def trainers(cfg: ExperimentConfig, model: nn.Module) -> Trainers:
    train_opt, pers_opt = optim_configs(cfg)
    return Trainers(LocalTrainer(model, train_opt), LocalTrainer(model, pers_opt), cfg.seed)


def inprocess_federation(cfg: ExperimentConfig, setup: Setup, progress: Progress | None = None) -> Federation:
    """Every client of `setup` in this process."""
    transport = InProcessTransport(setup.clients, trainers(cfg, setup.model), progress)
    return Federation(transport, every_client(setup), list(setup.unseen))


def every_client(setup: Setup) -> list[ClientInfo]:
    return [ClientInfo(s.client_id, len(s.train), s.group) for s in setup.splits]


def pooled_transport(algorithm: Centralized, cfg: ExperimentConfig, setup: Setup) -> InProcessTransport:
    """The centralized references' clients: one pool of raw training pairs per model (not federated)."""
    pools = {}
    for pool in algorithm.pools:
        members = [c for cid, c in setup.seen_clients().items() if algorithm.pool_of(cid) == pool]
        parts = (concat([getattr(m, split) for m in members]) for split in ("train", "val", "test"))
        pools[pool] = EncodedClient(pool, None, *parts)
    return InProcessTransport(pools, trainers(cfg, setup.model))


def run_method(
    name: str,
    cfg: ExperimentConfig,
    setup: Setup,
    progress: Progress | None = None,
    on_round: Callable[[dict], None] | None = None,
    models_dir: Path | None = None,
) -> tuple[dict, list[dict]]:
    """One method in-process, without checkpoints: its entry in the results (a MethodResult's dict), its round log."""
    return execute_method(name, cfg, inprocess_federation(cfg, setup, progress), setup, progress, on_round, models_dir)


def execute_method(
    name: str,
    cfg: ExperimentConfig,
    federation: Federation,
    setup: Setup | None,
    progress: Progress | None = None,
    on_round: Callable[[dict], None] | None = None,
    models_dir: Path | None = None,
    checkpoints: Checkpoints | None = None,
    model: tuple[nn.Module, State] | None = None,
) -> tuple[dict, list[dict]]:
    """Build `name`, run its global phase over the federation's transport (resuming and checkpointing with
    `checkpoints`), then every client's personalization; with `setup` (this process holds the clients: the
    in-process engine, a simulation) also the diagnostics. `model`: (reward model, initial state) when no setup."""
    started = time.perf_counter()
    reward_model, init = model or (setup.model, setup.init_state)
    algorithm = build_algorithm(name, cfg, federation.trained(), init, reward_model, federation.held_out)
    rounds_transport = federation.transport
    if isinstance(algorithm, Centralized):
        rounds_transport = pooled_transport(algorithm, cfg, setup)
    start_round, saved = 0, checkpoints.resume_from if checkpoints else None
    if saved is not None:
        vars(algorithm).update(saved["algorithm"])
        start_round = saved["next_round"]
    rounds_transport.begin_method(name, start_round, saved.get("client_memory") if saved else None)
    records = list(saved.get("records", [])) if saved else []  # every round of this method, before a resume too

    def save(next_round: int) -> None:
        state = {"name": name, "next_round": next_round, "algorithm": vars(algorithm), "records": list(records)}
        checkpoints.save(state | {"client_memory": rounds_transport.memories()})

    def round_done(record: dict) -> None:
        records.append(record)
        if progress:
            progress(f"{name}: rounds", min(record["round"] + 1, algorithm.num_rounds), algorithm.num_rounds)
        if on_round:
            on_round(record)

    every = cfg.federation.checkpoint_every
    checkpoint = save if checkpoints else None
    log = run_rounds(algorithm, rounds_transport, round_done, start_round, checkpoint, every, cfg.federation.eval_every)
    # `log`: the rounds run now; `records`: the method's whole global phase (the same unless it was resumed)
    result, inits = finish_method(algorithm, federation.transport, federation.clients, cfg.personalization.steps)
    if models_dir is not None:
        save_initializations(inits, models_dir / f"{name}.pt")
    if setup is not None and cfg.diagnostics.enabled:
        result["diagnostics"] = run_diagnostics(name, inits, cfg, setup, progress)
    global_s = sum(r["wall_s"] for r in records)
    result["timing"] = {"wall_s": round(time.perf_counter() - started, 2), "global_s": global_s}
    federated = not isinstance(algorithm, Centralized)
    if federated and (carried := communication(records)) is not None:
        result["communication"] = carried
    result["cost"] = method_cost(records, trainable_parameters(algorithm.init_state), federated)
    if federation.engine != INPROCESS:
        result["engine"] = federation.engine
    return result, log


def trainable_parameters(state: State) -> int:
    """The parameters one model of a method trains: the elements of its starting state, i.e. the LoRA adapters and
    the head, and for the FedVPA family also the variational modules the client builds around the reward model."""
    return sum(t.numel() for t in state.values())


def run_global(
    algorithm: Algorithm, cfg: ExperimentConfig, setup: Setup, progress: Progress | None = None
) -> list[dict]:
    """Only the global phase of an algorithm already built, in-process (stage 2 and tests)."""
    transport = inprocess_federation(cfg, setup, progress).transport
    if isinstance(algorithm, Centralized):
        transport = pooled_transport(algorithm, cfg, setup)
    transport.begin_method(algorithm.name)
    return run_rounds(algorithm, transport)


def save_initializations(inits: dict[str, State], path: Path) -> None:
    """Distinct initial states once each, and which client starts from which: {"states": [...], "client_state": {}}."""
    states, index, client_state = [], {}, {}
    for cid, state in inits.items():
        if id(state) not in index:
            index[id(state)] = len(states)
            states.append(state)
        client_state[cid] = index[id(state)]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"states": states, "client_state": client_state}, tmp)
    tmp.replace(path)


def load_initializations(path: Path) -> dict[str, State]:
    saved = torch.load(path, weights_only=True)
    return {cid: saved["states"][i] for cid, i in saved["client_state"].items()}


def personalize_saved(
    name: str, inits: dict[str, State], cfg: ExperimentConfig, setup: Setup, progress: Progress | None = None
) -> dict:
    """Every client's personalization from saved initializations at `cfg.personalization.steps`, without the
    global phase: a method result's `personalization` entry. The same seeds as the run's own, so steps it
    already measured give its numbers again."""
    federation = inprocess_federation(cfg, setup, progress)
    federation.transport.begin_method(name)
    steps = cfg.personalization.steps
    per_client = personalize(name, inits, federation.transport, steps)
    return summarize_curves(steps, per_client, {c.client_id: c.true_group for c in federation.clients})


def run_diagnostics(
    name: str, inits: dict[str, State], cfg: ExperimentConfig, setup: Setup, progress: Progress | None = None
) -> dict:
    """Gradient Quotient and Headroom (FedGD paper, Sec. 2.2) of one method's initializations."""
    from fedpref.diagnostics.report import diagnose

    _, pers_opt = optim_configs(cfg)
    d = cfg.diagnostics
    return diagnose(
        setup.model,
        setup.clients,
        inits,
        eta=d.eta or None,
        pers_optim=pers_opt,
        steps=d.steps,
        generator_fn=lambda cid: task_generator(cfg.seed, name, "personalize", cid),
        body_fraction=d.body_fraction,
        chunk=cfg.train.eval_batch_size,
        on_client=(lambda done, total: progress(f"{name}: diagnostics", done, total)) if progress else None,
    )
