"""What a client and the server exchange: the task and reply types, the action names, client facts.

Both sides import it and nothing else of each other: a server algorithm hands out `Task`s and aggregates
`Reply`s; a client carries out a task on its own data. Only adapter/head weights (`State`) and small
statistics travel, never preference data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

State = dict[str, torch.Tensor]  # adapter and head weights by parameter name

TRAIN = "train"
EVALUATE = "evaluate"
EVALUATE_SELECTOR = "evaluate_selector"  # a latent-conditioned selector's test accuracy, z from the client's own pairs
TRAIN_VARIATIONAL = "train_variational"  # FedVPA-GP / FedVPL local step (fedpref.client.variational)
RESTORE_MEMORY = "restore_memory"  # resuming: a client reloads its own memory snapshot taken before a round
PERSONALIZE = "personalize"  # the local phase from models[0]; payload["checkpoints"]: steps at which to test
AFTER_THE_ROUNDS = 2**31 - 1  # the round a stage after the last round stands for (personalization, selector)
SECURE_WEIGHT = "secure_weight"  # payload key of a train task whose state the server may see only summed: its weight
COST = "cost"  # reply metrics key: what the task cost its client (fedpref.client.cost); the round loop takes it out


@dataclass(frozen=True)
class TaskKey:
    """Where a task sits in a run (the parts of its client's torch.Generator seed): the method, the round
    (or "personalize" for the local phase), the stage within the round and the task's index in the stage."""

    method: str
    round: int | str
    stage: int = 0
    index: int = 0


@dataclass(frozen=True)
class ClientInfo:
    """What the server may know of a client: never its data, only its size (and the oracle group)."""

    client_id: str
    num_train: int
    true_group: str | None = None


@dataclass
class Task:
    """A request to one client: train `models[0]` for `steps`, or evaluate each of `models` on validation."""

    client_id: str
    action: str
    models: list[State]
    steps: int = 0
    tag: Any = None  # the algorithm's own bookkeeping, returned unchanged in the reply
    payload: dict = field(default_factory=dict)  # small extra inputs (floats, lists, tensors), e.g. a latent prior


@dataclass
class Reply:
    """A client's answer: a trained state (train) or validation losses per model (evaluate)."""

    client_id: str
    num_examples: int
    state: State | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    tag: Any = None


@dataclass
class Aggregate:
    """What the server learns from a securely aggregated stage: the weighted mean of the trained states, never one
    of them. `state` is None when the protocol could not finish (too few clients answered to unmask the sum)."""

    state: State | None
    client_ids: list[str]  # whose update is in the sum
    weight: float  # the sum of their weights
    metrics: list[dict[str, Any]] = field(default_factory=list)  # each contributor's plain metrics (train_loss)
    failure: str | None = None  # why there is no state


def is_secure(tasks: list[Task]) -> bool:
    """Whether a stage's replies may reach the server only as their weighted sum (every task carries a weight)."""
    return bool(tasks) and all(SECURE_WEIGHT in t.payload for t in tasks)
