"""Run an experiment: every configured method's global phase, then every client's personalization."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from fedpref.algorithms.base import Algorithm
from fedpref.algorithms.centralized import Centralized
from fedpref.client.personalize import personalize
from fedpref.client.trainer import LocalTrainer, OptimConfig
from fedpref.client.worker import EncodedClient, concat, task_generator
from fedpref.config import ExperimentConfig
from fedpref.engines.inprocess import run_rounds
from fedpref.experiments.methods import build_algorithm
from fedpref.experiments.setup import Setup

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
        members = [c for cid, c in setup.clients.items() if algorithm.pool_of(cid) == pool]
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
) -> tuple[dict, list[dict]]:
    """Global phase and personalization of one method: its `results.json` entry and its round log."""
    train_opt, pers_opt = optim_configs(cfg)
    algorithm = build_algorithm(name, cfg, setup.infos, setup.init_state, setup.model)
    trainer = LocalTrainer(setup.model, train_opt)
    start = time.perf_counter()

    def round_done(record: dict) -> None:
        if progress:
            progress(f"{name}: rounds", record["round"] + 1, algorithm.num_rounds)
        if on_round:
            on_round(record)

    log = run_rounds(algorithm, engine_clients(algorithm, setup), trainer, cfg.seed, round_done)
    train_s = time.perf_counter() - start
    curves = personalize_all(name, algorithm, cfg, setup, LocalTrainer(setup.model, pers_opt), progress)
    result = {
        "personalization": curves,
        "diagnostics": {},
        "assignments": [h for h in algorithm.history if "assignment" in h],
        "timing": {"wall_s": round(time.perf_counter() - start, 2), "global_s": round(train_s, 2)},
    }
    return result, log


def personalize_all(
    name: str,
    algorithm: Algorithm,
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
        per_client[cid] = personalize(
            trainer, algorithm.initialization(cid), client.train, client.test, steps, generator
        )
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
