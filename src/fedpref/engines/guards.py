"""Numerical guards shared by every engine: drop non-finite client updates, stop on a non-finite server."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from fedpref.errors import FedprefError
from fedpref.protocol import Reply


class NonFiniteModelError(FedprefError):
    """The server's model became NaN or infinite."""


def all_finite(tensors: Iterable[torch.Tensor]) -> bool:
    """True when no tensor holds a NaN or inf (integer tensors are finite by type).

    A tensor whose sum is finite has neither (both propagate into a sum), so one sum per tensor and one check of
    those sums decide almost every state: on a GPU one sync for hundreds of LoRA matrices, not one each. A
    non-finite sum may be an overflow of finite values, so only then is each tensor checked element by element.
    """
    by_device = defaultdict(list)
    for t in tensors:
        if t.is_complex():
            t = torch.view_as_real(t)
        if t.is_floating_point():
            by_device[t.device].append(t.detach())
    return all(_all_finite_on_one_device(ts) for ts in by_device.values())


def _all_finite_on_one_device(tensors: list[torch.Tensor]) -> bool:
    sums = torch.stack([t.sum(dtype=torch.float32) for t in tensors])  # fp32 sums: no fp16 overflow
    return bool(torch.isfinite(sums).all()) or all(bool(torch.isfinite(t).all()) for t in tensors)


def is_finite_reply(reply: Reply) -> bool:
    """False when the reply's weights or any of its loss values are NaN or infinite."""
    if reply.state is not None and not all_finite(reply.state.values()):
        return False
    for key in ("train_loss",):
        value = reply.metrics.get(key)
        if value is not None and not math.isfinite(value):
            return False
    return True


def split_finite(replies: list[Reply]) -> tuple[list[Reply], list[str]]:
    """(replies to keep, ids of clients whose update is dropped as non-finite)."""
    finite = [is_finite_reply(r) for r in replies]
    return [r for r, ok in zip(replies, finite) if ok], [r.client_id for r, ok in zip(replies, finite) if not ok]


def nonfinite_tensors(obj: Any) -> list[str]:
    """Paths of NaN/inf tensors anywhere in an algorithm's state (dicts, lists, attributes); one check over all
    of them first, and a walk tensor by tensor only when something is not finite."""
    tensors = list(_tensors(obj))
    if all_finite(t for _, t in tensors):
        return []
    return [path or "<tensor>" for path, t in tensors if not all_finite([t])]


def _tensors(obj: Any, path: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _tensors(v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _tensors(v, f"{path}[{i}]")
