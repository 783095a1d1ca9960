"""Generic pairwise JSON lines: any file with prompt / chosen / rejected / user id keys, one client per user."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fedpref.data.files import json_lines, one_line
from fedpref.data.pairs import PreferencePair
from fedpref.errors import DataError


def _generic_pair(row: Any, where: str, keys: dict[str, str], group_key: str | None) -> PreferencePair:
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    wanted = list(keys.values()) + ([group_key] if group_key else [])
    missing = [k for k in wanted if row.get(k) is None]
    if missing:
        raise DataError(f"{where}: missing key(s) {', '.join(missing)}")
    for field in ("prompt", "chosen", "rejected"):
        if not isinstance(row[keys[field]], str):
            raise DataError(f"{where}: '{keys[field]}' must be a string")
    text = {field: row[key] for field, key in keys.items() if field != "client"}
    group = str(row[group_key]) if group_key else None
    return PreferencePair(**text, client=str(row[keys["client"]]), group=group)


def load_pairwise_jsonl(
    path: str | Path,
    *,
    prompt_key: str = "prompt",
    chosen_key: str = "chosen",
    rejected_key: str = "rejected",
    user_key: str = "user_id",
    group_key: str | None = None,
) -> list[PreferencePair]:
    """Pairs from any JSON-lines file (optionally .gz) with a user id column.

    One client per distinct `user_key` value; `group_key`, if given, is required.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    keys = {
        "prompt": prompt_key,
        "chosen": chosen_key,
        "rejected": rejected_key,
        "client": user_key,
    }
    try:
        pairs = [_generic_pair(row, where, keys, group_key) for where, row in json_lines(path)]
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: could not read ({one_line(e)})") from e
    if not pairs:
        raise DataError(f"{path}: no preference pairs")
    return pairs
