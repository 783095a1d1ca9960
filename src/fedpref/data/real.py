"""Loaders for real preference data: Reddit TL;DR, Anthropic HH-RLHF, JSON lines."""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from fedpref.data.pairs import PreferencePair
from fedpref.errors import ConfigError, DataError

log = logging.getLogger(__name__)

TLDR_HUB_ID = "openai/summarize_from_feedback"
TLDR_HUB_CONFIG = "comparisons"
HH_HUB_ID = "Anthropic/hh-rlhf"
HH_SUBSETS = (
    "helpful-base",
    "harmless-base",
    "helpful-online",
    "helpful-rejection-sampled",
)
HH_MARKER = "\n\nAssistant:"
PARTITION_SCHEMES = ("by_subset", "iid", "dirichlet")

# Longest suffix first, so "x.jsonl.gz" is not read as ".gz".
_FORMATS = {
    ".jsonl.gz": "json",
    ".json.gz": "json",
    ".jsonl": "json",
    ".json": "json",
    ".parquet": "parquet",
}
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_HH_FILE = re.compile(r"(?P<subset>[\w-]+)[./](?P<split>\w+)\.jsonl(\.gz)?")

Triple = tuple[str, str, str]


# --- shared: reading through `datasets` ------------------------------------


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _is_hub_id(source: str | Path) -> bool:
    """A string like "owner/name" that is not an existing path."""
    text = str(source)
    return not Path(text).exists() and _HUB_ID.fullmatch(text) is not None and _format_of(text) is None


def _format_of(name: str) -> str | None:
    lower = name.lower()
    return next((f for s, f in _FORMATS.items() if lower.endswith(s)), None)


def _load_local(path: Path) -> Any:
    """One local file as a `datasets.Dataset`; errors name the file."""
    fmt = _format_of(path.name)
    if fmt is None:
        known = ", ".join(_FORMATS)
        raise DataError(f"{path}: unknown file format (expected one of {known})")
    import datasets

    try:
        return datasets.load_dataset(fmt, data_files=str(path), split="train")
    except Exception as e:  # datasets raises many types; report them all alike
        raise DataError(f"{path}: could not read as {fmt} ({_one_line(e)})") from e


def _load_hub(repo: str, **kwargs: Any) -> Any:
    """A hub data set (all splits) through `datasets.load_dataset`."""
    import datasets

    try:
        return datasets.load_dataset(repo, **kwargs)
    except Exception as e:
        raise DataError(f"{repo}: could not load from the Hugging Face hub ({_one_line(e)})") from e


def _hub_splits(data: Any) -> Mapping[str, Any]:
    """`load_dataset` without `split` gives a DatasetDict; tests may give a dict."""
    return data if isinstance(data, Mapping) else {"train": data}


def _local_files(path: Path) -> list[Path]:
    if not path.exists():
        raise DataError(f"{path}: no such file or directory")
    if path.is_file():
        return [path]
    files = sorted(p for p in path.iterdir() if p.is_file() and _format_of(p.name))
    if not files:
        raise DataError(f"{path}: no data files ({', '.join(_FORMATS)}) in folder")
    return files


# --- Reddit TL;DR comparisons (openai/summarize_from_feedback) -------------


def _records(source: str | Path) -> Iterator[tuple[str, dict]]:
    """Yield (where, row) for every row of a file, folder or hub id."""
    if _is_hub_id(source):
        config = TLDR_HUB_CONFIG if str(source) == TLDR_HUB_ID else None
        for name, split in _hub_splits(_load_hub(str(source), name=config)).items():
            for i, row in enumerate(split, start=1):
                yield f"{source} [{name}] row {i}", row
        return
    for path in _local_files(Path(source)):
        for i, row in enumerate(_load_local(path), start=1):
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


def _check_names(source: str | Path, names: Sequence[str], found: set[str], what: str) -> None:
    """`what` is e.g. "split": unknown names are an error listing those present."""
    unknown = [n for n in names if n not in found]
    if unknown:
        raise DataError(
            f"{source}: {what}(s) {', '.join(unknown)} not in the data ({what}s present: {', '.join(sorted(found))})"
        )


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
    _check_names(source, [*required_splits, *(splits or ())], found, "split")
    counts = _count(pairs)
    keep = _passing_workers(source, counts, required_splits, min_per_split, min_total)
    chosen = [p for s, p in pairs if p.client in keep and (not splits or s in splits)]
    if not chosen:
        raise DataError(f"{source}: the kept workers have no rows in {list(splits)}")
    return chosen


# --- Anthropic HH-RLHF -----------------------------------------------------


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
    hub = _is_hub_id(source)
    files = {} if hub else _hh_local_files(Path(source))
    available = HH_SUBSETS if hub else tuple(files)
    names = list(subsets) if subsets is not None else list(available)
    _check_names(source, names, set(available), "subset")
    for name in names:
        if hub:
            for split, rows in _hub_splits(_load_hub(str(source), data_dir=name)).items():
                yield name, f"{source} [{name}/{split}]", rows
        else:
            for _, path in files[name]:
                yield name, str(path), _load_local(path)


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


# --- HH-RLHF client partitions ---------------------------------------------


def _check_partition_args(
    num_clients: int,
    scheme: str,
    helpful_fraction: float,
    alpha: float,
    pairs_per_client: int | None,
) -> None:
    if scheme not in PARTITION_SCHEMES:
        choices = ", ".join(PARTITION_SCHEMES)
        raise ConfigError(f"unknown partition scheme {scheme!r} (choose {choices})")
    if num_clients < 1:
        raise ConfigError(f"num_clients must be at least 1, got {num_clients}")
    if not 0.0 <= helpful_fraction <= 1.0:
        raise ConfigError(f"helpful_fraction must be in [0, 1], got {helpful_fraction}")
    if alpha <= 0:
        raise ConfigError(f"alpha must be positive, got {alpha}")
    if pairs_per_client is not None and pairs_per_client < 1:
        raise ConfigError(f"pairs_per_client must be at least 1, got {pairs_per_client}")


def _kind(subset: str) -> str:
    return "harmless" if "harmless" in subset else "helpful"


def _client_ids(num_clients: int) -> list[str]:
    width = max(2, len(str(num_clients - 1)))
    return [f"c{i:0{width}d}" for i in range(num_clients)]


def _deal(
    pool: list[Triple],
    clients: Sequence[str],
    per_client: int | None,
    rng: np.random.Generator,
    what: str,
) -> list[list[Triple]]:
    """Shuffle `pool` and give each client a disjoint share (even, or fixed size)."""
    need = len(clients) * (per_client or 1)
    if len(pool) < need:
        raise DataError(f"{what}: {len(clients)} client(s) need {need} pairs, only {len(pool)}")
    order = rng.permutation(len(pool))
    if per_client is not None:
        order = order[:need]
    return [[pool[i] for i in part] for part in np.array_split(order, len(clients))]


def _pairs(shares: Sequence[list[Triple]], clients: Sequence[str], groups: Sequence) -> list[PreferencePair]:
    return [
        PreferencePair(prompt=p, chosen=c, rejected=r, client=client, group=group)
        for share, client, group in zip(shares, clients, groups, strict=True)
        for p, c, r in share
    ]


def _by_subset(triples_by_subset, clients, helpful_fraction, per_client, rng):
    n_helpful = round(len(clients) * helpful_fraction)
    groups = ["helpful"] * n_helpful + ["harmless"] * (len(clients) - n_helpful)
    shares: list[list[Triple]] = [[] for _ in clients]
    for kind in ("helpful", "harmless"):
        mine = [i for i, g in enumerate(groups) if g == kind]
        if not mine:
            continue
        pool = [t for s, ts in triples_by_subset.items() if _kind(s) == kind for t in ts]
        dealt = _deal(pool, mine, per_client, rng, f"{kind} subsets")
        for i, share in zip(mine, dealt, strict=True):
            shares[i] = share
    return _pairs(shares, clients, groups)


def _capped_counts(n: int, probs: np.ndarray, left: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Multinomial(n, probs) counts, re-drawing over subsets not yet used up."""
    counts = np.zeros_like(left)
    while n > 0:
        room = left - counts
        weights = np.where(room > 0, probs, 0.0)
        weights = weights if weights.sum() > 0 else (room > 0).astype(float)
        take = np.minimum(rng.multinomial(n, weights / weights.sum()), room)
        counts += take
        n -= int(take.sum())
    return counts


def _dirichlet(triples_by_subset, clients, alpha, per_client, rng):
    names = [s for s, ts in triples_by_subset.items() if ts]
    pools = [list(triples_by_subset[s]) for s in names]
    total = sum(map(len, pools))
    size = per_client if per_client is not None else total // len(clients)
    if size < 1 or size * len(clients) > total:
        raise DataError(
            f"HH-RLHF: {len(clients)} client(s) x {max(size, 1)} pairs need "
            f"{max(size, 1) * len(clients)} pairs, only {total}"
        )
    orders = [list(rng.permutation(len(p))) for p in pools]
    left = np.array([len(p) for p in pools])
    shares = []
    for _ in clients:
        counts = _capped_counts(size, rng.dirichlet([alpha] * len(names)), left, rng)
        share = []
        for k, n in enumerate(counts):
            share += [pools[k][orders[k].pop()] for _ in range(n)]
        left -= counts
        shares.append(share)
    return _pairs(shares, clients, [None] * len(clients))


def partition_hh(
    triples_by_subset: Mapping[str, Sequence[Triple]],
    *,
    num_clients: int,
    scheme: str,
    helpful_fraction: float = 0.5,
    alpha: float = 0.5,
    pairs_per_client: int | None = None,
    seed: int,
) -> list[PreferencePair]:
    """Deal HH-RLHF triples to clients c00, c01, ...; no pair goes to two clients.

    by_subset: round(num_clients * helpful_fraction) "helpful" clients draw from
    the helpful subsets, the rest ("harmless") from subsets named *harmless*;
    `group` is the client's kind. iid: all pairs shuffled and dealt evenly.
    dirichlet: each client's subset proportions ~ Dir(alpha), drawn without
    replacement (a used-up subset's share goes to the others); `group` is None.
    Without `pairs_per_client`, by_subset and iid deal every pair and dirichlet
    gives each client total // num_clients.
    """
    _check_partition_args(num_clients, scheme, helpful_fraction, alpha, pairs_per_client)
    rng = np.random.default_rng(seed)
    clients = _client_ids(num_clients)
    if scheme == "by_subset":
        return _by_subset(triples_by_subset, clients, helpful_fraction, pairs_per_client, rng)
    if scheme == "dirichlet":
        return _dirichlet(triples_by_subset, clients, alpha, pairs_per_client, rng)
    pool = [t for ts in triples_by_subset.values() for t in ts]
    shares = _deal(pool, clients, pairs_per_client, rng, "HH-RLHF")
    return _pairs(shares, clients, [None] * num_clients)


# --- generic pairwise JSON lines -------------------------------------------


def _open_text(path: Path) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def _json_lines(path: Path) -> Iterator[tuple[str, Any]]:
    """Yield ("file:line", object) for each non-blank line."""
    with _open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{where}: malformed JSON ({e.msg})") from None


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
        pairs = [_generic_pair(row, where, keys, group_key) for where, row in _json_lines(path)]
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: could not read ({_one_line(e)})") from e
    if not pairs:
        raise DataError(f"{path}: no preference pairs")
    return pairs
