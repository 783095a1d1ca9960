"""Paper-style tables of personalization results (Markdown, and rows for the console)."""

from __future__ import annotations


def _at(curves: dict, step: int) -> int | None:
    return curves["steps"].index(step) if step in curves["steps"] else None


def headline_rows(methods: dict) -> tuple[list[str], list[list[str]]]:
    """Table 3 layout: acc^0 (mean), then acc^t as mean ± std at 10 and at the last checkpoint."""
    any_curves = next(iter(methods.values()))["personalization"]
    steps = any_curves["steps"]
    shown = [s for s in dict.fromkeys([10, steps[-1]]) if s in steps and s != 0]
    header = ["method", "acc^0"] + [f"acc^{s}" for s in shown]
    rows = []
    for name, result in methods.items():
        c = result["personalization"]
        row = [name, f"{c['acc_mean'][0]:.2f}"]
        row += [f"{c['acc_mean'][i]:.2f} ± {c['acc_std'][i]:.2f}" for i in (_at(c, s) for s in shown)]
        rows.append(row)
    return header, rows


def group_rows(methods: dict, step: int) -> tuple[list[str], list[list[str]]]:
    """Per-group mean accuracy at one checkpoint (the paper's Figure 2, in numbers)."""
    groups = sorted({g for r in methods.values() for g in r["personalization"]["by_group"]})
    header = ["method"] + [f"{g} acc^{step}" for g in groups]
    rows = []
    for name, result in methods.items():
        c = result["personalization"]
        i = _at(c, step)
        rows.append(
            [name] + [f"{c['by_group'][g][i]:.2f}" if g in c["by_group"] and i is not None else "–" for g in groups]
        )
    return header, rows


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def results_markdown(methods: dict) -> str:
    """Every table of a run, as one Markdown document."""
    steps = next(iter(methods.values()))["personalization"]["steps"]
    parts = ["## Personalized accuracy (mean ± std over clients)\n", markdown(*headline_rows(methods))]
    if any(r["personalization"]["by_group"] for r in methods.values()):
        for step in dict.fromkeys([steps[0], 10 if 10 in steps else steps[-1]]):
            parts += [f"\n## Per-group accuracy at step {step}\n", markdown(*group_rows(methods, step))]
    diagnostics = {name: r["diagnostics"] for name, r in methods.items() if r.get("diagnostics")}
    if diagnostics:
        from fedpref.diagnostics.report import table_rows

        parts += ["\n## Diagnostics (the FedGD paper's Tables 1 and 2)\n", markdown(*table_rows(diagnostics))]
    return "".join(parts)
