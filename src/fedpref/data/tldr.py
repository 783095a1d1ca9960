"""Reddit TL;DR comparisons (openai/summarize_from_feedback): one client per annotator (worker id)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from fedpref.data.files import check_names, hub_splits, is_hub_id, load_hub, load_local, local_files
from fedpref.data.pairs import PreferencePair
from fedpref.errors import ConfigError, DataError

TLDR_HUB_ID = "openai/summarize_from_feedback"
TLDR_HUB_CONFIG = "comparisons"


def _records(source: str | Path) -> Iterator[tuple[str, dict]]:
    """Yield (where, row) for every row of a file, folder or hub id."""
    if is_hub_id(source):
        config = TLDR_HUB_CONFIG if str(source) == TLDR_HUB_ID else None
        for name, split in hub_splits(load_hub(str(source), name=config)).items():
            for i, row in enumerate(split, start=1):
                yield f"{source} [{name}] row {i}", row
        return
    for path in local_files(Path(source)):
        for i, row in enumerate(load_local(path), start=1):
            yield f"{path} row {i}", row


def _field(row: Mapping, key: str, where: str, prefix: str = "") -> Any:
    value = row.get(key) if isinstance(row, Mapping) else None
    if value is None:
        raise DataError(f"{where}: missing field '{prefix}{key}'")
    return value


def _tldr_prompt(info: Mapping, where: str) -> str:
    """Reddit rows have a post; the CNN/DM rows of the hub set an article."""
    body = info.get("post") if isinstance(info, Mapping) else None
    label = "POST"
    if body is None and isinstance(info, Mapping) and info.get("article"):
        body, label = info["article"], "ARTICLE"
    if body is None:
        raise DataError(f"{where}: missing field 'info.post'")
    title = _field(info, "title", where, "info.")
    lines = [f"TITLE: {str(title).strip()}", f"{label}: {str(body).strip()}"]
    if info.get("subreddit"):
        lines.insert(0, f"SUBREDDIT: r/{str(info['subreddit']).strip()}")
    return "\n".join(lines) + "\nTL;DR:"


def _tldr_pair(row: Mapping, where: str) -> tuple[str, PreferencePair]:
    """(split, pair) for one comparison row."""
    info = _field(row, "info", where)
    summaries = _field(row, "summaries", where)
    choice = _field(row, "choice", where)
    if isinstance(choice, bool) or choice not in (0, 1):
        raise DataError(f"{where}: 'choice' must be 0 or 1, got {choice!r}")
    choice = int(choice)
    if not isinstance(summaries, Sequence) or len(summaries) != 2:
        raise DataError(f"{where}: 'summaries' must be a list of two summaries")
    texts = [str(_field(s, "text", where, f"summaries[{i}].")).strip() for i, s in enumerate(summaries)]
    pair = PreferencePair(
        prompt=_tldr_prompt(info, where),
        chosen=texts[choice],
        rejected=texts[1 - choice],
        client=str(_field(row, "worker", where)),
    )
    return str(_field(row, "split", where)), pair


def _tldr_pairs(source: str | Path) -> list[tuple[str, PreferencePair]]:
    pairs = [_tldr_pair(row, where) for where, row in _records(source)]
    if not pairs:
        raise DataError(f"{source}: no comparisons")
    return pairs


def _count(pairs: Sequence[tuple[str, PreferencePair]]) -> dict[str, dict[str, int]]:
    counts: dict[str, Counter] = defaultdict(Counter)
    for split, pair in pairs:
        counts[pair.client][split] += 1
    return {worker: dict(c) for worker, c in counts.items()}


def worker_counts(source: str | Path) -> dict[str, dict[str, int]]:
    """Comparisons per worker per split (the row's `split` field) in TL;DR data."""
    return _count(_tldr_pairs(source))


def _passing_workers(
    source: str | Path,
    counts: dict[str, dict[str, int]],
    required_splits: Sequence[str],
    min_per_split: int,
    min_total: int,
) -> set[str]:
    """Workers in every required split with enough comparisons; error if none."""
    floor = max(min_per_split, 1)

    def smallest(c: dict[str, int]) -> int:
        return min((c.get(s, 0) for s in required_splits), default=0)

    keep = {
        w for w, c in counts.items() if (not required_splits or smallest(c) >= floor) and sum(c.values()) >= min_total
    }
    if keep:
        return keep
    best = f"the largest worker has {max(sum(c.values()) for c in counts.values())}"
    if required_splits:
        best += f" in total and the best has {max(map(smallest, counts.values()))}"
        best += f" in its smallest of {', '.join(required_splits)}"
    raise DataError(
        f"{source}: no worker passes the filter (required_splits="
        f"{list(required_splits)}, min_per_split={min_per_split}, "
        f"min_total={min_total}); {len(counts)} workers, {best}"
    )


def load_tldr(
    source: str | Path,
    *,
    splits: Sequence[str] | None = None,
    required_splits: Sequence[str] = (),
    min_per_split: int = 0,
    min_total: int = 0,
) -> list[PreferencePair]:
    """Reddit TL;DR human comparisons as pairs, one client per `worker`.

    `source` is a file (.json/.jsonl JSON lines, optionally .gz, or .parquet),
    a folder of such files, or the hub id "openai/summarize_from_feedback".
    Workers are kept when they have at least `min_per_split` comparisons in
    every split of `required_splits` and `min_total` in all; these counts are
    over all rows, before `splits` selects the rows returned (the paper:
    required_splits=("train", "valid1", "valid2"), min_per_split=100).
    Splits are the rows' `split` field (train, valid1, valid2).
    """
    if min_per_split > 0 and not required_splits:
        raise ConfigError("min_per_split needs required_splits (the splits to count)")
    pairs = _tldr_pairs(source)
    found = {split for split, _ in pairs}
    check_names(source, [*required_splits, *(splits or ())], found, "split")
    counts = _count(pairs)
    keep = _passing_workers(source, counts, required_splits, min_per_split, min_total)
    chosen = [p for s, p in pairs if p.client in keep and (not splits or s in splits)]
    if not chosen:
        raise DataError(f"{source}: the kept workers have no rows in {list(splits)}")
    return chosen
