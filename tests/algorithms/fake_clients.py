"""A fake client executor for algorithm tests: scalar states {"w": tensor([x])}, hand-made client rules."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from fedpref.algorithms.aggregation import clear_aggregate
from fedpref.algorithms.base import Algorithm
from fedpref.models.adapters import State
from fedpref.protocol import EVALUATE, TRAIN, ClientInfo, Reply, Task, is_secure


def state(*x: float) -> State:
    return {"w": torch.tensor([float(v) for v in x], dtype=torch.float64)}


def value(s: State) -> float:
    return float(s["w"][0])


def infos(sizes: dict[str, int], groups: dict[str, str] | None = None) -> list[ClientInfo]:
    return [ClientInfo(c, n, (groups or {}).get(c)) for c, n in sizes.items()]


@dataclass
class FakeClients:
    """train: w + offset[c] (or `train_rule`); evaluate: loss ||w - target[c]||, accuracy 1 / (1 + loss)."""

    targets: dict[str, float | tuple[float, ...]]
    offsets: dict[str, float] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    train_rule: Callable[[str, torch.Tensor], torch.Tensor] | None = None
    tasks: list[tuple[int, Task]] = field(default_factory=list)

    def loss(self, c: str, s: State) -> float:
        return float((s["w"] - torch.tensor(self.targets[c], dtype=torch.float64)).norm())

    def answer(self, task: Task) -> Reply:
        c, n = task.client_id, self.sizes.get(task.client_id, 10)
        if task.action == TRAIN:
            w = task.models[0]["w"]
            new = self.train_rule(c, w) if self.train_rule else w + self.offsets.get(c, 0.0)
            return Reply(c, n, state={"w": new}, metrics={"train_loss": 0.0}, tag=task.tag)
        assert task.action == EVALUATE
        losses = [self.loss(c, m) for m in task.models]
        return Reply(c, n, metrics={"val_loss": losses, "val_acc": [1 / (1 + x) for x in losses]}, tag=task.tag)

    def stage(self, algorithm: Algorithm, r: int) -> list[Task] | None:
        """Run one stage of round r (None when the round has no more stages)."""
        tasks = algorithm.next_tasks(r)
        if not tasks:
            return None
        self.tasks += [(r, t) for t in tasks]
        replies = [self.answer(t) for t in tasks]
        if is_secure(tasks):  # what secure aggregation hands the server: the weighted mean only
            algorithm.receive_aggregate(r, clear_aggregate(tasks, replies))
        else:
            algorithm.receive(r, replies)
        return tasks

    def run(self, algorithm: Algorithm) -> None:
        """The in-process engine's loop: rounds 0..R-1 and the final stage R."""
        for r in range(algorithm.num_rounds + 1):
            while self.stage(algorithm, r) is not None:
                pass


def run_with_restart(make: Callable[[], Algorithm], clients: FakeClients, stop_after: int) -> Algorithm:
    """Run rounds 0..stop_after, copy the algorithm's attributes into a fresh instance (as the checkpoint
    resume does with `vars(algorithm)`), and finish the run with that instance."""
    first = make()
    for r in range(stop_after + 1):
        while clients.stage(first, r) is not None:
            pass
    second = make()
    vars(second).update(copy.deepcopy(vars(first)))
    for r in range(stop_after + 1, second.num_rounds + 1):
        while clients.stage(second, r) is not None:
            pass
    return second
