"""Bytes a transport carries to and from each client: tensors at their dtype's size, numeric metrics at 8 bytes each;
and the numbers behind them (one per tensor element and per numeric metric value)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch

from fedpref.protocol import RESTORE_MEMORY, Reply, Task

NUMBER_BYTES = 8  # a number in a reply's metrics travels as a float64 / int64 (Flower's MetricRecord)


def tensor_bytes(tensors: Any) -> int:
    """The data bytes of every tensor among `tensors` (a state dict's values, or any iterable of values)."""
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def tensor_numel(tensors: Any) -> int:
    """The elements of every tensor among `tensors`."""
    return sum(t.numel() for t in tensors if isinstance(t, torch.Tensor))


def metric_numbers(metrics: dict[str, Any]) -> int:
    """How many numbers the numeric metrics hold (each a number, or a non-empty list of one number type); a dict
    or text (e.g. a reply's COST) travels as configuration and is not counted."""
    total = 0
    for value in metrics.values():
        items = value if isinstance(value, list) else [value]
        numeric = bool(items) and len({type(v) for v in items}) == 1
        if numeric and isinstance(items[0], int | float) and not isinstance(items[0], bool):
            total += len(items)
    return total


def metric_bytes(metrics: dict[str, Any]) -> int:
    """8 bytes per number of the numeric metrics."""
    return NUMBER_BYTES * metric_numbers(metrics)


def task_bytes(task: Task) -> int:
    """What a task carries to its client: its models' tensors and its payload's tensors."""
    return sum(tensor_bytes(model.values()) for model in task.models) + tensor_bytes(task.payload.values())


def reply_bytes(reply: Reply) -> int:
    """What a reply carries back: its trained state's tensors and its numeric metrics."""
    return tensor_bytes((reply.state or {}).values()) + metric_bytes(reply.metrics)


def task_numbers(task: Task) -> int:
    """The numbers a task carries to its client (what `task_bytes` counts, one per element)."""
    return sum(tensor_numel(model.values()) for model in task.models) + tensor_numel(task.payload.values())


def reply_numbers(reply: Reply) -> int:
    """The numbers a reply carries back: its trained state's elements and its numeric metrics' numbers."""
    return tensor_numel((reply.state or {}).values()) + metric_numbers(reply.metrics)


class Traffic:
    """Bytes down (server to client) and up (client to server) by client since the last `take`."""

    def __init__(self) -> None:
        self.down: dict[str, int] = defaultdict(int)
        self.up: dict[str, int] = defaultdict(int)

    def sent(self, client_id: str, nbytes: int) -> None:
        self.down[client_id] += nbytes
        self.up[client_id] += 0  # a client sent a task is counted up too, with 0 bytes if it never answers

    def received(self, client_id: str, nbytes: int) -> None:
        self.up[client_id] += nbytes

    def count_tasks(self, tasks: list[Task]) -> None:
        """The in-process count of tasks handed to their clients (a memory restore carries nothing)."""
        for task in tasks:
            if task.action != RESTORE_MEMORY:
                self.sent(task.client_id, task_bytes(task))

    def count_replies(self, replies: list[Reply]) -> None:
        for reply in replies:
            self.received(reply.client_id, reply_bytes(reply))

    def take(self) -> dict[str, dict[str, int]]:
        """{"down": {client: bytes}, "up": {client: bytes}} since the last call (clients in first-seen order)."""
        out = {"down": dict(self.down), "up": dict(self.up)}
        self.down.clear()
        self.up.clear()
        return out
