"""Rounds made of named stages (evaluate every model, then train): the state machine of the multi-model methods."""

from __future__ import annotations

from collections.abc import Sequence

from fedpref.algorithms.base import Algorithm
from fedpref.config import ExperimentConfig
from fedpref.protocol import EVALUATE, ClientInfo, Reply, State, Task


class StagedAlgorithm(Algorithm):
    """An algorithm whose round `r` runs the stages `stages(r)` names, in order, each once.

    `next_tasks` issues the round's first stage not yet issued (its tasks from `stage_tasks`) and `receive`
    hands that stage's replies to `stage_replies`; the round ends once every stage is issued. Where the round
    stands is two plain attributes, so a checkpoint of the algorithm's attributes resumes it mid-round.
    """

    def __init__(self, clients: list[ClientInfo], init_state: State, num_rounds: int):
        super().__init__(clients, init_state, num_rounds)
        self._issued: set[tuple[int, str]] = set()
        self._pending: str | None = None

    def stages(self, round_idx: int) -> list[str]:
        """The stages of round `round_idx` (round == num_rounds: the final stage, if any), in order."""
        raise NotImplementedError

    def stage_tasks(self, round_idx: int, stage: str) -> list[Task]:
        raise NotImplementedError

    def stage_replies(self, round_idx: int, stage: str, replies: list[Reply]) -> None:
        raise NotImplementedError

    def next_tasks(self, round_idx: int) -> list[Task]:
        stage = next((s for s in self.stages(round_idx) if (round_idx, s) not in self._issued), None)
        if stage is None:
            return []
        self._issued.add((round_idx, stage))
        self._pending = stage
        return self.stage_tasks(round_idx, stage)

    def receive(self, round_idx: int, replies: list[Reply]) -> None:
        stage, self._pending = self._pending, None
        self.stage_replies(round_idx, stage, replies)


def evaluate_models(client_ids: Sequence[str], models: Sequence[State], stage: str) -> list[Task]:
    """Each client evaluates every one of `models` on its validation data (tagged with the stage)."""
    return [Task(c, EVALUATE, list(models), tag=stage) for c in client_ids]


def multi_model_arguments(cfg: ExperimentConfig) -> dict[str, int]:
    """The constructor arguments every multi-model method reads from the config the same way."""
    f = cfg.federation
    return {
        "num_rounds": f.rounds,
        "num_models": cfg.algorithm.num_models,
        "clients_per_round": f.clients_per_round,
        "local_steps": cfg.train.local_steps,
        "seed": cfg.seed,
    }


def check_models_and_sampling(
    method: str, num_clients: int, num_models: int, clients_per_round: int, reassign_every: int, models: str = "models"
) -> None:
    """The arguments every multi-model method checks against the actual clients (ValueError, one line)."""
    if not 1 <= num_models <= num_clients:
        raise ValueError(
            f"{method}: algorithm.num_models = {num_models} {models}, but there are {num_clients} clients "
            "(need 1 <= K <= number of clients)"
        )
    if clients_per_round > num_clients:
        raise ValueError(f"{method}: cannot sample {clients_per_round} of {num_clients} clients per round")
    if reassign_every < 1:
        raise ValueError(f"{method}: algorithm.reassign_every must be >= 1, got {reassign_every}")
