"""The z-conditioned policy of Stage 2: a causal LM with LoRA plus a Z-to-embedding module (Algorithm 1 line 21)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from transformers import AutoModelForCausalLM, AutoTokenizer

from fedpref.client.trainer import bf16_autocast
from fedpref.config import LoraConfig
from fedpref.embedded import EMBEDDED, resolve_backbone
from fedpref.errors import ConfigError
from fedpref.models.adapters import add_lora

# Pads every batch: stories260K has no pad token, its <unk> is id 0; SmolLM2's id 0 is <|endoftext|>, which it
# never samples inside a chat reply. Attention masks hide padding either way.
PAD_ID = 0


class ConditionalPolicy(nn.Module):
    """inputs_embeds = base_embeds + Z-to-embedding(z) at every position (Algorithm 1 line 21).

    Every position (prompt and response) gets the same shift, through a forward hook on the input
    embedding, so `generate` with its KV cache conditions each new token the same way as training does.
    Z-to-embedding is one linear map d -> hidden, zero-initialized: the untrained policy equals the frozen
    base, which is also DPO's reference. `latent_dim = 0` gives an unconditioned policy (FedDPO).
    `precision` as train.precision: 'auto' autocasts forward passes to bf16 on a CUDA GPU only.
    """

    def __init__(self, lm: nn.Module, lora: LoraConfig, latent_dim: int, seed: int = 0, precision: str = "auto"):
        super().__init__()
        self.precision = precision
        torch.manual_seed(seed)  # peft draws LoRA A from the global generator
        self.lm = add_lora(lm, lora, causal=True)
        self.latent_dim = latent_dim
        self.z_to_embedding = nn.Linear(latent_dim, lm.config.hidden_size) if latent_dim else None
        if self.z_to_embedding is not None:
            nn.init.zeros_(self.z_to_embedding.weight)
            nn.init.zeros_(self.z_to_embedding.bias)
        self._z: torch.Tensor | None = None
        self.lm.get_input_embeddings().register_forward_hook(self._inject)

    @property
    def device(self) -> torch.device:
        return self.lm.get_input_embeddings().weight.device

    def autocast(self) -> contextlib.AbstractContextManager:
        """bf16 autocast for forward passes and generation where `precision` asks for it on this device."""
        device = self.device.type
        if bf16_autocast(self.precision, device):
            return torch.autocast(device_type=device, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _inject(self, module: nn.Module, inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        if self._z is None:
            return output
        shift = self.z_to_embedding(self._z)  # (B, hidden)
        return output + shift.unsqueeze(1).to(output.dtype)

    @contextmanager
    def conditioned(self, z: torch.Tensor | None, batch: int) -> Iterator[None]:
        """Run the adapted policy under z ((d,) or (batch, d); None: no shift)."""
        if z is not None and self.z_to_embedding is None:
            raise ValueError("this policy has no Z-to-embedding module (latent_dim = 0)")
        self._z = None if z is None else z.to(self.device).reshape(-1, self.latent_dim).expand(batch, -1)
        try:
            yield
        finally:
            self._z = None

    @contextmanager
    def reference(self) -> Iterator[None]:
        """The frozen base: adapters disabled and no z shift (DPO's reference and the win-rate baseline)."""
        self._z = None
        with self.lm.disable_adapter():
            yield

    def adapter_state(self) -> dict[str, torch.Tensor]:
        """The trainable weights (LoRA, and Z-to-embedding when present), detached copies."""
        return {n: p.detach().clone() for n, p in self.named_parameters() if p.requires_grad}


@dataclass(frozen=True)
class TokenBatch:
    """Right-padded prompt + response sequences; response_mask marks the tokens DPO scores."""

    input_ids: torch.Tensor  # (B, T)
    attention_mask: torch.Tensor  # (B, T)
    response_mask: torch.Tensor  # (B, T)

    def to(self, device: torch.device | str) -> TokenBatch:
        return TokenBatch(self.input_ids.to(device), self.attention_mask.to(device), self.response_mask.to(device))


def pack(prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]]) -> TokenBatch:
    """Concatenate each prompt with its response and right-pad with PAD_ID."""
    rows = [list(p) + list(r) for p, r in zip(prompts, responses)]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), PAD_ID, dtype=torch.long)
    attn = torch.zeros_like(ids)
    resp = torch.zeros_like(ids)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        n = len(p) + len(r)
        ids[i, :n] = torch.tensor(rows[i])
        attn[i, :n] = 1
        resp[i, len(p) : n] = 1
    return TokenBatch(ids, attn, resp)


def load_lm(path: str | Path, device: str = "cpu") -> tuple[nn.Module, object]:
    """A causal LM on `device` and its tokenizer, left padding for generation (id 0 pads where it has no pad token).

    `path` is an embedded model's name (`smollm2`: the packaged SmolLM2-135M-Instruct GGUF, converted once and
    cached), a `.gguf` file, a local Hugging Face folder or, online, a hub id.
    """
    name = str(path)
    folder = Path(resolve_backbone(name)).expanduser()
    local = folder.exists() or name in EMBEDDED or name.startswith((".", "/", "~"))
    if local and not (folder / "config.json").is_file():
        raise ConfigError(f"{name}: not a Hugging Face model folder (no config.json)")
    source = folder if local else name  # a hub id (online only)
    tokenizer = AutoTokenizer.from_pretrained(source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.convert_ids_to_tokens(PAD_ID)
    tokenizer.padding_side = "left"
    lm = AutoModelForCausalLM.from_pretrained(source).to(device)
    lm.config.pad_token_id = tokenizer.pad_token_id
    return lm, tokenizer
