"""Finished run folders read back and grouped into configurations whose runs differ only in the seed."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from fedpref.config import ExperimentConfig, upgrade_config
from fedpref.engines.loop import partition_ari
from fedpref.errors import FedprefError
from fedpref.results import RESULTS_FILE, MethodResult, ResultsError, RunResults, load_results


def true_groups(config: dict) -> dict[str, str]:
    """Synthetic clients are indexed by group in order: c000.. are G1, then G2, ..."""
    ids, k = {}, 0
    for g, size in enumerate(config["data"]["group_sizes"], start=1):
        for _ in range(size):
            ids[f"c{k:03d}"] = f"G{g}"
            k += 1
    return ids


@dataclass
class Run:
    path: Path
    results: RunResults
    config: dict

    @property
    def seed(self) -> int:
        return self.results.seed if self.results.seed is not None else self.config.get("seed")

    @property
    def methods(self) -> dict[str, MethodResult]:
        return self.results.methods

    @property
    def finished(self) -> bool:
        return self.results.finished

    def ari(self, method: str) -> float | None:
        """The recorded ARI, else (runs from before it was recorded) recomputed for the synthetic benchmark."""
        result = self.methods[method]
        if result.partition_ari is not None:
            return result.partition_ari
        if self.config.get("data", {}).get("source", "synthetic") != "synthetic":
            return None
        return partition_ari(result.assignments or [], true_groups(self.config))

    def settled(self, method: str) -> int | None:
        return settle_round(self.methods[method].assignments or [])

    def partition(self, method: str) -> str | None:
        """The final partition by true group (synthetic benchmark only), see `partition_text`."""
        if self.config.get("data", {}).get("source", "synthetic") != "synthetic":
            return None
        return partition_text(self.methods[method].assignments or [], true_groups(self.config))


def settle_round(assignments: Sequence[dict]) -> int | None:
    """The round of the first clustering record after which the partition never changes (FedGD paper, Fig. 6);
    None without two records. Partitions are compared up to relabelling, so the frozen record's renumbered
    groups (FedGD, Alg. 1 line 21) count as unchanged; FedBiscuit's final selection is not a clustering step."""
    records = [a for a in assignments if not a.get("final_selection")]
    if len(records) < 2:
        return None
    partitions = [partition_of(a["assignment"]) for a in records]
    first = len(partitions) - 1
    while first > 0 and partitions[first - 1] == partitions[-1]:
        first -= 1
    return records[first]["round"]


def partition_text(assignments: Sequence[dict], truth: dict[str, str]) -> str | None:
    """The last frozen (FedGD) or final-selection (FedBiscuit) partition as the true groups in each model, e.g.
    'G1 6 + G2 6 | G3 2 + G4 2' (models in text order); None without one."""
    final = [a for a in assignments if a.get("frozen") or a.get("final_selection")]
    if not final:
        return None
    members: dict[int, Counter[str]] = {}
    for client, label in final[-1]["assignment"].items():
        if client in truth:
            members.setdefault(label, Counter())[truth[client]] += 1
    return " | ".join(sorted(" + ".join(f"{g} {n}" for g, n in sorted(c.items())) for c in members.values()))


def partition_of(assignment: dict[str, int]) -> frozenset[frozenset[str]]:
    """The clients grouped by label, without the labels."""
    groups: dict[int, set[str]] = {}
    for client, label in assignment.items():
        groups.setdefault(label, set()).add(client)
    return frozenset(frozenset(g) for g in groups.values())


def load_run(path: Path) -> Run:
    try:
        results = load_results(path)
        written = tomllib.loads((path / "config.toml").read_text(encoding="utf-8"))
    except (ResultsError, tomllib.TOMLDecodeError) as e:
        raise FedprefError(f"{path}: unreadable run files ({e})") from None
    config = upgrade_config(written, str(path / "config.toml"))  # an older version's keys as this one reads them
    return Run(path, results, with_defaults(config, dataclasses.asdict(ExperimentConfig())))  # every table


def with_defaults(config: dict, defaults: dict) -> dict:
    """`config` with every key it lacks taken from `defaults`, section by section: a run written before an option
    existed ran as its default does, so it groups with runs that record that default."""
    merged = dict(defaults) | config
    for key, value in defaults.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            merged[key] = with_defaults(config[key], value)
    return merged


def find_runs(paths: Sequence[Path]) -> list[Run]:
    """Run folders (results next to config.toml) given directly or anywhere below the given folders."""
    found: list[Path] = []
    for path in paths:
        if not path.is_dir():
            raise FedprefError(f"{path}: no such folder")
        below = sorted(p.parent for p in path.rglob(RESULTS_FILE) if (p.parent / "config.toml").is_file())
        if not below:
            raise FedprefError(f"{path}: no run folder ({RESULTS_FILE} with config.toml) in it")
        found += [p for p in below if p not in found]
    return [load_run(p) for p in found]


def flatten(table: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            out |= flatten(value, f"{prefix}{key}.")
        else:
            out[prefix + key] = value
    return out


@dataclass
class Group:
    """Runs of one configuration that differ only in the seed and in which methods each ran."""

    label: str
    runs: list[Run] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # "method (seed s) in path": a second copy of a result
    settings: dict[str, object] = field(default_factory=dict)  # the flattened config without NOT_CONFIGURATION

    def methods(self) -> list[str]:
        names: list[str] = []
        for run in self.runs:
            names += [m for m in run.methods if m not in names]
        return names

    def by_seed(self, method: str) -> dict[int, MethodResult]:
        """seed -> the method's results in that seed's run."""
        return {r.seed: r.methods[method] for r in self.runs if method in r.methods}


# Keys that do not change what a method's run computes: runs that differ only in them are one configuration.
# A method's run is deterministic per seed whichever methods run beside it, so FL from one sweep and FedGD from
# another pair up by seed.
NOT_CONFIGURATION = ("seed", "algorithm.methods")


def group_runs(runs: Sequence[Run]) -> list[Group]:
    """Group by the whole config except `NOT_CONFIGURATION`; label each group by the keys in which the groups
    differ. A method of a seed counts once per group: later copies (the same run summarized twice) are left out."""
    keyed: dict[str, list[Run]] = {}
    for run in sorted(runs, key=lambda r: (str(r.path.parent), r.seed)):
        rest = {k: v for k, v in flatten(run.config).items() if k not in NOT_CONFIGURATION}
        keyed.setdefault(json.dumps(rest, sort_keys=True, default=str), []).append(run)
    flat = [json.loads(k) for k in keyed]
    differing = sorted(k for k in set().union(*flat) if len({json.dumps(f.get(k)) for f in flat}) > 1)
    groups = []
    for rest, members in zip(flat, keyed.values(), strict=True):
        shown = [f"{k}={json.dumps(rest.get(k))}" for k in differing if k != "name"]
        label = ", ".join([str(rest.get("name", "?")), *shown])
        groups.append(without_copies(Group(label, members, settings=rest)))
    return groups


def without_copies(group: Group) -> Group:
    """The group with each (seed, method) result kept from its first run only."""
    seen: set[tuple[int, str]] = set()
    runs, left_out = [], []
    for run in group.runs:
        kept = {}
        for method, result in run.methods.items():
            if (run.seed, method) in seen:
                left_out.append(f"{method} (seed {run.seed}) in `{run.path}`")
            else:
                seen.add((run.seed, method))
                kept[method] = result
        if kept:
            runs.append(Run(run.path, replace(run.results, methods=kept), run.config))
    return Group(group.label, runs, left_out, group.settings)
