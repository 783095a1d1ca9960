"""Pool the per-seed values of `fedpref summarize` Markdown files whose runs are gone; restate their statistics.

Each file's "| method | step | n | mean | std | 95% CI | per seed |" rows (accuracy and paired differences) give one
value per seed; rows with the same method and step are pooled across the files in the order given and summarized
with `fedpref.reports.seed_stats.estimate` (mean, sample std, 95% t-interval), as `fedpref summarize` would have
done over all the runs. Seeds must not repeat across the files (the caller's responsibility: each file's header
names its seeds).

    .venv/bin/python scripts/combine_summaries.py docs/results/reproduce_composed15_noise1.md \
        docs/results/reproduce_composed15_noise1_seeds3_5.md
"""

from __future__ import annotations

import sys
from pathlib import Path

from fedpref.reports.seed_stats import estimate


def per_seed_rows(text: str) -> dict[tuple[str, str], list[float]]:
    """(method, step) -> that row's per-seed values, for rows whose last cell lists numbers."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 7 or not cells[1].isdigit():
            continue
        try:
            rows[(cells[0], cells[1])] = [float(v) for v in cells[6].split(",")]
        except ValueError:  # "(16 clients)": one seed's per-client interval, nothing to pool
            continue
    return rows


def main(paths: list[str]) -> None:
    pooled: dict[tuple[str, str], list[float]] = {}
    for path in paths:
        for key, values in per_seed_rows(Path(path).read_text(encoding="utf-8")).items():
            pooled.setdefault(key, []).extend(values)
    print("| method | step | n | mean | std | 95% CI | per seed |")
    print("|---|---|---|---|---|---|---|")
    for (method, step), values in pooled.items():
        e = estimate(values)
        low, high = e.interval or (float("nan"), float("nan"))
        shown = ", ".join(f"{v:.2f}" for v in values)
        std = f"{e.std:.2f}" if e.std is not None else "–"
        print(f"| {method} | {step} | {e.n} | {e.mean:.2f} | {std} | [{low:.2f}, {high:.2f}] | {shown} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
