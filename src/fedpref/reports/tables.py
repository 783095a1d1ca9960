"""Paper-style tables of personalization results (Markdown, and rows for the console)."""

from __future__ import annotations

from collections.abc import Mapping

from fedpref.results import Curves, MethodResult, as_methods

Methods = Mapping[str, MethodResult | Mapping]  # a run's methods, or plain dicts of the same layout


def _at(curves: Curves, step: int) -> int | None:
    return curves.steps.index(step) if step in curves.steps else None


def headline_rows(methods: Methods) -> tuple[list[str], list[list[str]]]:
    """Table 3 layout: acc^0 (mean), then acc^t as mean ± std at 10 and at the last checkpoint."""
    methods = as_methods(methods)
    steps = next(iter(methods.values())).curves.steps
    shown = [s for s in dict.fromkeys([10, steps[-1]]) if s in steps and s != 0]
    header = ["method", "acc^0"] + [f"acc^{s}" for s in shown]
    rows = []
    for name, result in methods.items():
        c = result.curves
        row = [name, f"{c.acc_mean[0]:.2f}"]
        row += [f"{c.acc_mean[i]:.2f} ± {c.acc_std[i]:.2f}" for i in (_at(c, s) for s in shown)]
        rows.append(row)
    return header, rows


def group_rows(methods: Methods, step: int) -> tuple[list[str], list[list[str]]]:
    """Per-group mean accuracy at one checkpoint (the paper's Figure 2, in numbers)."""
    methods = as_methods(methods)
    groups = sorted({g for r in methods.values() for g in r.curves.by_group})
    header = ["method"] + [f"{g} acc^{step}" for g in groups]
    rows = []
    for name, result in methods.items():
        c = result.curves
        i = _at(c, step)
        rows.append([name] + [f"{c.by_group[g][i]:.2f}" if g in c.by_group and i is not None else "–" for g in groups])
    return header, rows


def _num(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def selector_rows(methods: Methods) -> tuple[list[str], list[list[str]]]:
    """Latent-conditioned selectors (the FedVPA-GP paper's Tables 1-2): accuracy with z and without, per type,
    latent separation and collapse indicators; unseen clients when some were held out."""
    shown = {name: r.selector for name, r in as_methods(methods).items() if r.selector}
    groups = sorted({g for s in shown.values() for g in s["seen"]["by_group"]})
    unseen = any("unseen" in s for s in shown.values())
    header = ["method", "acc (z)", "acc (base)"] + [f"{g} acc" for g in groups]
    header += ["silhouette", "probe acc", "KL to N(0,I)", "spread"] + (["unseen acc"] if unseen else [])
    rows = []
    for name, s in shown.items():
        seen = s["seen"]
        row = [name, _num(seen["acc_mean"]), _num(seen["base_acc_mean"])]
        row += [_num(seen["by_group"][g]["acc"]) if g in seen["by_group"] else "–" for g in groups]
        row += [_num(seen["separation"].get("silhouette"), 3), _num(seen["separation"].get("probe_acc"), 1)]
        row += [_num(seen["collapse"]["kl_standard_mean"], 3), _num(seen["collapse"]["mean_spread"], 3)]
        if unseen:
            row.append(_num(s["unseen"]["acc_mean"]) if "unseen" in s else "–")
        rows.append(row)
    return header, rows


def privacy_rows(methods: Methods) -> tuple[list[str], list[list[str]]]:
    """Client-level DP per method: clipping norm C, noise multiplier z, noised releases and (epsilon, delta)."""
    header = ["method", "C", "z", "releases", "amplification", "epsilon", "delta"]
    rows = []
    for name, r in as_methods(methods).items():
        if p := r.privacy:
            rows.append([name, f"{p['clip_norm']:g}", f"{p['noise_multiplier']:g}", str(p["releases"])])
            rows[-1] += [p["amplification"], f"{p['epsilon']:.3g}", f"{p['delta']:g}"]
    return header, rows


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def results_markdown(methods: Methods) -> str:
    """Every table of a run, as one Markdown document."""
    methods = as_methods(methods)
    steps = next(iter(methods.values())).curves.steps
    parts = ["## Personalized accuracy (mean ± std over clients)\n", markdown(*headline_rows(methods))]
    if any(r.curves.by_group for r in methods.values()):
        for step in dict.fromkeys([steps[0], 10 if 10 in steps else steps[-1]]):
            parts += [f"\n## Per-group accuracy at step {step}\n", markdown(*group_rows(methods, step))]
    diagnostics = {name: r.diagnostics for name, r in methods.items() if r.diagnostics}
    if diagnostics:
        from fedpref.diagnostics.report import table_rows

        parts += ["\n## Diagnostics (the FedGD paper's Tables 1 and 2)\n", markdown(*table_rows(diagnostics))]
    if any(r.selector for r in methods.values()):
        title = "\n## Latent-conditioned selectors (seen clients; z from each client's own training pairs)\n"
        parts += [title, markdown(*selector_rows(methods))]
    if any(r.privacy for r in methods.values()):
        parts += ["\n## Client-level differential privacy\n", markdown(*privacy_rows(methods))]
    return "".join(parts)
