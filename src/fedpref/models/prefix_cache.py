"""Disk cache of the frozen lower layers' hidden states, keyed by those layers' weights and the token ids."""

from __future__ import annotations

import hashlib
import logging
import pickle
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
from torch import nn

from fedpref.models.token_cache import atomic_write

log = logging.getLogger(__name__)

FORMAT = "fedpref-prefix-cache-1"  # bump when the file layout or key recipe changes


def modules_fingerprint(modules: Iterable[nn.Module], *settings: object) -> str:
    """sha256 over `settings` (layout, dtype, device kind, ...), torch's version and every parameter and buffer
    of `modules`: names, dtypes, shapes and bytes. Two models with this fingerprint compute the same prefix."""
    digest = hashlib.sha256(f"{FORMAT}\0{torch.__version__}\0{settings!r}\0".encode())
    for index, module in enumerate(modules):
        for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
            digest.update(f"{index}.{name}\0{tensor.dtype}\0{tuple(tensor.shape)}\0".encode())
            digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


class PrefixCache:
    """`hidden_states(ids, compute)`: `compute(ids)`, or what it returned for the same ids and fingerprint before.

    Entries larger than `max_bytes` are computed and kept in memory only: a paper-scale client's hidden
    states run to hundreds of MB, a test or demo client's to a few. A missing, unreadable or unwritable
    entry only costs the computation, never an error.
    """

    def __init__(self, root: Path, fingerprint: Callable[[], str], max_bytes: int):
        self.root = root
        self._fingerprint = fingerprint
        self._memo: str | None = None
        self.max_bytes = max_bytes

    @property
    def fingerprint(self) -> str:
        if self._memo is None:  # hashing the frozen weights costs ~0.1 s: once per model
            self._memo = self._fingerprint()
        return self._memo

    def path(self, ids: list[torch.Tensor]) -> Path:
        digest = hashlib.sha256(self.fingerprint.encode())
        for seq in ids:
            digest.update(seq.to(torch.int64).numpy().tobytes())
            digest.update(b"\n")
        return self.root / "prefix" / f"{digest.hexdigest()}.pt"

    def hidden_states(
        self, ids: list[torch.Tensor], compute: Callable[[list[torch.Tensor]], list[torch.Tensor]]
    ) -> list[torch.Tensor]:
        if not ids:
            return compute(ids)
        path = self.path(ids)
        cached = _read(path, [len(s) for s in ids])
        if cached is not None:
            return cached
        hidden = compute(ids)
        flat = torch.cat(hidden)  # (T, H)
        if flat.numel() * flat.element_size() <= self.max_bytes:
            lengths = torch.tensor([len(h) for h in hidden])
            atomic_write(path, lambda f: torch.save({"hidden": flat, "lengths": lengths}, f))
        return hidden


def _read(path: Path, lengths: list[int]) -> list[torch.Tensor] | None:
    if not path.is_file():
        return None
    try:
        saved = torch.load(path, weights_only=True)
        flat, saved_lengths = saved["hidden"], saved["lengths"].tolist()
    except (OSError, RuntimeError, KeyError, EOFError, ValueError, pickle.UnpicklingError) as e:
        log.warning("%s: unreadable prefix cache entry, recomputing (%s)", path, e)
        return None
    if saved_lengths != lengths or flat.shape[0] != sum(lengths):
        log.warning("%s: prefix cache entry does not match its token ids; recomputing", path)
        return None
    return list(flat.split(lengths))
