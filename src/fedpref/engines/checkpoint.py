"""Atomic, verified checkpoints: write to a temporary file, fsync, rename; keep the previous one as fallback.

File layout: 8-byte magic, 64 hex characters of the payload's SHA-256, then the
payload (a `torch.save` of plain Python objects, tensors and numpy generators).
A torn or corrupted file fails the hash check and the store falls back to the
previous complete checkpoint.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import time
from pathlib import Path
from typing import Any

import torch

from fedpref.errors import FedprefError

MAGIC = b"FPCKPT01"
LATEST, PREVIOUS = "latest.ckpt", "previous.ckpt"
log = logging.getLogger(__name__)


class CheckpointError(FedprefError):
    """A checkpoint is missing, truncated or corrupted."""


def encode(payload: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    body = buffer.getvalue()
    return MAGIC + hashlib.sha256(body).hexdigest().encode() + body


def decode(blob: bytes, where: str) -> Any:
    if len(blob) < len(MAGIC) + 64 or not blob.startswith(MAGIC):
        raise CheckpointError(f"{where}: not a fedpref checkpoint (truncated or wrong format)")
    digest, body = blob[len(MAGIC) : len(MAGIC) + 64], blob[len(MAGIC) + 64 :]
    if hashlib.sha256(body).hexdigest().encode() != digest:
        raise CheckpointError(f"{where}: checksum mismatch (the file is truncated or corrupted)")
    return torch.load(io.BytesIO(body), weights_only=False)


def write_atomic(path: Path, blob: bytes) -> None:
    """Write `blob` to `path` so that a crash at any instant leaves the old file or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        f.write(blob)
        f.flush()
        os.fsync(f.fileno())
    if os.environ.get("FEDPREF_FAULT_PAUSE") == "checkpoint":  # test hook: widen the window before rename
        time.sleep(float(os.environ.get("FEDPREF_FAULT_PAUSE_S", "2")))
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointStore:
    """`latest.ckpt` and `previous.ckpt` in one folder."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def save(self, payload: Any) -> None:
        blob = encode(payload)
        latest = self.folder / LATEST
        if latest.exists():
            os.replace(latest, self.folder / PREVIOUS)  # a crash here leaves only `previous`: still loadable
        write_atomic(latest, blob)

    def load(self) -> Any | None:
        """The newest complete checkpoint, falling back to the previous one; None when there is none."""
        errors = []
        for name in (LATEST, PREVIOUS):
            path = self.folder / name
            if not path.exists():
                continue
            try:
                return decode(path.read_bytes(), str(path))
            except CheckpointError as e:
                log.warning("%s; trying the previous checkpoint", e)
                errors.append(str(e))
        if errors:
            raise CheckpointError("no complete checkpoint: " + "; ".join(errors))
        return None
