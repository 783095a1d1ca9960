"""Clients trained one after another against two at a time: threads in one process, or the Simulation Engine.

A round's clients are independent, so an engine can train them side by side instead of one after another
with every thread on each op. `--engine threads` (the default) times both ways in one process, each worker
on its own model replica with one intra-op thread. `--engine flower` runs a config's federated rounds (FL)
on Flower's Simulation Engine three times per repeat: with `flower.num_cpus` = this machine's CPUs (one
client at a time; Ray sets its OMP_NUM_THREADS to its CPUs, so every thread works on it), the same with
OMP_NUM_THREADS=1 (one client at a time on one thread: what is left once threads stop contending), and
with `flower.num_cpus` = 1 (one client per CPU at once, one thread each). Both engines alternate repeats,
print the medians (the baselines, the parallel time) and the ratios; the results are the same either way
(each client's steps depend only on its own generator; `--engine flower` checks the round logs agree).

    .venv/bin/python benchmarks/parallel_clients.py [--clients 6] [--steps 8] [--repeats 3]
    .venv/bin/python benchmarks/parallel_clients.py --engine flower --config quick --set federation.rounds=3
"""

from __future__ import annotations

import os
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


def simulated_rounds(cfg) -> tuple[float, list[dict]]:
    """(seconds of the federated rounds, their round log): FL on the Simulation Engine, after its start-up."""
    from fedpref.algorithms.registry import build_algorithm
    from fedpref.engines.flower.run import run_simulated
    from fedpref.engines.loop import run_rounds
    from fedpref.models.adapters import trainable_state
    from fedpref.models.factory import build_reward_model

    model = build_reward_model(cfg)

    def body(transport) -> tuple[float, list[dict]]:
        peers = transport.peers
        algorithm = build_algorithm("FL", cfg, peers.trained(), trainable_state(model), model, peers.held_out)
        transport.begin_method("FL")
        start = time.perf_counter()
        log = run_rounds(algorithm, transport)
        return time.perf_counter() - start, log

    return run_simulated(cfg, body)


def on_flower(args) -> None:
    from fedpref.config import load_config

    cpus = os.cpu_count() or 1
    overrides = [*args.set, "algorithm.methods=['FL']"]
    # (flower.num_cpus of each client, OMP_NUM_THREADS: None lets Ray set it to the client's CPUs)
    modes = {
        f"1 client at a time, {cpus} CPUs, {cpus} threads": (cpus, None),
        f"1 client at a time, {cpus} CPUs, 1 thread": (cpus, "1"),  # tells thread contention from parallelism
        f"{cpus} clients at a time, 1 CPU, 1 thread": (1, None),
    }
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    logs: dict[str, list[dict]] = {}
    for _ in range(args.repeats):
        for mode, (num_cpus, threads) in modes.items():
            if threads is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = threads  # the Ray workers started by this run inherit it
            cfg = load_config(args.config, [*overrides, f"flower.num_cpus={num_cpus}"])
            seconds, log = simulated_rounds(cfg)
            times[mode].append(seconds)
            logs[mode] = [{k: v for k, v in r.items() if k not in ("wall_s", "train_loss")} for r in log]
    medians = {mode: statistics.median(t) for mode, t in times.items()}
    *baselines, parallel = modes
    rounds = len(logs[parallel])
    print(f"{args.config}, FL, {rounds} rounds on the Simulation Engine, {args.repeats} alternating repeats, medians")
    for mode in modes:
        print(f"  {mode + ':':<42} {medians[mode]:7.2f} s  {[round(t, 2) for t in times[mode]]}")
    for mode in baselines:
        print(f"  ratio ({mode}) / parallel: {medians[mode] / medians[parallel]:.2f}x")
    print(f"  same round logs: {all(log == logs[parallel] for log in logs.values())}")


def main() -> None:
    parser = step_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--engine", choices=["threads", "flower"], default="threads")
    parser.add_argument("--set", action="append", default=[], help="a config override (flower engine), repeatable")
    parser.set_defaults(clients=6)
    args = parser.parse_args()
    if args.engine == "flower":
        return on_flower(args)
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
