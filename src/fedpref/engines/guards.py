"""Numerical guards shared by every engine: drop non-finite client updates, stop on a non-finite server."""

from __future__ import annotations

import math
from typing import Any

import torch

from fedpref.errors import FedprefError
from fedpref.protocol import Reply


class NonFiniteModelError(FedprefError):
    """The server's model became NaN or infinite."""


def is_finite_reply(reply: Reply) -> bool:
    """False when the reply's weights or any of its loss values are NaN or infinite."""
    if reply.state is not None and not all(bool(torch.isfinite(t).all()) for t in reply.state.values()):
        return False
    for key in ("train_loss",):
        value = reply.metrics.get(key)
        if value is not None and not math.isfinite(value):
            return False
    return True


def split_finite(replies: list[Reply]) -> tuple[list[Reply], list[str]]:
    """(replies to keep, ids of clients whose update is dropped as non-finite)."""
    kept = [r for r in replies if is_finite_reply(r)]
    dropped = [r.client_id for r in replies if not is_finite_reply(r)]
    return kept, dropped


def nonfinite_tensors(obj: Any, path: str = "") -> list[str]:
    """Paths of NaN/inf tensors anywhere in an algorithm's state (dicts, lists, attributes)."""
    if isinstance(obj, torch.Tensor):
        return [] if bool(torch.isfinite(obj).all()) else [path or "<tensor>"]
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in nonfinite_tensors(v, f"{path}.{k}" if path else str(k))]
    if isinstance(obj, (list, tuple)):
        return [p for i, v in enumerate(obj) for p in nonfinite_tensors(v, f"{path}[{i}]")]
    return []
