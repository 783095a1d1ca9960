"""Summaries of different seeds merged: the rows of `fedpref summarize --json` files joined per row, over seeds."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fedpref.errors import FedprefError
from fedpref.reports.seed_stats import estimate

# A row's statistics; the other fields (group, kind, method, step, and Stage 2's policy and context) name it.
STATISTICS = ("unit", "n", "mean", "std", "ci_low", "ci_high", "seeds", "values")


@dataclass
class Summary:
    """One summary: where it came from, its rows and the configuration of each of its groups."""

    source: str
    rows: list[dict]
    # group label -> its flattened config without the seed; absent in summaries written before it was recorded
    configurations: dict[str, dict] | None = None


@dataclass
class Merged:
    """The merged rows, the configurations they came from, and what the merge could not check."""

    rows: list[dict]
    configurations: dict[str, dict] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def load_summary(path: Path) -> Summary:
    """A `fedpref summarize --json` file."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise FedprefError(f"{path}: not a readable summary JSON ({error})") from error
    if not isinstance(document, dict) or not str(document.get("format", "")).startswith("fedpref-summary/"):
        raise FedprefError(f"{path}: not a summary JSON (`fedpref summarize --json` writes one)")
    return Summary(str(path), document["rows"], document.get("configurations"))


def row_key(record: Mapping) -> str:
    """What names a row across summaries: every field but its statistics."""
    return json.dumps({k: v for k, v in record.items() if k not in STATISTICS}, sort_keys=True)


def row_name(record: Mapping) -> str:
    parts = [record.get(k) for k in ("group", "kind", "method", "policy", "context")]
    step = record.get("step")
    return " / ".join(str(p) for p in parts if p) + ("" if step is None else f" at step {step}")


def per_seed(record: Mapping) -> dict[int, float]:
    """seed -> the row's value for that seed. A one-seed paired difference (unit 'client') holds the clients'
    differences; their mean is that seed's value, as a seed's value is the mean over its clients."""
    if record["unit"] == "seed":
        return dict(zip(record["seeds"], record["values"], strict=True))
    if len(record["seeds"]) == 1:
        return {record["seeds"][0]: record["mean"]}
    raise FedprefError(f"{row_name(record)}: unit {record['unit']!r} over seeds {record['seeds']} cannot be merged")


# Settings that say where a run happened, not what it computed: data and cache locations, and the device (seeds on
# a GPU and on a CPU are replicates of one experiment)
MACHINE_KEYS = ("device", "cache_dir")


def compared(settings: Mapping[str, object]) -> dict[str, object]:
    """The settings that must agree: all but `MACHINE_KEYS` and the keys ending in 'path'."""
    kept = {}
    for key, value in settings.items():
        last = key.rsplit(".", 1)[-1].rsplit(": ", 1)[-1]  # Stage 2's keys read 'METHOD: key'
        if not (last.endswith("path") or last in MACHINE_KEYS):
            kept[key] = value
    return kept


def configuration_conflicts(summaries: Sequence[Summary]) -> tuple[dict[str, dict], list[str]]:
    """(group -> settings, warnings). Raises when two summaries hold one group with different settings; keys that
    only one of them has (a field added in a later version) are not compared."""
    known: dict[str, tuple[str, dict]] = {}
    warnings = []
    for summary in summaries:
        if summary.configurations is None:
            warnings.append(f"{summary.source} records no configurations: its runs' settings could not be compared")
            continue
        for group, settings in summary.configurations.items():
            if group not in known:
                known[group] = (summary.source, settings)
                continue
            source, first = known[group]
            a, b = compared(first), compared(settings)
            if differing := sorted(k for k in a.keys() & b.keys() if a[k] != b[k]):
                shown = "; ".join(f"{k}: {a[k]!r} vs {b[k]!r}" for k in differing[:5])
                raise FedprefError(
                    f"group {group!r} is not the same configuration in {source} and {summary.source} ({shown}): "
                    "summaries merge only over seeds of one configuration"
                )
    return {group: settings for group, (_, settings) in known.items()}, warnings


def merge_summaries(summaries: Sequence[Summary]) -> Merged:
    """Rows of the same name joined over their seeds: mean, sample std and 95% t-interval again over all of
    them. A seed two summaries both hold must have the same value there (the same run summarized twice); a row
    only one summary holds is kept as it is."""
    configurations, warnings = configuration_conflicts(summaries)
    first: dict[str, dict] = {}
    values: dict[str, dict[int, tuple[float, str]]] = {}
    for summary in summaries:
        for record in summary.rows:
            key = row_key(record)
            first.setdefault(key, record)
            mine = values.setdefault(key, {})
            for seed, value in per_seed(record).items():
                if seed in mine and not math.isclose(mine[seed][0], value, rel_tol=1e-9, abs_tol=1e-9):
                    raise FedprefError(
                        f"{row_name(record)}, seed {seed}: {mine[seed][0]} in {mine[seed][1]} but {value} in "
                        f"{summary.source}: two different runs of one seed"
                    )
                mine.setdefault(seed, (value, summary.source))
    rows = []
    for key, record in first.items():
        seeds = sorted(values[key])
        if seeds == sorted(record["seeds"]):
            rows.append(record)  # no other seed anywhere: as it was (a one-seed paired row keeps its clients)
            continue
        est = estimate([values[key][s][0] for s in seeds])
        ci = est.interval or (None, None)
        stats = {"unit": "seed", "n": est.n, "mean": est.mean, "std": est.std, "ci_low": ci[0], "ci_high": ci[1]}
        rows.append(record | stats | {"seeds": seeds, "values": list(est.values)})
    return Merged(rows, configurations, warnings)


def fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def merged_markdown(merged: Merged, sources: Sequence[str]) -> str:
    """One table per group and kind of row: n, mean, std, 95% t-interval over seeds and each seed's value."""
    lines = ["# Summary merged over seeds", "", "From: " + ", ".join(f"`{s}`" for s in sources) + "."]
    lines += ["", "Mean, sample std and 95% t-interval over the seeds of all of them; per seed 'seed: value'."]
    lines += [f"Note: {w}." for w in merged.warnings]
    tables: dict[tuple[str, str], list[dict]] = {}
    for record in merged.rows:
        tables.setdefault((record["group"], record["kind"]), []).append(record)
    for (group, kind), records in tables.items():
        names = [k for k in ("policy", "context") if any(r.get(k) for r in records)]
        names += ["step"] if any(r.get("step") is not None for r in records) else []
        lines += ["", f"## {group}: {kind}", ""]
        lines += ["| " + " | ".join(["method", *names, "n", "mean", "std", "95% CI", "per seed"]) + " |"]
        lines += ["|" + "---|" * (len(names) + 6)]
        for r in records:
            ci = "–" if r["ci_low"] is None else f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]"
            seeds = (
                ", ".join(f"{s}: {fmt(v)}" for s, v in zip(r["seeds"], r["values"], strict=True))
                if r["unit"] == "seed"
                else f"seed {r['seeds'][0]}: {r['n']} {r['unit']}s"
            )
            named = ["" if r.get(k) is None else str(r[k]) for k in names]
            cells = [r["method"], *named, str(r["n"]), fmt(r["mean"]), fmt(r["std"]), ci, seeds]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
