"""Local training and evaluation of one reward model whose trainable state is swapped per client."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
from torch import nn

from fedpref.client.losses import accuracy, pairwise_loss
from fedpref.config import ExperimentConfig
from fedpref.models.adapters import State, load_trainable_state, lora_layer_index, trainable_state
from fedpref.models.encoded import EncodedPairs


@dataclass(frozen=True)
class OptimConfig:
    """AdamW with a constant learning rate (papers: betas 0.9/0.95)."""

    lr: float
    batch_size: int
    beta1: float = 0.9
    beta2: float = 0.95
    weight_decay: float = 0.0
    precision: str = "fp32"  # "bf16": autocast the forward; "auto": bf16 on CUDA; "bf16-frozen": the model's own
    eval_chunk: int = 64
    adapt: str = "all"  # which trainable parameters the optimizer steps: "all", "head" or "adapters" (LoRA)
    accumulation: int = 1  # micro-batches of batch_size pairs per optimizer step (their mean gradient)


@dataclass
class EvalResult:
    loss: float
    accuracy: float
    margins: torch.Tensor  # (N,)


def seed_global_rng(generator: torch.Generator) -> None:
    """Reseed torch's global generator (LoRA dropout draws from it) from the task's own generator.

    So a task's result depends only on its generator: not on which tasks ran before it in this process,
    and not on whether the run was resumed from a checkpoint.
    """
    torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))


def bf16_autocast(precision: str, device_type: str) -> bool:
    """train.precision 'bf16' always autocasts to bf16; 'auto' only on a CUDA GPU, where bf16 is the fast path."""
    return precision == "bf16" or (precision == "auto" and device_type == "cuda")


class BatchStream:
    """Endless batches of pair indices: a fresh seeded permutation each epoch."""

    def __init__(self, num_pairs: int, batch_size: int, generator: torch.Generator):
        if num_pairs == 0:
            raise ValueError("cannot train on an empty split")
        self.n, self.b, self.gen = num_pairs, min(batch_size, num_pairs), generator
        self.order, self.pos = torch.randperm(self.n, generator=self.gen), 0

    def next(self) -> torch.Tensor:
        if self.pos + self.b > self.n:
            self.order, self.pos = torch.randperm(self.n, generator=self.gen), 0
        batch = self.order[self.pos : self.pos + self.b]
        self.pos += self.b
        return batch


def adapted_params(model: nn.Module, adapt: str) -> list[nn.Parameter]:
    """The trainable parameters an optimizer steps: every one ("all"), the reward head's ("head": those outside
    the transformer layers) or the LoRA adapters' ("adapters"); the others keep their loaded values."""
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    if adapt == "all":
        return [p for _, p in named]
    if adapt not in ("head", "adapters"):
        raise ValueError(f"adapt must be 'all', 'head' or 'adapters', got {adapt!r}")
    in_layers = {name for name, _ in named if lora_layer_index(name) is not None}
    chosen = [p for name, p in named if (name in in_layers) == (adapt == "adapters")]
    if not chosen:
        raise ValueError(f"the model has no {adapt} parameters to adapt")
    return chosen


class LocalTrainer:
    """Runs `steps` AdamW steps of the pairwise loss from a given trainable state."""

    def __init__(self, model: nn.Module, optim: OptimConfig):
        self.model, self.optim = model, optim
        self.params = adapted_params(model, optim.adapt)  # what the optimizer steps

    def autocast(self):
        device = next(iter(self.params)).device.type
        if bf16_autocast(self.optim.precision, device):
            return torch.autocast(device_type=device, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def new_optimizer(self) -> torch.optim.Optimizer:
        o = self.optim
        return torch.optim.AdamW(self.params, lr=o.lr, betas=(o.beta1, o.beta2), weight_decay=o.weight_decay)

    def train(self, state: State, data: EncodedPairs, steps: int, generator: torch.Generator) -> tuple[State, float]:
        """Local update: returns the new trainable state and the mean training loss."""
        load_trainable_state(self.model, state)
        seed_global_rng(generator)
        optimizer = self.new_optimizer()
        stream = BatchStream(len(data), self.optim.batch_size, generator)
        losses = self.steps(optimizer, data, stream, steps)
        return trainable_state(self.model), sum(losses) / len(losses)

    def steps(self, optimizer, data: EncodedPairs, stream: BatchStream, steps: int) -> list[float]:
        """Continue training the loaded state for `steps` steps."""
        self.model.train()
        losses = []
        k = self.optim.accumulation
        for _ in range(steps):
            self.model.zero_grad(set_to_none=True)
            step_loss = 0.0
            for _ in range(k):  # the mean gradient over k micro-batches: that of their union, at 1/k the memory
                with self.autocast():
                    margins = self.model.margins(data, stream.next())
                loss = pairwise_loss(margins.float()) / k
                loss.backward()
                step_loss += loss.item()
            optimizer.step()
            losses.append(step_loss)
        self.model.eval()
        return losses

    @torch.inference_mode()
    def evaluate(self, state: State | None, data: EncodedPairs) -> EvalResult:
        """Loss, accuracy and margins on every pair of `data` (state None: keep the loaded one)."""
        if state is not None:
            load_trainable_state(self.model, state)
        self.model.eval()
        chunk = self.optim.eval_chunk
        with self.autocast():
            parts = [
                self.model.margins(data, torch.arange(s, min(s + chunk, len(data)))) for s in range(0, len(data), chunk)
            ]
        margins = torch.cat(parts).float().cpu()
        loss = pairwise_loss(margins).item()
        if not math.isfinite(loss):
            loss = float("inf")
        return EvalResult(loss=loss, accuracy=accuracy(margins), margins=margins)


def optim_configs(cfg: ExperimentConfig) -> tuple[OptimConfig, OptimConfig]:
    """The optimizer settings of the global phase and of personalization (which defaults to the former's)."""
    t, p = cfg.train, cfg.personalization
    common = dict(
        beta1=t.beta1,
        beta2=t.beta2,
        weight_decay=t.weight_decay,
        precision=t.precision,
        eval_chunk=t.eval_batch_size,
        accumulation=t.grad_accumulation,
    )
    train = OptimConfig(t.lr, t.batch_size, **common)
    pers = OptimConfig(p.lr or t.lr, p.batch_size or t.batch_size, adapt=p.adapt, **common)
    return train, pers
