"""A client's encoded data and the one function that carries out a server task on it.

Every engine calls `answer` (which seeds the task's generator from its key and calls `handle_task`);
the reply holds only adapter weights and small statistics, never pairs.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import torch

from fedpref.client.cost import measured
from fedpref.client.personalize import personalize
from fedpref.client.privacy import clip_update
from fedpref.client.trainer import LocalTrainer
from fedpref.client.variational import evaluate_selector, train_variational
from fedpref.models.encoded import EncodedPairs
from fedpref.protocol import EVALUATE, EVALUATE_SELECTOR, PERSONALIZE, TRAIN, TRAIN_VARIATIONAL, Reply, Task, TaskKey


@dataclass
class EncodedClient:
    client_id: str
    group: str | None
    train: EncodedPairs
    val: EncodedPairs
    test: EncodedPairs
    memory: dict = field(default_factory=dict)  # client-side state that never leaves the client (e.g. Gumbel logits)


def task_generator(seed: int, *parts: object) -> torch.Generator:
    """A generator seeded by (seed, parts): batches are reproducible whatever the order of tasks."""
    key = "/".join(str(p) for p in (seed, *parts))
    return torch.Generator().manual_seed(zlib.crc32(key.encode()))


@dataclass
class Trainers:
    """What a client trains with: the global phase's and personalization's optimizers over the shared frozen
    model, and the run's seed (each task's generator is seeded from it and the task's key)."""

    train: LocalTrainer
    personal: LocalTrainer
    seed: int


def generator_for(seed: int, task: Task, key: TaskKey) -> torch.Generator:
    """The task's own generator: personalization by (method, client); any other task by its place in the run."""
    if task.action == PERSONALIZE:
        return task_generator(seed, key.method, PERSONALIZE, task.client_id)
    return task_generator(seed, key.method, key.round, key.stage, task.client_id, key.index)


def answer(task: Task, key: TaskKey, client: EncodedClient, trainers: Trainers) -> Reply:
    """Carry out `task` on the client's own data, as every engine does; the reply carries what it cost
    (`fedpref.client.cost`: compute seconds and peak memory) in `metrics[COST]`."""
    device = next(trainers.train.model.parameters()).device
    return measured(lambda: carry_out(task, key, client, trainers), device)


def carry_out(task: Task, key: TaskKey, client: EncodedClient, trainers: Trainers) -> Reply:
    generator = generator_for(trainers.seed, task, key)
    if task.action == PERSONALIZE:
        checkpoints = task.payload["checkpoints"]
        accuracies = personalize(trainers.personal, task.models[0], client.train, client.test, checkpoints, generator)
        return Reply(client.client_id, len(client.train), metrics={"acc": accuracies}, tag=task.tag)
    return handle_task(task, client, trainers.train, generator)


def handle_task(task: Task, client: EncodedClient, trainer: LocalTrainer, generator: torch.Generator) -> Reply:
    """Train the one model of a train task, or compute the validation loss of each model of an evaluate task."""
    if task.action == TRAIN:
        state, loss = trainer.train(task.models[0], client.train, task.steps, generator)
        if clip_norm := task.payload.get("clip_norm"):  # client-level DP: the update leaves the client clipped
            state = clip_update(task.models[0], state, clip_norm)
        return Reply(client.client_id, len(client.train), state=state, metrics={"train_loss": loss}, tag=task.tag)
    if task.action == EVALUATE:
        results = [trainer.evaluate(m, client.val) for m in task.models]
        metrics = {"val_loss": [r.loss for r in results], "val_acc": [r.accuracy for r in results]}
        return Reply(client.client_id, len(client.train), metrics=metrics, tag=task.tag)
    if task.action == TRAIN_VARIATIONAL:
        return train_variational(task, client, trainer, generator)
    if task.action == EVALUATE_SELECTOR:
        return evaluate_selector(task, client, trainer)
    raise ValueError(f"unknown task action {task.action!r}")


def concat(parts: list[EncodedPairs]) -> EncodedPairs:
    """Pool several clients' encoded pairs (for the centralized references)."""
    flags = [p.chosen_is_a for p in parts]
    return EncodedPairs(
        seqs=[s for p in parts for s in p.seqs],
        num_pairs=sum(len(p) for p in parts),
        chosen_is_a=None if flags[0] is None else torch.cat(flags),
        tokens=None if parts[0].tokens is None else [t for p in parts for t in p.tokens],
    )
