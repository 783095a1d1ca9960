"""Clients trained one after another on all threads against two clients at a time, one thread each.

A round's clients are independent, so an engine could train them side by side, each on its own model
replica with one intra-op thread, instead of one after another with every thread on each op. This times
both ways on the same clients and steps (alternating repeats, medians) and prints the ratio; the results
are the same either way (each client's steps depend only on its own generator).

    .venv/bin/python benchmarks/parallel_clients.py [--clients 6] [--steps 8] [--repeats 3]
"""

from __future__ import annotations

import statistics
import threading
import time

import torch
from step_setup import step_parser, trainer_and_clients

from fedpref.models.adapters import trainable_state


def replica(args):
    """A model, its trainer, its untrained adapter state and the clients' encoded training pairs."""
    _, model, trainer, clients = trainer_and_clients(args)
    init = trainable_state(model)
    data = [model.encode(c.train) for c in clients]
    trainer.train(init, data[0], 1, torch.Generator().manual_seed(0))  # warm-up
    return trainer, init, data


def train(side, indices: range, steps: int) -> None:
    trainer, init, data = side
    for i in indices:
        trainer.train(init, data[i], steps, torch.Generator().manual_seed(1))


def side_by_side(sides, steps: int) -> None:
    """Worker w trains clients w, w + W, w + 2W, ... on its own replica."""
    workers = [
        threading.Thread(target=train, args=(side, range(w, len(side[2]), len(sides)), steps))
        for w, side in enumerate(sides)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def main() -> None:
    parser = step_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.set_defaults(clients=6)
    args = parser.parse_args()
    threads = torch.get_num_threads()
    sides = [replica(args) for _ in range(threads)]
    one_by_one, parallel = [], []
    for _ in range(args.repeats):
        torch.set_num_threads(threads)
        start = time.perf_counter()
        train(sides[0], range(args.clients), args.steps)
        one_by_one.append(time.perf_counter() - start)
        torch.set_num_threads(1)
        start = time.perf_counter()
        side_by_side(sides, args.steps)
        parallel.append(time.perf_counter() - start)
    a, b = statistics.median(one_by_one), statistics.median(parallel)
    print(f"{args.clients} clients x {args.steps} steps, {args.repeats} alternating repeats, medians")
    print(f"  one after another, {threads} threads: {a:.2f} s")
    print(f"  {threads} at a time, 1 thread each:   {b:.2f} s")
    print(f"  ratio: {a / b:.2f}x")


if __name__ == "__main__":
    main()
