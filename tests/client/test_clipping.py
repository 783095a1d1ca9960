"""Client-side DP: the update's L2 norm over every adapter tensor is scaled into the C-ball, by hand."""

import pytest
import torch

from fedpref.client.privacy import clip_update, gaussian_noise_like, update_norm
from fedpref.client.trainer import LocalTrainer, OptimConfig
from fedpref.client.worker import EncodedClient, handle_task, task_generator
from fedpref.config import ExperimentConfig
from fedpref.data.pairs import PreferencePair
from fedpref.models.adapters import trainable_state
from fedpref.models.factory import build_reward_model
from fedpref.protocol import TRAIN, Task

RECEIVED = {"a": torch.tensor([1.0, 1.0]), "b": torch.tensor([0.0])}
TRAINED = {"a": torch.tensor([4.0, 1.0]), "b": torch.tensor([4.0])}  # update (3, 0) and (4): norm 5


def test_update_norm_spans_every_tensor():
    assert update_norm(RECEIVED, TRAINED) == 5.0


def test_a_long_update_is_scaled_to_the_clipping_norm():
    clipped = clip_update(RECEIVED, TRAINED, clip_norm=1.0)  # update * 1/5 = (0.6, 0) and (0.8)
    assert torch.allclose(clipped["a"], torch.tensor([1.6, 1.0])) and torch.allclose(clipped["b"], torch.tensor([0.8]))
    assert update_norm(RECEIVED, clipped) == pytest.approx(1.0)


def test_a_short_update_is_unchanged():
    clipped = clip_update(RECEIVED, TRAINED, clip_norm=5.5)
    assert all(torch.equal(clipped[k], TRAINED[k]) for k in TRAINED)
    with pytest.raises(ValueError, match="clip_norm"):
        clip_update(RECEIVED, TRAINED, clip_norm=0.0)


def test_noise_has_the_asked_scale_and_is_reproducible():
    like = {"w": torch.zeros(200_000)}
    noise = gaussian_noise_like(like, 0.25, torch.Generator().manual_seed(3))["w"]
    assert abs(float(noise.mean())) < 0.25 * 0.01 and float(noise.std()) == pytest.approx(0.25, rel=0.01)
    again = gaussian_noise_like(like, 0.25, torch.Generator().manual_seed(3))["w"]
    assert torch.equal(noise, again)


def test_a_train_task_with_a_clipping_norm_returns_a_clipped_update():
    cfg = ExperimentConfig()
    cfg.lora.top_layers = 1
    model = build_reward_model(cfg)
    enc = model.encode([PreferencePair(f"q {i}", f"yes {i}", f"no {i}", "c0") for i in range(6)])
    client = EncodedClient("c0", None, enc, enc, enc)
    trainer = LocalTrainer(model, OptimConfig(lr=1e-2, batch_size=2))
    init = trainable_state(model)
    free = handle_task(Task("c0", TRAIN, [init], steps=3), client, trainer, task_generator(0, "t"))
    task = Task("c0", TRAIN, [init], steps=3, payload={"clip_norm": 1e-3})
    clipped = handle_task(task, client, trainer, task_generator(0, "t"))
    assert update_norm(init, free.state) > 1e-3  # so the clipping had something to do
    assert update_norm(init, clipped.state) == pytest.approx(1e-3, rel=1e-3)
