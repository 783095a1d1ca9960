"""The preference pair record and its JSON-lines format.

One JSON object per line::

    {"prompt": "...", "chosen": "...", "rejected": "...",
     "client": "c07", "group": "G2"}

``client`` is required (who owns the pair); ``group`` is optional (the
ground-truth preference group, when known, e.g. on the synthetic benchmark).
Extra keys are ignored on import and not written on export.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from fedpref.errors import DataError

REQUIRED_FIELDS = ("prompt", "chosen", "rejected", "client")


@dataclass(frozen=True)
class PreferencePair:
    """A prompt with a preferred (chosen) and a less-preferred (rejected) response."""

    prompt: str
    chosen: str
    rejected: str
    client: str
    group: str | None = None


def pair_from_dict(row: dict, where: str = "") -> PreferencePair:
    """Build a pair from a JSON object; `where` names the source in errors."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    missing = [f for f in REQUIRED_FIELDS if f not in row]
    if missing:
        raise DataError(f"{where}: missing field(s) {', '.join(missing)}")
    for name in ("prompt", "chosen", "rejected"):
        if not isinstance(row[name], str):
            raise DataError(f"{where}: field '{name}' must be a string")
    group = row.get("group")
    return PreferencePair(
        prompt=row["prompt"],
        chosen=row["chosen"],
        rejected=row["rejected"],
        client=str(row["client"]),
        group=None if group is None else str(group),
    )


def read_jsonl(path: str | Path) -> list[PreferencePair]:
    """Read pairs from a JSON-lines file; errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    pairs = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{where}: malformed JSON ({e.msg})") from None
            pairs.append(pair_from_dict(row, where))
    if not pairs:
        raise DataError(f"{path}: no preference pairs")
    return pairs


def write_jsonl(pairs: Iterable[PreferencePair], path: str | Path) -> None:
    """Write pairs as JSON lines (the format read by `read_jsonl`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for pair in pairs:
            row = {k: v for k, v in asdict(pair).items() if v is not None}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
