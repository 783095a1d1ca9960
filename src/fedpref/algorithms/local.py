"""Local: no global phase; every client personalizes the untrained LoRA initialization."""

from __future__ import annotations

from fedpref.algorithms.base import Algorithm
from fedpref.models.adapters import State
from fedpref.protocol import Reply, Task


class Local(Algorithm):
    name = "Local"

    def next_tasks(self, round_idx: int) -> list[Task]:
        return []

    def receive(self, round_idx: int, replies: list[Reply]) -> None:
        pass

    def initialization(self, client_id: str) -> State:
        return self.init_state
