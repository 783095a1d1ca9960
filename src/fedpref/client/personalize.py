"""The personalization phase: a client fine-tunes its initialization alone and is tested along the way."""

from __future__ import annotations

import torch

from fedpref.client.trainer import BatchStream, LocalTrainer, seed_global_rng
from fedpref.models.adapters import State, load_trainable_state
from fedpref.models.encoded import EncodedPairs


def personalize(
    trainer: LocalTrainer,
    init: State,
    train: EncodedPairs,
    test: EncodedPairs,
    checkpoints: list[int],
    generator: torch.Generator,
) -> list[float]:
    """Test accuracy after each of `checkpoints` (increasing) local steps from `init` (FedGD paper, Sec. 2.1)."""
    load_trainable_state(trainer.model, init)
    seed_global_rng(generator)
    optimizer = trainer.new_optimizer()
    stream = BatchStream(len(train), trainer.optim.batch_size, generator)
    accs, done = [], 0
    for target in checkpoints:
        if target > done:
            trainer.steps(optimizer, train, stream, target - done)
            done = target
        accs.append(trainer.evaluate(None, test).accuracy)
    return accs
