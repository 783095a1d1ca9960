"""Anthropic HH-RLHF: (prompt, chosen, rejected) triples per subset from the hub or its local jsonl(.gz) files."""

from __future__ import annotations

import logging
import os
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from fedpref.data.files import check_names, hub_splits, is_hub_id, load_hub, load_local
from fedpref.errors import DataError

log = logging.getLogger(__name__)

HH_HUB_ID = "Anthropic/hh-rlhf"
HH_SUBSETS = (
    "helpful-base",
    "harmless-base",
    "helpful-online",
    "helpful-rejection-sampled",
)
HH_MARKER = "\n\nAssistant:"
_HH_FILE = re.compile(r"(?P<subset>[\w-]+)[./](?P<split>\w+)\.jsonl(\.gz)?")

Triple = tuple[str, str, str]


class HHTriples(dict):
    """Subset name -> (prompt, chosen, rejected) triples.

    `skipped[subset]` counts rows dropped because chosen and rejected share no
    prefix ending in an "Assistant:" turn or their responses are identical.
    """

    def __init__(self) -> None:
        super().__init__()
        self.skipped: dict[str, int] = {}


def split_hh(chosen: str, rejected: str) -> Triple | None:
    """(prompt, chosen, rejected) from two HH transcripts, or None if unusable.

    The prompt is their common prefix up to and including its last
    "\\n\\nAssistant:"; the responses are what follows, stripped.
    """
    shared = len(os.path.commonprefix([chosen, rejected]))
    cut = chosen.rfind(HH_MARKER, 0, shared)
    if cut < 0:
        return None
    end = cut + len(HH_MARKER)
    good, bad = chosen[end:].strip(), rejected[end:].strip()
    return None if good == bad else (chosen[:end].strip(), good, bad)


def hh_messages(prompt: str) -> list[dict[str, str]]:
    """An HH transcript prompt ("Human: ... \\n\\nAssistant: ... \\n\\nHuman: ... \\n\\nAssistant:") as chat
    messages [{"role": "user" | "assistant", "content": ...}], the open last Assistant turn dropped; text without
    a "Human:" turn is one user message."""
    turns = re.split(r"(?:^|\n\n)(Human|Assistant):", prompt.strip())
    if len(turns) < 3:
        return [{"role": "user", "content": prompt.strip()}]
    roles = {"Human": "user", "Assistant": "assistant"}
    messages = [{"role": roles[who], "content": text.strip()} for who, text in zip(turns[1::2], turns[2::2])]
    if messages[-1]["role"] == "assistant" and not messages[-1]["content"]:
        messages.pop()
    return messages


def _hh_local_files(folder: Path) -> dict[str, list[tuple[str, Path]]]:
    """Subset -> [(split, file)] from {subset}.{split}.jsonl.gz and {subset}/…"""
    if not folder.is_dir():
        raise DataError(f"{folder}: expected a folder of {{subset}}.test.jsonl.gz files or the hub id {HH_HUB_ID}")
    found: dict[str, list[tuple[str, Path]]] = defaultdict(list)
    for path in sorted(folder.glob("*.jsonl*")) + sorted(folder.glob("*/*.jsonl*")):
        match = _HH_FILE.fullmatch(path.relative_to(folder).as_posix())
        if match:
            found[match["subset"]].append((match["split"], path))
    if not found:
        raise DataError(f"{folder}: no HH-RLHF files ({{subset}}.test.jsonl.gz)")
    return dict(found)


def _hh_sources(source: str | Path, subsets: Sequence[str] | None) -> Iterator[tuple[str, str, Any]]:
    """Yield (subset, where, rows) for the chosen subsets."""
    hub = is_hub_id(source)
    files = {} if hub else _hh_local_files(Path(source))
    available = HH_SUBSETS if hub else tuple(files)
    names = list(subsets) if subsets is not None else list(available)
    check_names(source, names, set(available), "subset")
    for name in names:
        if hub:
            for split, rows in hub_splits(load_hub(str(source), data_dir=name)).items():
                yield name, f"{source} [{name}/{split}]", rows
        else:
            for _, path in files[name]:
                yield name, str(path), load_local(path)


def _hh_row(row: Mapping, where: str) -> Triple | None:
    for key in ("chosen", "rejected"):
        if not isinstance(row.get(key), str):
            raise DataError(f"{where}: missing or non-string field '{key}'")
    return split_hh(row["chosen"], row["rejected"])


def load_hh_rlhf(source: str | Path, *, subsets: Sequence[str] | None = None) -> HHTriples:
    """HH-RLHF (prompt, chosen, rejected) triples per subset.

    `source` is a folder with {subset}.{split}.jsonl.gz or {subset}/{split}.jsonl.gz
    files (all splits found are read) or the hub id "Anthropic/hh-rlhf" (each
    subset loaded with data_dir=subset). `subsets` defaults to all found.
    Unusable rows are skipped and counted in the result's `skipped`.
    """
    result = HHTriples()
    for subset, where, rows in _hh_sources(source, subsets):
        triples = result.setdefault(subset, [])
        result.skipped.setdefault(subset, 0)
        for i, row in enumerate(rows, start=1):
            triple = _hh_row(row, f"{where} row {i}")
            if triple is None:
                result.skipped[subset] += 1
            else:
                triples.append(triple)
    for subset, n in result.skipped.items():
        if n:
            log.info("%s: skipped %d of %d rows", subset, n, n + len(result[subset]))
    return result
