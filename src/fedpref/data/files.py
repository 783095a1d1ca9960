"""Reading preference data: local files (JSON, JSON lines, parquet, optionally gzipped) and hub data sets,
both through `datasets`; plain JSON lines without it."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from fedpref.errors import DataError

# Longest suffix first, so "x.jsonl.gz" is not read as ".gz".
_FORMATS = {
    ".jsonl.gz": "json",
    ".json.gz": "json",
    ".jsonl": "json",
    ".json": "json",
    ".parquet": "parquet",
}
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def is_hub_id(source: str | Path) -> bool:
    """A string like "owner/name" that is not an existing path."""
    text = str(source)
    return not Path(text).exists() and _HUB_ID.fullmatch(text) is not None and format_of(text) is None


def format_of(name: str) -> str | None:
    lower = name.lower()
    return next((f for s, f in _FORMATS.items() if lower.endswith(s)), None)


def load_local(path: Path) -> Any:
    """One local file as a `datasets.Dataset`; errors name the file."""
    fmt = format_of(path.name)
    if fmt is None:
        known = ", ".join(_FORMATS)
        raise DataError(f"{path}: unknown file format (expected one of {known})")
    import datasets

    try:
        return datasets.load_dataset(fmt, data_files=str(path), split="train")
    except Exception as e:  # datasets raises many types; report them all alike
        raise DataError(f"{path}: could not read as {fmt} ({one_line(e)})") from e


def load_hub(repo: str, **kwargs: Any) -> Any:
    """A hub data set (all splits) through `datasets.load_dataset`."""
    import datasets

    try:
        return datasets.load_dataset(repo, **kwargs)
    except Exception as e:
        raise DataError(f"{repo}: could not load from the Hugging Face hub ({one_line(e)})") from e


def hub_splits(data: Any) -> Mapping[str, Any]:
    """`load_dataset` without `split` gives a DatasetDict; tests may give a dict."""
    return data if isinstance(data, Mapping) else {"train": data}


def local_files(path: Path) -> list[Path]:
    if not path.exists():
        raise DataError(f"{path}: no such file or directory")
    if path.is_file():
        return [path]
    files = sorted(p for p in path.iterdir() if p.is_file() and format_of(p.name))
    if not files:
        raise DataError(f"{path}: no data files ({', '.join(_FORMATS)}) in folder")
    return files


def open_text(path: Path) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def json_lines(path: Path) -> Iterator[tuple[str, Any]]:
    """Yield ("file:line", object) for each non-blank line."""
    with open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{where}: malformed JSON ({e.msg})") from None


def check_names(source: str | Path, names: Sequence[str], found: set[str], what: str) -> None:
    """`what` is e.g. "split": unknown names are an error listing those present."""
    unknown = [n for n in names if n not in found]
    if unknown:
        raise DataError(
            f"{source}: {what}(s) {', '.join(unknown)} not in the data ({what}s present: {', '.join(sorted(found))})"
        )
