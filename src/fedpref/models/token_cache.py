"""Disk cache of token ids, keyed by the tokenizer, max_length, a template version and the input texts."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

log = logging.getLogger(__name__)

FORMAT = "fedpref-token-cache-1"  # bump when the file layout or key recipe changes

TokenIds = list[list[int]]


def cache_root(cache_dir: str | Path | None) -> Path | None:
    """The cache folder of a `data.cache_dir` setting ('' or None: no cache); '~' is expanded."""
    return Path(cache_dir).expanduser() if cache_dir else None


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """sha256 of what decides the ids: class, truncation side, and the fast tokenizer's full serialization.

    The serialization's "truncation" and "padding" entries are dropped: they hold the settings of the
    tokenizer's last call (max_length passed then), not properties of the tokenizer.
    """
    head = f"{type(tokenizer).__qualname__}\0{getattr(tokenizer, 'truncation_side', '')}\0"
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return _fast_fingerprint(head, backend.to_str())
    body = json.dumps(sorted(tokenizer.get_vocab().items()))  # a slow tokenizer: its vocabulary stands in
    return hashlib.sha256((head + body).encode()).hexdigest()


@functools.lru_cache(maxsize=8)
def _fast_fingerprint(head: str, serialized: str) -> str:
    """Memoized on the serialization itself: re-parsing it as JSON costs ~15 times the serializing, once per
    split of every client at set-up."""
    state = json.loads(serialized)
    state.pop("truncation", None)
    state.pop("padding", None)
    return hashlib.sha256((head + json.dumps(state, sort_keys=True)).encode()).hexdigest()


def cache_key(fingerprint: str, max_length: int, version: str, inputs: Sequence[Sequence[str]]) -> str:
    """sha256 over the format, tokenizer fingerprint, max_length, template version and every input text."""
    digest = hashlib.sha256(f"{FORMAT}\0{fingerprint}\0{max_length}\0{version}\0".encode())
    for item in inputs:
        digest.update(json.dumps(list(item), ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def cached_token_ids(
    cache_dir: str | Path | None,
    tokenizer: Any,
    inputs: Sequence[Sequence[str]],
    tokenize: Callable[[Sequence[Sequence[str]]], TokenIds],
    *,
    max_length: int,
    version: str,
) -> TokenIds:
    """`tokenize(inputs)`, read from `cache_dir` when the same tokenizer already tokenized the same inputs.

    `inputs` are tuples of texts; `version` names the template `tokenize` applies (change it with the
    template). A missing, unreadable or unwritable cache only costs a re-tokenization, never an error.
    """
    root = cache_root(cache_dir)
    if root is None or not inputs:
        return tokenize(inputs)
    path = root / "tokens" / f"{cache_key(tokenizer_fingerprint(tokenizer), max_length, version, inputs)}.npz"
    ids = _read(path, len(inputs))
    if ids is None:
        ids = tokenize(inputs)
        _write(path, ids)
    return ids


def _read(path: Path, count: int) -> TokenIds | None:
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            flat, offsets = data["ids"], data["offsets"]
    except (OSError, ValueError, KeyError) as e:
        log.warning("%s: unreadable token cache entry, re-tokenizing (%s)", path, e)
        return None
    if len(offsets) != count + 1:
        log.warning("%s: token cache entry has %d sequences, expected %d; re-tokenizing", path, len(offsets) - 1, count)
        return None
    return [flat[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])]


def _write(path: Path, ids: TokenIds) -> None:
    offsets = np.cumsum([0] + [len(s) for s in ids], dtype=np.int64)
    flat = np.fromiter((t for s in ids for t in s), dtype=np.int32, count=int(offsets[-1]))
    atomic_write(path, lambda f: np.savez(f, ids=flat, offsets=offsets))


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """`write` into a temporary file, then rename it to `path`, so concurrent runs never see half a file.

    A cache that cannot be written only costs recomputation: failures are logged, never raised.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError as e:
        log.warning("%s: cannot write the cache (%s); continuing without it", path.parent, e)
        return
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        log.warning("%s: cannot write the cache (%s); continuing without it", path, e)
