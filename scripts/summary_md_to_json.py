"""Convert `fedpref summarize` Markdown (whose run folders are gone) into the JSON that `--json` writes."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from fedpref.reports.summary import COST, DIAGNOSTIC_COLUMNS, EFFICIENCY, json_document

# A table's caption (the line before it) -> the row kind `fedpref summarize` gives its rows.
CAPTIONS = (
    ("Accuracy (%) per personalization step", "accuracy"),
    ("Partition ARI against the true groups", "ari"),
    ("Round from which the partition no longer changes", "settled"),
    ("Diagnostics (FedGD paper Tables 1-2", "diagnostics"),
    ("Efficiency per method", "efficiency"),
)
# Stage 2 summaries (`fedpref summarize` on `fedpref stage2` runs): the judge names the group.
STAGE2_CAPTIONS = (
    (re.compile(r"Win rate \(%\) against the frozen base, judge `(\w+)`"), "win_rate"),
    (re.compile(r"Stage 1 selector test accuracy"), "selector_accuracy"),
    (re.compile(r"Paired difference of the conditional policies' win rates"), "paired_win_rate"),
)
PAIR = re.compile(r"Paired difference (?!against )(.+?) in accuracy points \(")
ACROSS_PAIR = re.compile(r"Paired difference against (.+?)=.+? in accuracy points \(")
ACROSS_HEADING = re.compile(r"Across (\S+): (.*)")
RUNS_LINE = re.compile(r"\d+ run\(s\), seeds ([\d, ]+):")
EFFICIENCY_KINDS = {title: kind for kind, title, _, _ in EFFICIENCY + COST}  # column title -> row kind
DIAGNOSTIC_KEYS = {title: key for key, title in DIAGNOSTIC_COLUMNS.items()}


def number(text: str) -> float | None:
    text = text.strip()
    return None if text in ("", "–") else float(text)


def interval(text: str) -> tuple[float | None, float | None]:
    """'[a, b]' -> (a, b); '–' -> (None, None)."""
    text = text.strip()
    if text in ("", "–"):
        return None, None
    low, high = text.strip("[]").split(",")
    return float(low), float(high)


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def mean_and_interval(text: str) -> tuple[float | None, float | None, float | None]:
    """A diagnostics or efficiency cell, 'mean [lo, hi]', 'mean' or '–'."""
    mean, _, rest = text.strip().partition(" ")
    low, high = interval(rest) if rest else (None, None)
    return number(mean), low, high


def record(
    group: str, kind: str, method: str, step: int | None, unit: str, n: int, mean, std, low, high, seeds, values
):
    return {
        "group": group, "kind": kind, "method": method, "step": step, "unit": unit, "n": n, "mean": mean,
        "std": std, "ci_low": low, "ci_high": high, "seeds": seeds, "values": values,
    }  # fmt: skip


def rows_table(table: list[str], group: str, kind: str, seeds: list[int] | None) -> list[dict]:
    """| method | step | n | mean | std | 95% CI | per seed | (per seed: values, or '(N clients)' for one seed)."""
    rows = []
    for line in table[2:]:
        method, step, n, mean, std, ci, per_seed = cells(line)
        unit = "client" if per_seed.endswith("clients)") else "seed"
        values = [] if unit == "client" else [float(v) for v in per_seed.split(",")]
        # A seed-unit row over every seed of its group names them; otherwise which seeds is not in the Markdown.
        known = seeds if unit == "seed" and seeds is not None and len(seeds) == int(n) else None
        low, high = interval(ci)
        step_value = int(step) if step else None
        rows.append(
            record(group, kind, method, step_value, unit, int(n), number(mean), number(std), low, high, known, values)
        )
    return rows


def stage2_table(table: list[str], group: str, kind: str) -> list[dict]:
    """| method | policy | type | n | mean | std | 95% CI | per seed | with per seed 'seed: value, ...'."""
    rows = []
    for line in table[2:]:
        method, policy, context, n, mean, std, ci, per_seed = cells(line)
        pairs = [item.split(":") for item in per_seed.split(",")]
        low, high = interval(ci)
        rows.append(
            {
                "group": group,
                "kind": kind,
                "method": method,
                "policy": policy,
                "context": context,
                "step": None,
                "unit": "seed",
                "n": int(n),
                "mean": number(mean),
                "std": number(std),
                "ci_low": low,
                "ci_high": high,
                "seeds": [int(s) for s, _ in pairs],
                "values": [float(v) for _, v in pairs],
            }  # fmt: skip
        )
    return rows


def diagnostics_table(table: list[str], group: str) -> list[dict]:
    """| method | n | GQ(l) | ... | with 'mean [lo, hi]' cells; one row per method and quantity."""
    titles = cells(table[0])[2:]
    rows = []
    for line in table[2:]:
        method, n, *texts = cells(line)
        for title, text in zip(titles, texts, strict=True):
            mean, low, high = mean_and_interval(text)
            if mean is not None:
                kind = f"diagnostic:{DIAGNOSTIC_KEYS[title]}"
                rows.append(record(group, kind, method, None, "seed", int(n), mean, None, low, high, None, []))
    return rows


def efficiency_table(table: list[str], group: str) -> list[dict]:
    """| method | bytes down | bytes up | s / round | seeds | and, in summaries with the cost accounting, client /
    server / transport s, peak memory and the parameter counts: each column by its title."""
    titles = cells(table[0])
    rows = []
    for line in table[2:]:
        texts = dict(zip(titles, cells(line), strict=True))
        method, n = texts.pop("method"), texts.pop("seeds")
        for title, text in texts.items():
            kind = EFFICIENCY_KINDS[title]
            mean, low, high = mean_and_interval(text)
            if mean is not None:
                rows.append(record(group, kind, method, None, "seed", int(n), mean, None, low, high, None, []))
    return rows


def convert(markdown: str) -> list[dict]:
    """Every summary row that the Markdown shows (accuracy, ARI, settle round, diagnostics, efficiency, paired and
    across differences; Stage 2 win rates, selector accuracies and paired win rates), in the order shown; the
    selector and per-type tables of Stage 1 runs are not summary rows."""
    lines = markdown.splitlines()
    rows: list[dict] = []
    group, seeds, caption = "", None, None
    i = 0
    while i < len(lines):
        line = lines[i]
        if heading := re.match(r"#+ (.*)", line):
            text = heading.group(1).strip()
            across = ACROSS_HEADING.match(text)
            group, seeds = (across.group(2) if across else text), None
        elif runs := RUNS_LINE.match(line):
            seeds = [int(s) for s in runs.group(1).split(",")]
        elif line.startswith("|"):
            table = []
            while i < len(lines) and lines[i].startswith("|"):
                table.append(lines[i])
                i += 1
            if caption is not None:
                rows += table_rows(table, group, caption, seeds)
            caption = None
            continue
        elif line.strip():
            caption = caption_kind(line)
            if judge := STAGE2_CAPTIONS[0][0].match(line):
                group = f"judge {judge.group(1)}"
        i += 1
    return rows


def caption_kind(line: str) -> str | None:
    for pattern, kind in STAGE2_CAPTIONS:
        if pattern.match(line):
            return f"stage2:{kind}"
    for start, kind in CAPTIONS:
        if line.startswith(start):
            return kind
    if pair := PAIR.match(line):
        return f"pair:{pair.group(1)}"
    if across := ACROSS_PAIR.match(line):
        return f"across:{across.group(1)}"
    return None


def table_rows(table: list[str], group: str, caption: str, seeds: list[int] | None) -> list[dict]:
    if caption.startswith("stage2:"):
        return stage2_table(table, group, caption.removeprefix("stage2:"))
    if caption == "diagnostics":
        return diagnostics_table(table, group)
    if caption == "efficiency":
        return efficiency_table(table, group)
    if caption.startswith("pair:"):  # the method column names the pair, "A - B"
        return rows_table(table, group, "paired_difference", seeds)
    return rows_table(table, group, caption, seeds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("markdown", type=Path, nargs="+", help="summary Markdown files; each X.md gets an X.json")
    args = parser.parse_args(argv)
    for path in args.markdown:
        rows = convert(path.read_text(encoding="utf-8"))
        if not rows:
            print(f"{path}: no summary table (a single run's table?), nothing written", file=sys.stderr)
            continue
        text = json_document(rows, converted_from=path.name)
        path.with_suffix(".json").write_text(text, encoding="utf-8")
        print(f"{path.with_suffix('.json')}: {len(rows)} rows", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
