"""The in-process engine: the round loop, with every client run in this process, one after another."""

from __future__ import annotations

import time
from collections.abc import Callable

from fedpref.algorithms.base import Algorithm
from fedpref.client.trainer import LocalTrainer
from fedpref.client.worker import EncodedClient, handle_task, task_generator

RoundCallback = Callable[[dict], None]


def run_rounds(
    algorithm: Algorithm,
    clients: dict[str, EncodedClient],
    trainer: LocalTrainer,
    seed: int,
    on_round: RoundCallback | None = None,
) -> list[dict]:
    """Run rounds 0..R-1 and the final stage R; returns one log record per round."""
    log = []
    for r in range(algorithm.num_rounds + 1):
        start, stages, losses = time.perf_counter(), 0, []
        while tasks := algorithm.next_tasks(r):
            replies = []
            for i, task in enumerate(tasks):
                generator = task_generator(seed, algorithm.name, r, stages, task.client_id, i)
                replies.append(handle_task(task, clients[task.client_id], trainer, generator))
            losses += [x.metrics["train_loss"] for x in replies if "train_loss" in x.metrics]
            algorithm.receive(r, replies)
            stages += 1
        if stages == 0 and r == algorithm.num_rounds:
            break
        record = {
            "method": algorithm.name,
            "round": r,
            "stages": stages,
            "train_loss": sum(losses) / len(losses) if losses else None,
            "wall_s": round(time.perf_counter() - start, 3),
        }
        if algorithm.history and algorithm.history[-1].get("round") == r:
            record.update({k: v for k, v in algorithm.history[-1].items() if k != "round"})
        log.append(record)
        if on_round:
            on_round(record)
    return log
