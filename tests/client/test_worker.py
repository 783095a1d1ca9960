"""Only adapters travel: a reply carries trainable weights and numbers, never pairs or text."""

import torch

from fedpref.client.trainer import LocalTrainer, OptimConfig
from fedpref.client.worker import EncodedClient, handle_task, task_generator
from fedpref.config import ExperimentConfig
from fedpref.data.pairs import PreferencePair
from fedpref.models.adapters import trainable_state
from fedpref.models.factory import build_reward_model
from fedpref.protocol import EVALUATE, TRAIN, Task

SECRET = "my private preference text"


def test_replies_hold_only_adapter_weights_and_statistics():
    cfg = ExperimentConfig()
    cfg.lora.top_layers = 1
    model = build_reward_model(cfg)
    pairs = [PreferencePair(f"{SECRET} {i}", f"yes {i}", f"no {i}", "c0") for i in range(6)]
    enc = model.encode(pairs)
    client = EncodedClient("c0", None, enc, enc, enc)
    trainer = LocalTrainer(model, OptimConfig(lr=1e-3, batch_size=2))
    init = trainable_state(model)
    train_reply = handle_task(Task("c0", TRAIN, [init], steps=2), client, trainer, task_generator(0, "t"))
    eval_reply = handle_task(Task("c0", EVALUATE, [init, init]), client, trainer, task_generator(0, "e"))

    assert set(train_reply.state) == set(init)  # exactly the trainable (LoRA + head) parameters
    assert all("lora_" in k or k.startswith("head.") for k in train_reply.state)
    for reply in (train_reply, eval_reply):
        assert reply.num_examples == 6
        for value in reply.metrics.values():
            flat = value if isinstance(value, list) else [value]
            assert all(isinstance(v, float) for v in flat)
        assert SECRET not in repr(reply.metrics) and SECRET not in repr(reply.tag)
    assert eval_reply.state is None and len(eval_reply.metrics["val_loss"]) == 2


def test_task_generator_is_order_independent():
    a = torch.randn(3, generator=task_generator(0, "FL", 1, "c1"))
    b = torch.randn(3, generator=task_generator(0, "FL", 1, "c1"))
    c = torch.randn(3, generator=task_generator(0, "FL", 1, "c2"))
    assert torch.equal(a, b) and not torch.equal(a, c)
