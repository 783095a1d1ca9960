"""Local: no global phase; every client personalizes the untrained LoRA initialization."""

from __future__ import annotations

from torch import nn

from fedpref.algorithms.base import Algorithm
from fedpref.algorithms.registry import MethodSpec
from fedpref.config import ExperimentConfig
from fedpref.models.adapters import State
from fedpref.protocol import ClientInfo, Reply, Task


class Local(Algorithm):
    name = "Local"

    def next_tasks(self, round_idx: int) -> list[Task]:
        return []

    def receive(self, round_idx: int, replies: list[Reply]) -> None:
        pass

    def initialization(self, client_id: str) -> State:
        return self.init_state


def build_local(cfg: ExperimentConfig, infos: list[ClientInfo], init: State, model: nn.Module) -> Local:
    return Local(infos, init, 0)


PAPER = "FedGD"  # whose method these are (`fedpref list methods`)
SPECS = (MethodSpec(Local.name, build_local, "no global phase: each client personalizes the untrained initialization"),)
