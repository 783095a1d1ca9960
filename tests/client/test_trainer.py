"""Which parameters a trainer steps: personalization.adapt keeps the others at their loaded values."""

import pytest
import torch

from fedpref.client.trainer import LocalTrainer, OptimConfig, adapted_params, optim_configs
from fedpref.config import ExperimentConfig, digest_v0, load_config
from fedpref.data.pairs import PreferencePair
from fedpref.errors import ConfigError
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


def test_accumulating_two_micro_batches_is_one_step_on_their_union():
    """train.grad_accumulation: 2 micro-batches of 2 pairs per AdamW step give the update of one batch of 4 (the
    stream's permutation is the same, so step s sees pairs 4s..4s+3 either way), and differ from 2-pair steps."""
    cfg = ExperimentConfig()
    cfg.lora.top_layers, cfg.lora.dropout = 1, 0.0  # no dropout: its masks would depend on the batch shapes
    model = build_reward_model(cfg)
    enc = model.encode([PreferencePair(f"q {i}", f"yes {i} " * i, f"no {i}", "c0") for i in range(8)])
    init = trainable_state(model)

    def train(batch_size: int, accumulation: int) -> tuple[dict, float]:
        optim = OptimConfig(lr=1e-2, batch_size=batch_size, accumulation=accumulation)
        return LocalTrainer(model, optim).train(init, enc, 2, torch.Generator().manual_seed(0))

    union, union_loss = train(4, 1)
    accumulated, accumulated_loss = train(2, 2)
    small, _ = train(2, 1)
    assert accumulated_loss == pytest.approx(union_loss, rel=1e-5)
    for name in init:  # Adam's first steps divide by |g|, which magnifies float rounding: 1e-5 is 1e-3 of the lr
        assert torch.allclose(accumulated[name], union[name], atol=1e-5), name
    assert any(not torch.allclose(small[name], union[name], atol=1e-3) for name in init)  # other pairs, other steps


def test_grad_accumulation_reaches_both_optimizers_and_is_checked():
    cfg = ExperimentConfig()
    cfg.train.grad_accumulation = 4
    assert [o.accumulation for o in optim_configs(cfg)] == [4, 4]
    with pytest.raises(ConfigError, match="'train.grad_accumulation' must be >= 1"):
        load_config(None, ["train.grad_accumulation=0"])
    # the tiny config's hash as commit cc3db0b (before the option) recorded it in results and checkpoints: a run of
    # that version still resumes (config.digest_v0); with the option set it is another config
    assert digest_v0(load_config("tiny")) == "b8140ab49bdc" and load_config("tiny").matches("b8140ab49bdc")
    assert not load_config("tiny", ["train.grad_accumulation=2"]).matches("b8140ab49bdc")
