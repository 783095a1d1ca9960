"""Run an experiment: every configured method's global phase, then every client's personalization."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from fedpref.algorithms.base import Algorithm
from fedpref.algorithms.centralized import Centralized
from fedpref.client.personalize import personalize
from fedpref.client.trainer import LocalTrainer, OptimConfig
from fedpref.client.worker import EncodedClient, concat, handle_task, task_generator
from fedpref.config import ExperimentConfig
from fedpref.engines.inprocess import run_rounds
from fedpref.experiments.methods import build_algorithm
from fedpref.experiments.setup import Setup
from fedpref.models.adapters import State
from fedpref.protocol import ClientInfo

Progress = Callable[[str, int, int], None]  # (what, done, total)


def optim_configs(cfg: ExperimentConfig) -> tuple[OptimConfig, OptimConfig]:
    t, p = cfg.train, cfg.personalization
    common = dict(
        beta1=t.beta1, beta2=t.beta2, weight_decay=t.weight_decay, precision=t.precision, eval_chunk=t.eval_batch_size
    )
    train = OptimConfig(t.lr, t.batch_size, **common)
    pers = OptimConfig(p.lr or t.lr, p.batch_size or t.batch_size, **common)
    return train, pers


def engine_clients(algorithm: Algorithm, setup: Setup) -> dict[str, EncodedClient]:
    """The clients an algorithm talks to: the real ones, or pooled ones for the centralized references."""
    if not isinstance(algorithm, Centralized):
        return setup.clients
    pools = {}
    for pool in algorithm.pools:
        members = [c for cid, c in setup.seen_clients().items() if algorithm.pool_of(cid) == pool]
        parts = [
            concat([m.train for m in members]),
            concat([m.val for m in members]),
            concat([m.test for m in members]),
        ]
        pools[pool] = EncodedClient(pool, None, *parts)
    return pools


def run_method(
    name: str,
    cfg: ExperimentConfig,
    setup: Setup,
    progress: Progress | None = None,
    on_round: Callable[[dict], None] | None = None,
    models_dir: Path | None = None,
) -> tuple[dict, list[dict]]:
    """Global phase and personalization of one method: its `results.json` entry and its round log."""
    start = time.perf_counter()
    algorithm = build_algorithm(name, cfg, setup.infos, setup.init_state, setup.model, setup.unseen)
    log = run_global(algorithm, cfg, setup, progress, on_round)
    result = finish_method(algorithm, cfg, setup, progress, models_dir)
    result["timing"] = {"wall_s": round(time.perf_counter() - start, 2), "global_s": sum(r["wall_s"] for r in log)}
    return result, log


def run_global(
    algorithm: Algorithm,
    cfg: ExperimentConfig,
    setup: Setup,
    progress: Progress | None = None,
    on_round: Callable[[dict], None] | None = None,
    start_round: int = 0,
) -> list[dict]:
    """The global (federated or centralized) phase, in the in-process engine."""
    train_opt, _ = optim_configs(cfg)

    def round_done(record: dict) -> None:
        if progress:
            progress(f"{algorithm.name}: rounds", min(record["round"] + 1, algorithm.num_rounds), algorithm.num_rounds)
        if on_round:
            on_round(record)

    trainer = LocalTrainer(setup.model, train_opt)
    return run_rounds(algorithm, engine_clients(algorithm, setup), trainer, cfg.seed, round_done, start_round)


def initializations(algorithm: Algorithm, setup: Setup) -> dict[str, State]:
    """Every client's starting point for personalization."""
    return {cid: algorithm.initialization(cid) for cid in setup.clients}


def finish_method(
    algorithm: Algorithm,
    cfg: ExperimentConfig,
    setup: Setup,
    progress: Progress | None = None,
    models_dir: Path | None = None,
) -> dict:
    """Personalization of every client (and the diagnostics, when enabled) from the method's initializations.

    With `models_dir`, the initializations are saved as `<models_dir>/<method>.pt` (see `save_initializations`).
    """
    _, pers_opt = optim_configs(cfg)
    inits = initializations(algorithm, setup)
    if models_dir is not None:
        save_initializations(inits, models_dir / f"{algorithm.name}.pt")
    curves = personalize_all(algorithm.name, inits, cfg, setup, LocalTrainer(setup.model, pers_opt), progress)
    result = {
        "personalization": curves,
        "diagnostics": run_diagnostics(algorithm.name, inits, cfg, setup) if cfg.diagnostics.enabled else {},
        "assignments": [h for h in algorithm.history if "assignment" in h],
    }
    add_partition_ari(result, setup.infos)
    if hasattr(algorithm, "selector_tasks"):
        result["selector"] = evaluate_selector(algorithm, cfg, setup)
    return result


def add_partition_ari(result: dict, infos: list[ClientInfo]) -> None:
    """`result["partition_ari"]`: the method's final partition (FedGD's frozen groups, FedBiscuit's final
    selection) against the true groups, when every client's true group is known."""
    from fedpref.experiments.summary import partition_ari

    truth = {c.client_id: c.true_group for c in infos}
    if None not in truth.values() and (ari := partition_ari(result["assignments"], truth)) is not None:
        result["partition_ari"] = ari


def evaluate_selector(algorithm, cfg: ExperimentConfig, setup: Setup) -> dict:
    """A latent-conditioned method's own evaluation (FedVPA-GP paper, Tables 1-2): seen and unseen clients.

    Each client's z comes from its own training pairs, with no parameter update, so held-out clients are
    evaluated exactly like the others.
    """
    trainer = LocalTrainer(setup.model, optim_configs(cfg)[0])
    out = {"seen": ask_selector(algorithm, setup.seen_clients(), trainer)}
    if setup.unseen:
        out["unseen"] = ask_selector(algorithm, setup.unseen_clients(), trainer)
    out["latent_trace"] = algorithm.latent_trace
    return out


def ask_selector(algorithm, clients: dict[str, EncodedClient], trainer: LocalTrainer) -> dict:
    """Carry the selector's evaluation tasks to `clients` in this process and summarize the replies."""
    tasks = algorithm.selector_tasks(list(clients))
    replies = [handle_task(t, clients[t.client_id], trainer, torch.Generator()) for t in tasks]
    return algorithm.summarize_selector(replies)


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


def run_diagnostics(name: str, inits: dict[str, State], cfg: ExperimentConfig, setup: Setup) -> dict:
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
    )


def personalize_all(
    name: str,
    inits: dict[str, State],
    cfg: ExperimentConfig,
    setup: Setup,
    trainer: LocalTrainer,
    progress: Progress | None,
) -> dict:
    """acc^t for every client at every checkpoint t; mean/std over clients and mean per true group."""
    steps = cfg.personalization.steps
    per_client = {}
    for i, (cid, client) in enumerate(setup.clients.items()):
        generator = task_generator(cfg.seed, name, "personalize", cid)
        per_client[cid] = personalize(trainer, inits[cid], client.train, client.test, steps, generator)
        if progress:
            progress(f"{name}: personalization", i + 1, len(setup.clients))
    return summarize_curves(steps, per_client, {cid: c.group for cid, c in setup.clients.items()})


def summarize_curves(steps: list[int], per_client: dict[str, list[float]], groups: dict[str, str | None]) -> dict:
    """Mean and (population) std over clients per checkpoint, and the mean per group."""
    columns = list(zip(*per_client.values()))
    by_group: dict[str, list[float]] = {}
    for g in sorted({g for g in groups.values() if g is not None}):
        members = [per_client[c] for c in per_client if groups[c] == g]
        by_group[g] = [round(statistics.fmean(col), 2) for col in zip(*members)]
    return {
        "steps": list(steps),
        "acc_mean": [round(statistics.fmean(col), 2) for col in columns],
        "acc_std": [round(statistics.pstdev(col), 2) for col in columns],
        "by_group": by_group,
        "per_client": per_client,
    }
