"""Markdown summary of finished runs: accuracy per method and seed, mean ± std over seeds, FedGD's partition.

.venv/bin/python scripts/summarize_runs.py runs/red_imb_s0 runs/red_imb_s1 runs/red_imb_s2
"""

from __future__ import annotations

import json
import statistics
import sys
import tomllib
from pathlib import Path

from sklearn.metrics import adjusted_rand_score


def load(run: Path) -> tuple[dict, dict]:
    results = json.loads((run / "results.json").read_text())
    config = tomllib.loads((run / "config.toml").read_text())
    return results, config


def true_groups(config: dict) -> dict[str, str]:
    """Synthetic clients are indexed by group in order: c000.. are G1, then G2, ..."""
    ids, k = {}, 0
    for g, size in enumerate(config["data"]["group_sizes"], start=1):
        for _ in range(size):
            ids[f"c{k:03d}"] = f"G{g}"
            k += 1
    return ids


def partition_ari(result: dict, truth: dict[str, str]) -> float | None:
    frozen = [a for a in result.get("assignments", []) if a.get("frozen")]
    if not frozen:
        return None
    found = frozen[-1]["assignment"]
    clients = sorted(found)
    return adjusted_rand_score([truth[c] for c in clients], [found[c] for c in clients])


def main(runs: list[Path]) -> None:
    rows: dict[str, list[dict]] = {}
    for run in runs:
        results, config = load(run)
        for name, r in results["methods"].items():
            c = r["personalization"]
            rows.setdefault(name, []).append(
                {
                    "seed": results["seed"],
                    "steps": c["steps"],
                    "mean": c["acc_mean"],
                    "std": c["acc_std"],
                    "groups": c["by_group"],
                    "ari": partition_ari(r, true_groups(config)),
                }
            )
    steps = next(iter(rows.values()))[0]["steps"]
    print("| method | seeds | " + " | ".join(f"acc^{s} (mean ± std over seeds)" for s in steps) + " | ARI |")
    print("|---|---|" + "---|" * (len(steps) + 1))
    for name, seeds in rows.items():
        cells = []
        for i in range(len(steps)):
            values = [s["mean"][i] for s in seeds]
            spread = statistics.pstdev(values) if len(values) > 1 else 0.0
            cells.append(f"{statistics.fmean(values):.2f} ± {spread:.2f}")
        aris = [s["ari"] for s in seeds if s["ari"] is not None]
        ari = ", ".join(f"{a:.2f}" for a in aris) if aris else "–"
        print(f"| {name} | {', '.join(str(s['seed']) for s in seeds)} | " + " | ".join(cells) + f" | {ari} |")
    print("\nPer group, acc^0 -> acc^last (each seed):\n")
    for name, seeds in rows.items():
        for s in seeds:
            groups = ", ".join(f"{g} {v[0]:.0f}->{v[-1]:.0f}" for g, v in s["groups"].items())
            print(f"- {name} (seed {s['seed']}): {groups}")


if __name__ == "__main__":
    main([Path(p) for p in sys.argv[1:]])
