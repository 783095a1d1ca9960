"""Controlled experiments on why federated FedVPA-GP ignores z (docs/fedvpa.md, "Diagnosis").

Each variant is `vpa_synthetic` (FedVPA-GP only) at the settings before the fix (`BEFORE_FIX`) with a
few `--set` overrides, run over seeds with
`fedpref sweep` into OUT/<variant>/; `table` reads the finished runs and prints, per variant, the selector's
test accuracy per type with z and from its base logits alone (mean over seeds, 95% t-interval over seeds), and
the mean gradient norm reaching the z path (f and W) and the base reward model in early, middle and late rounds.

.venv/bin/python scripts/vpa_diagnosis.py run --seeds 0,1,2 --out runs/vpa_diag [--only oracle_z,shipped]
.venv/bin/python scripts/vpa_diagnosis.py table runs/vpa_diag
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from scipy import stats

CONFIG = "vpa_synthetic"
ONLY_FEDVPA = 'algorithm.methods=["FedVPA-GP"]'
ORACLE_Z = "vpa_diagnosis.latent_source='oracle'"
TRUE_LABELS = "vpa_diagnosis.assignment='oracle'"
CENTRE = "variational.center_latents=true"
WARMUP = [
    "vpa_diagnosis.latent_warmup_rounds=5",
    "vpa_diagnosis.inference_lr_scale=10",
    "vpa_diagnosis.selector_basis='prototypes'",
]
STANDARDIZED = [CENTRE, "variational.scale_latents=true", "variational.selector_reads='mean'"]
SLOW_BASE = "variational.base_lr_scale=0.1"
# Every variant starts from the settings before the fix (the paper's literal steps, one lr for base and z path),
# so that each row changes only what it names; "shipped" sets the fix, which is now the default.
BEFORE_FIX = [
    "variational.base_lr_scale=1.0",
    "variational.center_latents=false",
    "variational.scale_latents=false",
    "variational.selector_reads='sample'",
]
# name -> (what it tests, overrides); every run is FedVPA-GP on the two-type task at the shipped schedule.
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "before_fix": ("the config before the fix (z inferred, k-means over the last round's participants)", []),
    "shipped": (
        "the shipped fix: the selector reads the centred, scaled posterior mean, the base reward model at 0.1x the lr",
        [*STANDARDIZED, SLOW_BASE],
    ),
    "shipped_sampled": (
        "the shipped fix, but the selector reads the sampled z (Eq. 17)",
        [CENTRE, "variational.scale_latents=true", SLOW_BASE],
    ),
    "shipped_unscaled": (
        "the shipped fix without scale_latents",
        [CENTRE, "variational.selector_reads='mean'", SLOW_BASE],
    ),
    "oracle_z": ("z = the true type's one-hot at radius s: is training the z path at fault?", [ORACLE_Z]),
    "oracle_z_shared": (
        "oracle z plus a component shared by both types (2s on one axis)",
        ["vpa_diagnosis.latent_source='oracle_shared'"],
    ),
    "oracle_z_1": ("oracle z, 1 client a round", [ORACLE_Z, "federation.clients_per_round=1"]),
    "oracle_z_2": ("oracle z, 2 clients a round", [ORACLE_Z, "federation.clients_per_round=2"]),
    "shipped_1": ("before the fix, 1 client a round", ["federation.clients_per_round=1"]),
    "shipped_2": ("before the fix, 2 clients a round", ["federation.clients_per_round=2"]),
    "base_frozen": (
        "base reward model frozen (lr scale 0): does the base crowd z out?",
        ["variational.base_lr_scale=0"],
    ),
    "latent_lr_x10": ("the z path and inference network at 10x the lr", ["vpa_diagnosis.latent_lr_scale=10"]),
    "true_labels": ("prototype labels = true types: is the k-means assignment at fault?", [TRUE_LABELS]),
    "all_clients": ("k-means over every client's latest mean", ["vpa_diagnosis.assignment='all_clients'"]),
    "centred": ("the selector reads z minus the clients' mean latent", [CENTRE]),
    "centred_true_labels": ("centred z and true-type labels", [CENTRE, TRUE_LABELS]),
    "centred_all_clients": ("centred z, k-means over every client", [CENTRE, "vpa_diagnosis.assignment='all_clients'"]),
    "true_labels_mean": (
        "true-type labels, the selector reads the posterior mean (no noise)",
        [TRUE_LABELS, "variational.selector_reads='mean'"],
    ),
    "standardized_true_labels": (
        "true-type labels, the selector reads the centred, scaled posterior mean",
        [TRUE_LABELS, *STANDARDIZED],
    ),
    "standardized": ("the selector reads the centred, scaled posterior mean", STANDARDIZED),
    "standardized_all_clients": (
        "k-means over every client's latest mean, the selector reads the centred, scaled posterior mean",
        ["vpa_diagnosis.assignment='all_clients'", *STANDARDIZED],
    ),
    "standardized_all_clients_slow_base": (
        "as standardized_all_clients, the base reward model at 0.1x the lr (the paper's 1e-4; the z path keeps 1e-3)",
        ["vpa_diagnosis.assignment='all_clients'", *STANDARDIZED, SLOW_BASE],
    ),
    "standardized_all_clients_balanced": (
        "as standardized_all_clients, each round 2 clients of each prototype label",
        ["vpa_diagnosis.assignment='all_clients'", *STANDARDIZED, "variational.sampling='by_prototype'"],
    ),
    "slow_base": ("before the fix, the base reward model at 0.1x the lr", [SLOW_BASE]),
    "oracle_z_slow_base": (
        "oracle z, the base reward model at 0.1x the lr",
        [ORACLE_Z, SLOW_BASE],
    ),
    "standardized_sampled": (
        "the selector reads the centred, scaled sampled z",
        [CENTRE, "variational.scale_latents=true"],
    ),
    "oracle_z_lr3e-4": ("oracle z, local lr 3e-4 (less drift per round)", [ORACLE_Z, "train.lr=3e-4"]),
    "shipped_lr3e-4": ("before the fix, local lr 3e-4", ["train.lr=3e-4"]),
    "frozen_inference_standardized": (
        "inference network frozen at its init (static latents), the selector reads them centred and scaled",
        ["vpa_diagnosis.inference_lr_scale=0", *STANDARDIZED],
    ),
    "oracle_z_balanced": (
        "oracle z, each round 2 clients of each true type (no final-round majority)",
        [ORACLE_Z, "variational.sampling='by_true_type'"],
    ),
    "balanced": ("each round 2 clients of each prototype label", ["variational.sampling='by_prototype'"]),
    "true_labels_balanced": (
        "true-type labels, 2 clients of each type a round",
        [TRUE_LABELS, "variational.sampling='by_true_type'"],
    ),
    "client_context": (
        "training z from all the client's other training pairs (as at test time), not 4 of them",
        ["variational.latent_context='client'"],
    ),
    "client_context_standardized": (
        "client context, the selector reads it centred and scaled",
        ["variational.latent_context='client'", *STANDARDIZED],
    ),
    "prototype_basis": ("f reads z's coordinates along the prototypes", ["vpa_diagnosis.selector_basis='prototypes'"]),
    "prototype_basis_true_labels": (
        "prototype basis, true-type labels",
        [TRUE_LABELS, "vpa_diagnosis.selector_basis='prototypes'"],
    ),
    "prototype_basis_true_labels_fast": (
        "prototype basis, true-type labels, inference network at 10x the lr (latents reach their prototypes early)",
        [TRUE_LABELS, "vpa_diagnosis.selector_basis='prototypes'", "vpa_diagnosis.inference_lr_scale=10"],
    ),
    "oracle_z_from_10": (
        "oracle z withheld (z = 0) for the first 10 rounds: does an early monolithic phase lock the selector in?",
        [ORACLE_Z, "vpa_diagnosis.oracle_from_round=10"],
    ),
    "warmup_true_labels": (
        "5 warm-up rounds of the inference network alone (10x lr), prototype basis, true-type labels",
        [TRUE_LABELS, *WARMUP],
    ),
    "warmup": ("5 warm-up rounds of the inference network alone (10x lr), prototype basis", WARMUP),
    "true_labels_detached": (
        "true-type labels, the selector's loss stops at z",
        [TRUE_LABELS, "vpa_diagnosis.detach_latent=true"],
    ),
}


def run(out: Path, seeds: str, only: list[str]) -> None:
    for name in only or list(VARIANTS):
        _, overrides = VARIANTS[name]
        cmd = [
            str(Path(sys.executable).parent / "fedpref"),
            "sweep",
            CONFIG,
            "--seeds",
            seeds,
            "--out",
            str(out / name),
        ]
        for item in [ONLY_FEDVPA, *BEFORE_FIX, *overrides]:
            cmd += ["--set", item]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)


def mean_ci(values: list[float]) -> str:
    """'mean [lo, hi] (per seed)': the 95% Student-t interval over seeds from 3 seeds on; one seed: the value."""
    m = statistics.fmean(values)
    if len(values) < 2:
        return f"{m:.1f}"
    seeds = "(" + ", ".join(f"{v:.1f}" for v in values) + ")"
    if len(values) < 3:
        return f"{m:.1f} {seeds}"
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    return f"{m:.1f} [{m - half:.1f}, {m + half:.1f}] {seeds}"


def gradient_profile(rounds_file: Path, key: str) -> list[float]:
    """Mean `key` over the first, middle and last third of the rounds."""
    values = [r[key] for r in map(json.loads, rounds_file.read_text().splitlines()) if key in r]
    if not values:
        return []
    third = max(1, len(values) // 3)
    parts = (values[:third], values[third : len(values) - third] or values[:third], values[-third:])
    return [statistics.fmean(p) for p in parts]


def variant_row(name: str, folder: Path) -> str | None:
    results = sorted(folder.glob("**/results.json"))
    if not results:
        return None
    per_seed = []
    for path in results:
        method = json.loads(path.read_text())["methods"]["FedVPA-GP"]
        by_group = method["selector"]["seen"]["by_group"]
        grads = {k: gradient_profile(path.parent / "rounds.jsonl", k) for k in ("grad_latent_path", "grad_base")}
        per_seed.append((by_group, grads))
    groups = sorted(per_seed[0][0])
    # The type the base logits disagree with: per seed, the type whose base-only accuracy is lower.
    weak = [min(groups, key=lambda g: bg[g]["base_acc"]) for bg, _ in per_seed]
    cells = [mean_ci([bg[g]["acc"] for bg, _ in per_seed]) for g in groups]
    cells += [mean_ci([bg[g]["base_acc"] for bg, _ in per_seed]) for g in groups]
    cells.append(mean_ci([bg[w]["acc"] - bg[w]["base_acc"] for (bg, _), w in zip(per_seed, weak)]))
    for key in ("grad_latent_path", "grad_base"):
        profiles = [g[key] for _, g in per_seed if g[key]]
        cells.append(
            " / ".join(f"{statistics.fmean(p[i] for p in profiles):.2f}" for i in range(3)) if profiles else "-"
        )
    seeds = ", ".join(str(json.loads(path.read_text())["seed"]) for path in results)
    return f"| {name} | {VARIANTS.get(name, ('?',))[0]} | {seeds} | " + " | ".join(cells) + " |"


def table(out: Path) -> None:
    print(
        "| variant | what it tests | seeds | G1 acc (z) | G2 acc (z) | G1 base only | G2 base only "
        "| z's gain on the base's weak type | grad z path (early / mid / late) | grad base (early / mid / late) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in VARIANTS:
        row = variant_row(name, out / name)
        if row:
            print(row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run")
    run_p.add_argument("--seeds", default="0,1,2")
    run_p.add_argument("--out", type=Path, required=True)
    run_p.add_argument("--only", default="", help="comma-separated variant names (default: all)")
    table_p = sub.add_parser("table")
    table_p.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        only = [n for n in args.only.split(",") if n]
        unknown = [n for n in only if n not in VARIANTS]
        if unknown:
            parser.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
        run(args.out, args.seeds, only)
    else:
        table(args.out)


if __name__ == "__main__":
    main()
