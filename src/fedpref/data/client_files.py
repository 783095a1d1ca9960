"""One file per client from a pooled JSON-lines file: what each node of a real federation holds alone."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from fedpref.data.files import json_lines
from fedpref.errors import DataError

SAFE = re.compile(r"[^A-Za-z0-9._-]")


def file_name(user: str) -> str:
    """A file name for a user id: unchanged when it is already safe, else made safe plus a short hash."""
    safe = SAFE.sub("_", user)[:80]
    if safe != user or not safe:
        safe = f"{safe}-{hashlib.sha256(user.encode()).hexdigest()[:8]}"
    return f"{safe}.jsonl"


def split_by_user(path: Path, user_key: str, out_dir: Path) -> dict[str, Path]:
    """Write each user's rows of `path` (JSON lines, optionally .gz) unchanged to `out_dir/<user>.jsonl`, in
    their original order; user -> file written. A row without the user key is an error naming its line."""
    rows: dict[str, list[str]] = {}
    for where, row in json_lines(path):
        if not isinstance(row, dict) or row.get(user_key) is None:
            raise DataError(f"{where}: no '{user_key}' (the user key; set it with --user-key)")
        rows.setdefault(str(row[user_key]), []).append(json.dumps(row, ensure_ascii=False))
    if not rows:
        raise DataError(f"{path}: no rows")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for user, lines in rows.items():
        target = out_dir / file_name(user)
        target.write_text("\n".join(lines) + "\n", encoding="utf-8")
        written[user] = target
    return written
