"""Markdown summary of finished runs: accuracy per method and seed, mean ± std over seeds, FedGD's partition,
and for latent-conditioned methods (FedVPL, FedVPA-GP) the selector's accuracy, separation and collapse.

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
    selector_table([load(run) for run in runs])


def _mean_std(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    spread = statistics.pstdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.2f} ± {spread:.2f}"


def client_groups(results: dict, config: dict) -> dict[str, tuple[str, str]]:
    """client -> (true group, 'seen' or 'unseen'), from any latent-conditioned method's evaluation, else (a
    synthetic run of baselines only, with held-out clients) from the client order and the held-out list."""
    for r in results["methods"].values():
        if r.get("selector"):
            sel = r["selector"]
            kinds = [k for k in ("seen", "unseen") if k in sel]
            return {c: (v["group"], k) for k in kinds for c, v in sel[k]["per_client"].items()}
    unseen = set(results.get("data", {}).get("unseen_clients", []))
    if config["data"]["source"] != "synthetic" or not unseen:  # not a latent-selector experiment
        return {}
    return {c: (g, "unseen" if c in unseen else "seen") for c, g in true_groups(config).items()}


def baseline_entry(result: dict, group_of: dict[str, tuple[str, str]]) -> dict:
    """A monolithic baseline's acc^0 (its reward model, no z) in the selector table's shape."""
    acc0 = {c: curve[0] for c, curve in result["personalization"]["per_client"].items()}
    seen = [c for c in acc0 if group_of[c][1] == "seen"]
    unseen = [c for c in acc0 if group_of[c][1] == "unseen"]
    groups = sorted({group_of[c][0] for c in seen})
    by_group = {g: {"acc": statistics.fmean(acc0[c] for c in seen if group_of[c][0] == g)} for g in groups}
    entry = {"seen": {"acc_mean": statistics.fmean(acc0[c] for c in seen), "by_group": by_group}}
    if unseen:
        entry["unseen"] = {"acc_mean": statistics.fmean(acc0[c] for c in unseen)}
    return entry


def selector_table(runs: list[tuple[dict, dict]]) -> None:
    """Mean ± std over seeds of the selector evaluation (FedVPA-GP paper, Tables 1-2); (results, config) per run."""
    entries: dict[str, list[dict]] = {}
    for results, config in runs:
        for name, r in results["methods"].items():
            if r.get("selector"):
                entries.setdefault(name, []).append(r["selector"])
            elif group_of := client_groups(results, config):
                entries.setdefault(name, []).append(baseline_entry(r, group_of))
    if not entries:
        return
    groups = sorted({g for runs in entries.values() for s in runs for g in s["seen"]["by_group"]})
    header = ["method", "seeds", "acc"] + [f"{g} acc" for g in groups]
    header += ["silhouette", "probe acc", "KL to N(0,I)", "spread", "unseen acc"]
    print("\nSelector (seen clients unless noted; mean ± std over seeds):\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, runs in entries.items():
        seen = [s["seen"] for s in runs]
        cells = [name, str(len(runs)), _mean_std([s["acc_mean"] for s in seen])]
        cells += [_mean_std([s["by_group"].get(g, {}).get("acc") for s in seen]) for g in groups]
        cells += [_mean_std([s.get("separation", {}).get(k) for s in seen]) for k in ("silhouette", "probe_acc")]
        cells += [_mean_std([s.get("collapse", {}).get(k) for s in seen]) for k in ("kl_standard_mean", "mean_spread")]
        cells.append(_mean_std([s["unseen"]["acc_mean"] for s in runs if "unseen" in s]))
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main([Path(p) for p in sys.argv[1:]])
