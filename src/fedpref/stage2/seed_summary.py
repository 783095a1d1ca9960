"""Stage 2 runs over seeds: per Stage 1 method, each type's win rate and the worse-served type, with t-intervals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fedpref.errors import FedprefError
from fedpref.reports.run_groups import flatten
from fedpref.reports.seed_stats import Estimate, estimate
from fedpref.results import NOT_JUDGES, RESULTS_FILE, STAGE2, STAGE2_POLICIES, RunResults, Stage2Results, load_results

WORSE = "worse type"  # per seed, the lower of the task's types' win rates: how well a policy trades them off


@dataclass(frozen=True)
class Stage2Run:
    """One finished `fedpref stage2` folder: its Stage 1 method, seed, types and results."""

    path: Path
    method: str
    seed: int
    types: tuple[str, ...]
    results: RunResults

    @property
    def sections(self) -> Stage2Results:
        return self.results.stage2 or Stage2Results()

    def win_rates(self, policy: str, judge: str) -> dict[str, float] | None:
        """Win rate (%) per context for one policy ('stage2' or 'feddpo') and judge, plus WORSE; None if absent."""
        section = self.sections.policy(policy)
        by_context = section.win_rates.get(judge) if section is not None else None
        if by_context is None:
            return None
        rates = {context: r["win_rate"] for context, r in by_context.items() if r["win_rate"] is not None}
        seen = [rates[t] for t in self.types if t in rates]
        return rates | ({WORSE: min(seen)} if seen else {})

    def judges(self) -> list[str]:
        """The judges whose win rates this run holds, for either policy."""
        sections = [self.sections.policy(policy) for policy, _ in STAGE2_POLICIES]
        return [j for s in sections if s is not None for j in s.win_rates if j not in NOT_JUDGES]

    def selector_accuracy(self, key: str) -> dict[str, float]:
        """Stage 1 test accuracy per type: key 'acc' (with z) or 'base_acc' (base logits)."""
        return {g: r[key] for g, r in (self.sections.stage1 or {})["by_group"].items()}


def load_stage2_run(path: Path) -> Stage2Run | None:
    """The finished run in `path`, or None when its results are another command's (`fedpref run` writes them
    too) or not finished (a Stage 2 run writes them from its start)."""
    results = load_results(path)
    if results.kind != STAGE2 or not results.finished or results.stage2 is None or results.stage2.stage1 is None:
        return None
    config = results.stage2.config or {}
    return Stage2Run(path, config["stage1"]["method"], config["seed"], results.stage2.types, results)


def find_stage2_runs(dirs: Sequence[Path]) -> list[Stage2Run]:
    """Stage 2 folders given directly or anywhere below the given folders (finished Stage 2 results)."""
    runs = []
    for path in dirs:
        if not path.is_dir():
            raise FedprefError(f"{path}: not a folder")
        found = [run for p in sorted(path.rglob(RESULTS_FILE)) if (run := load_stage2_run(p.parent))]
        if not found:
            raise FedprefError(f"{path}: no finished `fedpref stage2` run ({RESULTS_FILE}) in it")
        runs += found
    return runs


def by_method(runs: Sequence[Stage2Run]) -> dict[str, list[Stage2Run]]:
    """Runs per Stage 1 method, one per seed; runs of one method must differ only in their seed."""
    groups: dict[str, list[Stage2Run]] = {}
    for run in sorted(runs, key=lambda r: (r.method, r.seed)):
        groups.setdefault(run.method, []).append(run)
    for method, group in groups.items():
        seeds = [r.seed for r in group]
        if len(set(seeds)) < len(seeds):
            paths = ", ".join(str(r.path) for r in group)
            raise FedprefError(f"{method}: two runs share a seed ({paths}); summarize each configuration on its own")
        first = group[0].sections.config or {}
        for run in group[1:]:
            if keys := _differing_keys(first, run.sections.config or {}) - {"seed"}:
                raise FedprefError(
                    f"{method}: {run.path} differs from {group[0].path} in {', '.join(sorted(keys))}, not only in "
                    "its seed; summarize each configuration on its own"
                )
    return groups


def _differing_keys(a: dict, b: dict, prefix: str = "") -> set[str]:
    """Dotted keys whose values differ between two config dicts."""
    keys = set()
    for key in a.keys() | b.keys():
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            keys |= _differing_keys(x, y, f"{prefix}{key}.")
        elif x != y:
            keys.add(prefix + key)
    return keys


@dataclass(frozen=True)
class Stage2Row:
    """One table row: a method's policy and a context, its win rates (or accuracies) over seeds."""

    method: str
    policy: str
    context: str
    est: Estimate
    seeds: tuple[int, ...]


def win_rate_rows(groups: dict[str, list[Stage2Run]], judge: str) -> list[Stage2Row]:
    rows = []
    for method, runs in groups.items():
        for policy, name in STAGE2_POLICIES:
            per_seed = [(r.seed, r.win_rates(policy, judge)) for r in runs]
            per_seed = [(s, rates) for s, rates in per_seed if rates]
            if not per_seed:
                continue
            for context in per_seed[0][1]:
                values = [(s, rates[context]) for s, rates in per_seed if context in rates]
                est = estimate([v for _, v in values])
                rows.append(Stage2Row(method, name, context, est, tuple(s for s, _ in values)))
    return rows


def selector_rows(groups: dict[str, list[Stage2Run]]) -> list[Stage2Row]:
    rows = []
    for method, runs in groups.items():
        for key, name in (("acc", "selector with z"), ("base_acc", "base logits")):
            for group in runs[0].selector_accuracy(key):
                values = [r.selector_accuracy(key)[group] for r in runs]
                rows.append(Stage2Row(method, name, group, estimate(values), tuple(r.seed for r in runs)))
    return rows


def paired_rows(groups: dict[str, list[Stage2Run]], a: str, b: str, judge: str) -> list[Stage2Row]:
    """Conditional DPO on A's selector minus on B's, per context, one value per seed both have."""
    for name in (a, b):
        if name not in groups:
            raise FedprefError(f"--pair {a},{b}: no run of {name!r} (have {', '.join(groups)})")
    rates_a = {r.seed: r.win_rates("stage2", judge) or {} for r in groups[a]}
    rates_b = {r.seed: r.win_rates("stage2", judge) or {} for r in groups[b]}
    seeds = sorted(rates_a.keys() & rates_b.keys())
    if not seeds:
        raise FedprefError(f"--pair {a},{b}: no seed has runs of both")
    rows = []
    for context in rates_a[seeds[0]]:
        both = [s for s in seeds if context in rates_a[s] and context in rates_b[s]]
        if both:
            diffs = [rates_a[s][context] - rates_b[s][context] for s in both]
            rows.append(Stage2Row(f"{a} - {b}", "conditional DPO", context, estimate(diffs), tuple(both)))
    return rows


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def rows_markdown(rows: Sequence[Stage2Row], first: str) -> list[str]:
    lines = [f"| {first} | policy | type | n | mean | std | 95% CI | per seed |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ci = r.est.interval
        ci_text = f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else "–"
        values = ", ".join(f"{s}: {_fmt(v)}" for s, v in zip(r.seeds, r.est.values))
        cells = [r.method, r.policy, r.context, str(r.est.n), _fmt(r.est.mean), _fmt(r.est.std), ci_text, values]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def stage2_record(group: str, kind: str, r: Stage2Row) -> dict:
    """One row in the shape of `fedpref summarize --json`'s rows, with the policy and the type (context)."""
    ci = r.est.interval or (None, None)
    return {
        "group": group, "kind": kind, "method": r.method, "policy": r.policy, "context": r.context, "step": None,
        "unit": "seed", "n": r.est.n, "mean": r.est.mean, "std": r.est.std, "ci_low": ci[0], "ci_high": ci[1],
        "seeds": list(r.seeds), "values": list(r.est.values),
    }  # fmt: skip


def stage2_configurations(dirs: Sequence[Path], judge: str) -> dict[str, dict]:
    """{'judge J': settings}, the settings of each Stage 1 method's runs without their seed, as 'METHOD: key'
    (what `reports.merge` compares before it merges summaries of other seeds)."""
    settings = {}
    for method, runs in by_method(find_stage2_runs(dirs)).items():
        config = flatten(runs[0].results.stage2.config or {})
        settings |= {f"{method}: {key}": value for key, value in config.items() if key != "seed"}
    return {f"judge {judge}": settings}


def summarize_stage2(dirs: Sequence[Path], judge: str = "oracle", pairs: Sequence[tuple[str, str]] = ()) -> str:
    """Markdown: win rates over seeds per Stage 1 method and policy, the selector's accuracy, paired differences."""
    return stage2_summary(dirs, judge, pairs)[0]


def stage2_summary(
    dirs: Sequence[Path], judge: str = "oracle", pairs: Sequence[tuple[str, str]] = ()
) -> tuple[str, list[dict]]:
    """(Markdown, its rows as `stage2_record`s: win_rate, selector_accuracy, paired_win_rate; group 'judge J')."""
    groups = by_method(find_stage2_runs(dirs))
    rates = win_rate_rows(groups, judge)
    if not rates:
        judged = sorted({j for runs in groups.values() for r in runs for j in r.judges()})
        raise FedprefError(
            f"no run has win rates by the {judge!r} judge (--judge; these runs have: {', '.join(judged)})"
        )
    lines = ["# Stage 2 over seeds", ""]
    for method, runs in groups.items():
        lines.append(
            f"- {method}: seeds {', '.join(str(r.seed) for r in runs)} (" + ", ".join(f"`{r.path}`" for r in runs) + ")"
        )
    lines += [
        "",
        f"Win rate (%) against the frozen base, judge `{judge}`; mean, sample std and 95% t-interval over seeds. "
        f"'{WORSE}' is, per seed, the lower of the types' win rates.",
        "",
        *rows_markdown(rates, "Stage 1 method"),
        "",
        "Stage 1 selector test accuracy (%) per type, with z and from its base logits alone:",
        "",
        *rows_markdown(selectors := selector_rows(groups), "Stage 1 method"),
    ]
    label = f"judge {judge}"
    records = [stage2_record(label, "win_rate", r) for r in rates]
    records += [stage2_record(label, "selector_accuracy", r) for r in selectors]
    for a, b in pairs:
        paired = paired_rows(groups, a, b, judge)
        lines += [
            "",
            f"Paired difference of the conditional policies' win rates, {a} - {b} (one value per seed):",
            "",
            *rows_markdown(paired, "pair"),
        ]
        records += [stage2_record(label, "paired_win_rate", r) for r in paired]
    return "\n".join(lines) + "\n", records
