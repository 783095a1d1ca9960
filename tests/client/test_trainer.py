"""Which parameters a trainer steps: personalization.adapt keeps the others at their loaded values."""

import pytest
import torch

from fedpref.client.trainer import LocalTrainer, OptimConfig, adapted_params, optim_configs
from fedpref.config import ExperimentConfig
from fedpref.data.pairs import PreferencePair
from fedpref.models.adapters import lora_layer_index, trainable_state
from fedpref.models.factory import build_reward_model


@pytest.fixture(scope="module")
def model_and_pairs():
    cfg = ExperimentConfig()
    cfg.lora.top_layers = 1
    model = build_reward_model(cfg)
    enc = model.encode([PreferencePair(f"q {i}", f"yes {i}", f"no {i}", "c0") for i in range(6)])
    return model, enc


def changed_parts(model, enc, adapt: str) -> set[str]:
    """Which of 'head' and 'adapters' moved in 3 steps with `adapt`."""
    trainer = LocalTrainer(model, OptimConfig(lr=1e-2, batch_size=2, adapt=adapt))
    init = trainable_state(model)
    after, _ = trainer.train(init, enc, 3, torch.Generator().manual_seed(0))
    moved = {name for name in init if not torch.equal(init[name], after[name])}
    return {"adapters" if lora_layer_index(name) is not None else "head" for name in moved}


@pytest.mark.parametrize("adapt", ["all", "head", "adapters"])
def test_only_the_adapted_parameters_move(model_and_pairs, adapt):
    expected = {"head", "adapters"} if adapt == "all" else {adapt}
    assert changed_parts(*model_and_pairs, adapt) == expected


def test_the_parameter_groups_split_the_trainable_ones(model_and_pairs):
    model, _ = model_and_pairs
    head, adapters = adapted_params(model, "head"), adapted_params(model, "adapters")
    assert len(head) == 2  # the scalar head's weight and bias
    assert len(head) + len(adapters) == len(adapted_params(model, "all"))
    with pytest.raises(ValueError, match="adapt must be"):
        adapted_params(model, "body")


def test_adapt_reaches_the_personalization_optimizer_only():
    cfg = ExperimentConfig()
    cfg.personalization.adapt = "head"
    train, personal = optim_configs(cfg)
    assert (train.adapt, personal.adapt) == ("all", "head")
