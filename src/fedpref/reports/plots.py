"""Figures: curves and assignments (FedGD paper), client latents and Stage 2 win rates (FedVPA-GP paper)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import BoundaryNorm, ListedColormap, to_rgba  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from fedpref.errors import FedprefError  # noqa: E402
from fedpref.reports.tables import Methods  # noqa: E402
from fedpref.results import NOT_JUDGES, STAGE2_POLICIES, Curves, as_curves, as_methods  # noqa: E402

FIGURE_FORMATS = ("png", "pdf", "svg")
ALL_CLIENTS = "all clients"
UNASSIGNED_COLOUR = "#e0e0e0"  # pale grey: outside the group palette, reads as "no group"
# tab10 without its grey (C7), so that no group can be mistaken for "unassigned"; tab20b continues it for large K
PALETTE = [c for i, c in enumerate(plt.get_cmap("tab10").colors) if i != 7] + list(plt.get_cmap("tab20b").colors)
SEEN_STYLE = {"marker": "o", "s": 60, "edgecolors": "black", "linewidths": 0.8, "zorder": 3}
UNSEEN_STYLE = {"marker": "X", "s": 80, "edgecolors": "black", "linewidths": 0.8, "zorder": 4}


def save_figure(fig: plt.Figure, path: Path, figure_format: str | None = None) -> Path:
    """Write `fig` to `path`, its suffix set to `figure_format` when given (else png, pdf or svg by the suffix),
    close it and return the path written."""
    fmt = (figure_format or path.suffix.lstrip(".") or "png").lower()
    if fmt not in FIGURE_FORMATS:
        raise FedprefError(f"figure format {fmt!r}: choose one of {', '.join(FIGURE_FORMATS)}")
    path = path.with_suffix(f".{fmt}")
    path.parent.mkdir(parents=True, exist_ok=True)
    # TrueType fonts in PDF and real text in SVG: publishers' checks accept them and labels stay editable
    with plt.rc_context({"pdf.fonttype": 42, "svg.fonttype": "none"}):
        fig.savefig(path, format=fmt, dpi=150)
    plt.close(fig)
    return path


def accuracy_axis(ax: plt.Axes) -> None:
    """0-100% with headroom at both ends, so a curve at 0% or 100% does not sit on the frame."""
    ax.set_ylim(-4, 104)
    ax.set_yticks(range(0, 101, 20))
    ax.grid(alpha=0.3)


def step_axis(ax: plt.Axes, steps: list[int]) -> None:
    """Ticks on the evaluated steps while they are few, else on integers only (steps are whole numbers)."""
    if len(set(steps)) <= 12:
        ax.set_xticks(sorted(set(steps)))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("personalization steps")


def method_colours(names: list[str]) -> dict[str, tuple]:
    """A fixed colour per method across panels; tab20 past ten methods, where tab10 would repeat."""
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    return {name: cmap(i % cmap.N) for i, name in enumerate(names)}


def band(ax: plt.Axes, steps: list[int], mean: list[float], spread: list[float], colour) -> None:
    """mean ± spread as a shaded band (an error bar at a single step, where a band has no width), clipped to
    0-100 because accuracy cannot leave that range."""
    lo = np.clip(np.subtract(mean, spread), 0, 100)
    hi = np.clip(np.add(mean, spread), 0, 100)
    if len(steps) == 1:
        yerr = [np.subtract(mean, lo), np.subtract(hi, mean)]
        ax.errorbar(steps, mean, yerr=yerr, color=colour, alpha=0.5, capsize=4, linestyle="")
    else:
        ax.fill_between(steps, lo, hi, color=colour, alpha=0.12, linewidth=0)


def panel_curve(
    curves: Curves | dict, panel: str, true_groups: dict[str, str] | None
) -> tuple[list | None, list | None]:
    """(mean, std) of one panel: all clients (stored acc_std), or one true group, whose std comes from its
    clients' curves and so needs `true_groups`; std is None where unknown."""
    curves = as_curves(curves)
    if panel == ALL_CLIENTS:
        return curves.acc_mean, curves.acc_std or None
    mean = curves.by_group.get(panel)
    members = [v for c, v in curves.per_client.items() if (true_groups or {}).get(c) == panel]
    return mean, (np.std(members, axis=0).tolist() if mean and members else None)  # population std, as acc_std


def plot_group_curves(
    methods: Methods, path: Path, true_groups: dict[str, str] | None = None, figure_format: str | None = None
) -> Path:
    """Accuracy vs personalization steps, a line per method (mean over clients) with a ± 1 std band: one panel
    for all clients, then one per true group (the FedGD paper's Figures 2-3). `true_groups` maps client ->
    group, for the groups' bands."""
    methods = as_methods(methods)
    groups = sorted({g for r in methods.values() for g in r.curves.by_group})
    panels = [ALL_CLIENTS, *groups]
    colours = method_colours(list(methods))
    fig, axes = plt.subplots(
        1, len(panels), figsize=(2.9 * len(panels), 3.4), sharey=True, squeeze=False, layout="constrained"
    )
    for ax, panel in zip(axes[0], panels):
        for name, result in methods.items():
            curves = result.curves
            mean, std = panel_curve(curves, panel, true_groups)
            if mean:
                ax.plot(curves.steps, mean, marker="o", markersize=3, color=colours[name], label=name)
            if mean and std:
                band(ax, curves.steps, mean, std, colours[name])
        ax.set_title(panel, fontsize=9)
        step_axis(ax, [s for r in methods.values() for s in r.curves.steps])
        accuracy_axis(ax)
    axes[0][0].set_ylabel("test accuracy (%)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    handles.append(Patch(color="grey", alpha=0.25, label="± 1 std over clients"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 7), fontsize=8, frameon=False)
    return save_figure(fig, path, figure_format)


def assignment_colours(histories: list[list[dict]]) -> tuple[ListedColormap, BoundaryNorm, int]:
    """Colour map and norm for assignments: -1 (unassigned) pale grey, group g its own palette colour."""
    k = 1 + max((g for h in histories for step in h for g in step["assignment"].values()), default=0)
    cmap = ListedColormap([UNASSIGNED_COLOUR, *(PALETTE[g % len(PALETTE)] for g in range(k))])
    return cmap, BoundaryNorm(np.arange(-1.5, k), cmap.N), k  # bin edges -1.5, -0.5, ..., k - 0.5


def round_ticks(ax: plt.Axes, rounds: list[int]) -> None:
    """Columns labelled by their round, thinned to about 15 labels so they stay readable."""
    every = max(1, -(-len(rounds) // 15))
    ax.set_xticks(range(0, len(rounds), every), [str(r) for r in rounds[::every]], fontsize=7)
    ax.set_xlabel("reassignment round")


def true_group_blocks(ax: plt.Axes, clients: list[str], true_groups: dict[str, str] | None) -> None:
    """Lines between the true groups and their names on the y axis, so clients placed with another group's
    expert stand out; plain client indices when the truth is unknown."""
    if not true_groups:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("client")
        return
    labels = [str(true_groups.get(c) or "?") for c in clients]  # "?": a client of mixed or unknown group
    starts = [i for i, g in enumerate(labels) if i == 0 or g != labels[i - 1]]
    for start in starts[1:]:
        ax.axhline(start - 0.5, color="black", linewidth=1.5)
    ax.set_yticks(range(len(clients)), minor=True)  # one minor tick per client, for counting rows
    ends = [*starts[1:], len(labels)]
    ax.set_yticks([(s + e - 1) / 2 for s, e in zip(starts, ends)], [labels[s] for s in starts])
    ax.set_ylabel("client, by true group")


def plot_assignments(
    methods: Methods, path: Path, true_groups: dict[str, str] | None = None, figure_format: str | None = None
) -> Path | None:
    """Client-to-group assignment at every reassignment round, one panel per method (Figures 4 and 6), with the
    true groups (`true_groups`: client -> group) marked on the y axis.

    Returns None (and writes nothing) when no method recorded assignments.
    """
    recorded = {name: r.assignments for name, r in as_methods(methods).items() if r.assignments}
    if not recorded:
        return None
    cmap, norm, k = assignment_colours(list(recorded.values()))
    fig, axes = plt.subplots(
        1, len(recorded), figsize=(3.6 * len(recorded) + 1.2, 4.0), squeeze=False, layout="constrained"
    )
    for ax, (name, history) in zip(axes[0], recorded.items()):
        clients = sorted({c for step in history for c in step["assignment"]})
        clients.sort(key=lambda c: str((true_groups or {}).get(c) or ""))  # stable: by true group, then by id
        grid = [[step["assignment"].get(c, -1) for step in history] for c in clients]  # (clients, reassignments)
        ax.imshow(grid, aspect="auto", cmap=cmap, norm=norm, interpolation="nearest")
        round_ticks(ax, [step["round"] for step in history])
        true_group_blocks(ax, clients, true_groups)
        ax.set_title(f"{name}: assigned group", fontsize=9)
    handles = [Patch(facecolor=cmap(g + 1), label=f"group {g}") for g in range(k)]
    handles.append(Patch(facecolor=UNASSIGNED_COLOUR, edgecolor="grey", label="unassigned"))
    fig.legend(handles=handles, loc="outside right upper", fontsize=8, title="assigned", title_fontsize=8)
    return save_figure(fig, path, figure_format)


def principal_components(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`points` on their first two principal components, and each component's share of the variance.

    PCA by SVD of the centred points (what scikit-learn's PCA computes), without its 3 s import."""
    centred = points - points.mean(axis=0)
    _, singular, axes = np.linalg.svd(centred, full_matrices=False)
    variance = singular**2
    xy = np.pad(centred @ axes[:2].T, ((0, 0), (0, max(0, 2 - len(axes)))))  # 2 columns even from 1-D latents
    share = np.pad(variance[:2] / (variance.sum() or 1.0), (0, max(0, 2 - len(variance))))
    return xy, share


def latent_panel(ax: plt.Axes, sel: dict, colours: dict[str, str]) -> None:
    """One method's latents on its first two principal components, each axis with its share of variance."""
    per_kind = {kind: sel[kind]["per_client"] for kind in ("seen", "unseen") if kind in sel}
    group_of = {cid: str(r["group"]) for per in per_kind.values() for cid, r in per.items()}
    finals = [(kind, group_of[cid], r["latent_mean"]) for kind, per in per_kind.items() for cid, r in per.items()]
    trace = [(t["round"], cid, mu) for t in sel.get("latent_trace", []) for cid, mu in t["means"].items()]
    points = np.asarray([mu for _, _, mu in trace] + [mu for _, _, mu in finals])
    xy, share = principal_components(points)  # rows in the order of `points`: the trace, then the final means
    last = max((r for r, _, _ in trace), default=0) or 1
    if trace:  # lighter = earlier round, so the drift over training reads at a glance
        shades = [to_rgba(colours.get(group_of.get(cid), "grey"), 0.15 + 0.6 * r / last) for r, cid, _ in trace]
        ax.scatter(xy[: len(trace), 0], xy[: len(trace), 1], s=8, c=shades, linewidths=0)
    final_xy = xy[len(trace) :]
    for kind, style in (("seen", SEEN_STYLE), ("unseen", UNSEEN_STYLE)):
        rows = [i for i, (k, _, _) in enumerate(finals) if k == kind]
        if rows:
            ax.scatter(final_xy[rows, 0], final_xy[rows, 1], c=[colours[finals[i][1]] for i in rows], **style)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # latent coordinates are small decimals: fewer, apart
    ax.set_xlabel(f"PC1 ({share[0]:.0%} of variance)")
    ax.set_ylabel(f"PC2 ({share[1]:.0%} of variance)")


def latent_legend(colours: dict[str, str], kinds: set[str], traced: bool) -> list:
    """Every mark on the latent plots: true types by colour, final z by marker, the per-round trace."""
    handles = [Patch(color=c, label=f"type {g}") for g, c in colours.items()]
    marker = {"linestyle": "", "markerfacecolor": "white", "markeredgecolor": "black"}
    if "seen" in kinds:
        handles.append(Line2D([], [], marker="o", markersize=8, label="seen client: final z", **marker))
    if "unseen" in kinds:
        handles.append(Line2D([], [], marker="X", markersize=9, label="unseen client: final z", **marker))
    if traced:
        handles.append(
            Line2D([], [], marker=".", linestyle="", color="grey", label="uploaded mean (lighter = earlier)")
        )
    return handles


def plot_latents(methods: Methods, path: Path, figure_format: str | None = None) -> Path | None:
    """Client latent means in 2-D (PCA), one panel per latent-conditioned method (FedVPA-GP paper, Figure 3).

    Small dots: the participants' uploaded means over rounds (lighter = earlier); large markers: the final
    z of every client inferred from its training pairs (circles seen, crosses unseen). Colour: true type.
    Returns None (and writes nothing) when no method has latents.
    """
    shown = {name: r.selector for name, r in as_methods(methods).items() if r.selector}
    if not shown:
        return None
    kinds = {k for sel in shown.values() for k in ("seen", "unseen") if k in sel}
    groups = sorted(
        {str(r["group"]) for sel in shown.values() for k in kinds & sel.keys() for r in sel[k]["per_client"].values()}
    )
    colours = {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(groups)}  # the same type, the same colour everywhere
    fig, axes = plt.subplots(1, len(shown), figsize=(4.2 * len(shown), 4.4), squeeze=False, layout="constrained")
    for ax, (name, sel) in zip(axes[0], shown.items()):
        latent_panel(ax, sel, colours)
        ax.set_title(f"{name}: client latents", fontsize=9)
    traced = any(sel.get("latent_trace") for sel in shown.values())
    handles = latent_legend(colours, kinds, traced)
    columns = min(len(handles), 2 * len(shown))  # a one-panel figure is too narrow for one row of four
    fig.legend(handles=handles, loc="outside lower center", ncol=columns, fontsize=8, frameon=False)
    return save_figure(fig, path, figure_format)


def plot_seed_curves(rows: list, path: Path, figure_format: str | None = None) -> Path | None:
    """`fedpref summarize --plot`: accuracy vs personalization steps, a line per method (mean over seeds) with
    its 95% t-interval as a band; one panel per configuration. `rows` are summary.Row of kind 'accuracy'.
    Returns the path written, None when there is nothing to draw."""
    rows = [r for r in rows if r.kind == "accuracy"]
    groups = list(dict.fromkeys(r.group for r in rows))
    if not groups:
        return None
    fig, axes = plt.subplots(
        1, len(groups), figsize=(4.2 * len(groups), 3.6), sharey=True, squeeze=False, layout="constrained"
    )
    colours = method_colours(list(dict.fromkeys(r.method for r in rows)))
    for ax, group in zip(axes[0], groups):
        for method in dict.fromkeys(r.method for r in rows if r.group == group):
            mine = sorted((r for r in rows if r.group == group and r.method == method), key=lambda r: r.step)
            steps, means = [r.step for r in mine], [r.est.mean for r in mine]
            ax.plot(
                steps, means, marker="o", markersize=3, color=colours[method], label=f"{method} (n={mine[0].est.n})"
            )
            if all(r.est.half_width is not None for r in mine):
                band(ax, steps, means, [r.est.half_width for r in mine], colours[method])
        ax.set_title("\n".join(textwrap.wrap(group, 40)), fontsize=9)  # long run-folder labels: wrap
        step_axis(ax, [r.step for r in rows if r.group == group])
        accuracy_axis(ax)
        ax.legend(fontsize=8, loc="lower right")  # per panel: n (seeds) can differ between configurations
    axes[0][0].set_ylabel("test accuracy (%)")
    fig.suptitle("mean over seeds, band: 95% t-interval", fontsize=8)
    return save_figure(fig, path, figure_format)


def plot_win_rates(results: dict, path: Path, figure_format: str | None = None) -> Path | None:
    """One Stage 2 run's win rates against the frozen base (FedVPA-GP paper, Table 1's metric): one panel per
    judge, a bar per policy and type with its 95% Wilson interval, 50% (no better than the base) dashed.
    `results`: the run's results.json as a dict. Returns None (and writes nothing) when it has no win rates."""
    rates = {key: (results.get(key) or {}).get("win_rates") or {} for key, _ in STAGE2_POLICIES}
    judges = list(dict.fromkeys(j for by in rates.values() for j in by if j not in NOT_JUDGES))
    if not judges:
        return None
    fig, axes = plt.subplots(1, len(judges), figsize=(3.6 * len(judges), 3.4), squeeze=False, layout="constrained")
    width = 0.8 / len(STAGE2_POLICIES)
    for ax, judge in zip(axes[0], judges):
        types = list(dict.fromkeys(t for by in rates.values() for t in by.get(judge, {})))
        for i, (key, label) in enumerate(STAGE2_POLICIES):
            by_type = rates[key].get(judge, {})
            shown = [t for t in types if by_type.get(t, {}).get("win_rate") is not None]
            if not shown:
                continue
            x = np.array([types.index(t) for t in shown]) + (i - (len(STAGE2_POLICIES) - 1) / 2) * width
            mean = np.array([by_type[t]["win_rate"] for t in shown], dtype=float)
            low, high = (np.array([by_type[t]["ci95"][j] for t in shown], dtype=float) for j in (0, 1))
            ax.bar(x, mean, width, color=PALETTE[i], label=label)
            ax.errorbar(x, mean, yerr=[mean - low, high - mean], fmt="none", ecolor="black", capsize=3, lw=0.8)
        ax.axhline(50.0, color="grey", ls="--", lw=0.8)
        ax.set_xticks(range(len(types)), types)
        ax.set_xlim(-0.5, len(types) - 0.5)
        ax.set_ylim(0, 100)
        ax.set_title(f"judge: {judge}", fontsize=9)
    axes[0][0].set_ylabel("win rate against the base (%)")
    axes[0][0].legend(fontsize=8, loc="upper left")
    fig.suptitle("bars: win rate (ties count half); whiskers: 95% Wilson interval", fontsize=8)
    return save_figure(fig, path, figure_format)
