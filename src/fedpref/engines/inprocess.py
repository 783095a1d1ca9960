"""The in-process engine: the round loop, with every client run in this process, one after another."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from fedpref.algorithms.base import Algorithm
from fedpref.client.trainer import LocalTrainer
from fedpref.client.worker import EncodedClient, handle_task, task_generator
from fedpref.engines.guards import NonFiniteModelError, nonfinite_tensors, split_finite

RoundCallback = Callable[[dict], None]
log = logging.getLogger(__name__)


def run_rounds(
    algorithm: Algorithm,
    clients: dict[str, EncodedClient],
    trainer: LocalTrainer,
    seed: int,
    on_round: RoundCallback | None = None,
    start_round: int = 0,
) -> list[dict]:
    """Run rounds start_round..R-1 and the final stage R; returns one log record per round run.

    A client whose update or loss is non-finite is left out of that stage's aggregation (and named in
    the record's `dropped`); a server model that becomes non-finite stops the run.
    """
    records = []
    for r in range(start_round, algorithm.num_rounds + 1):
        start, stages, losses, dropped = time.perf_counter(), 0, [], []
        while tasks := algorithm.next_tasks(r):
            replies = []
            for i, task in enumerate(tasks):
                generator = task_generator(seed, algorithm.name, r, stages, task.client_id, i)
                replies.append(handle_task(task, clients[task.client_id], trainer, generator))
            replies, bad = split_finite(replies)
            if bad:
                log.warning("%s round %d: dropped non-finite update(s) from %s", algorithm.name, r, ", ".join(bad))
            dropped += bad
            losses += [x.metrics["train_loss"] for x in replies if "train_loss" in x.metrics]
            algorithm.receive(r, replies)
            check_server_finite(algorithm, r, [x.client_id for x in replies])
            stages += 1
        if stages == 0 and r == algorithm.num_rounds:
            break
        record = round_record(algorithm, r, stages, losses, dropped, time.perf_counter() - start)
        records.append(record)
        if on_round:
            on_round(record)
    return records


def check_server_finite(algorithm: Algorithm, round_idx: int, client_ids: list[str]) -> None:
    bad = nonfinite_tensors(vars(algorithm))
    if bad:
        raise NonFiniteModelError(
            f"{algorithm.name}: the server model became non-finite in round {round_idx} after aggregating "
            f"clients {', '.join(client_ids) or '(none)'} (first bad tensor: {bad[0]})"
        )


def round_record(
    algorithm: Algorithm, r: int, stages: int, losses: list[float], dropped: list[str], wall_s: float
) -> dict:
    record = {
        "method": algorithm.name,
        "round": r,
        "stages": stages,
        "train_loss": sum(losses) / len(losses) if losses else None,
        "dropped": dropped,
        "wall_s": round(wall_s, 3),
    }
    if algorithm.history and algorithm.history[-1].get("round") == r:
        record.update({k: v for k, v in algorithm.history[-1].items() if k != "round"})
    return record
