"""Figures: personalization curves and assignments (FedGD paper), client latents (FedVPA-GP paper, Figure 3)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_group_curves(methods: dict, path: Path) -> None:
    """One panel per ground-truth group (or one for all clients), accuracy vs local steps, a line per method."""
    groups = sorted({g for r in methods.values() for g in r["personalization"]["by_group"]}) or ["all"]
    fig, axes = plt.subplots(1, len(groups), figsize=(3.2 * len(groups), 3.0), sharey=True, squeeze=False)
    for ax, group in zip(axes[0], groups):
        for name, result in methods.items():
            c = result["personalization"]
            ys = c["acc_mean"] if group == "all" else c["by_group"].get(group)
            if ys:
                ax.plot(c["steps"], ys, marker="o", markersize=3, label=name)
        ax.set_title(group)
        ax.set_xlabel("local steps")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test accuracy (%)")
    axes[0][-1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_assignments(methods: dict, path: Path) -> bool:
    """Client-to-group assignment at every reassignment round, one panel per method (Figures 4 and 6).

    Returns False (and writes nothing) when no method recorded assignments.
    """
    recorded = {name: r["assignments"] for name, r in methods.items() if r.get("assignments")}
    if not recorded:
        return False
    fig, axes = plt.subplots(1, len(recorded), figsize=(4.0 * len(recorded), 4.0), squeeze=False)
    for ax, (name, history) in zip(axes[0], recorded.items()):
        clients = sorted(history[-1]["assignment"])
        grid = [[h["assignment"].get(c, -1) for h in history] for c in clients]  # (clients, reassignments)
        ax.imshow(grid, aspect="auto", cmap="tab10", vmin=0, vmax=9, interpolation="nearest")
        ax.set_xticks(range(len(history)), [str(h["round"]) for h in history], fontsize=7)
        ax.set_xlabel("reassignment round")
        ax.set_ylabel("client (indexed by true group)")
        ax.set_title(f"{name}: assigned group")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def plot_latents(methods: dict, path: Path) -> bool:
    """Client latent means in 2-D (PCA), one panel per latent-conditioned method (FedVPA-GP paper, Figure 3).

    Small dots: the participants' uploaded means over rounds (lighter = earlier); large markers: the final
    z of every client inferred from its training pairs (circles seen, crosses unseen). Colour: true type.
    Returns False (and writes nothing) when no method has latents.
    """
    from sklearn.decomposition import PCA

    shown = {name: r["selector"] for name, r in methods.items() if r.get("selector")}
    if not shown:
        return False
    fig, axes = plt.subplots(1, len(shown), figsize=(4.2 * len(shown), 4.0), squeeze=False)
    for ax, (name, sel) in zip(axes[0], shown.items()):
        finals = {kind: sel[kind]["per_client"] for kind in ("seen", "unseen") if kind in sel}
        group_of = {cid: r["group"] for per in finals.values() for cid, r in per.items()}
        colours = {g: f"C{i}" for i, g in enumerate(sorted({str(g) for g in group_of.values()}))}
        trace = [(t["round"], cid, mu) for t in sel["latent_trace"] for cid, mu in t["means"].items()]
        points = [mu for _, _, mu in trace] + [r["latent_mean"] for per in finals.values() for r in per.values()]
        pca = PCA(n_components=2).fit(np.asarray(points))
        xy = iter(pca.transform(np.asarray(points)))  # (len(points), 2), in the order of `points`
        last = max((r for r, _, _ in trace), default=0) or 1
        for round_idx, cid, _ in trace:
            ax.scatter(*next(xy), s=8, color=colours[str(group_of[cid])], alpha=0.15 + 0.6 * round_idx / last)
        for kind, style in (("seen", {"marker": "o", "edgecolors": "black"}), ("unseen", {"marker": "x"})):
            for r in finals.get(kind, {}).values():
                ax.scatter(*next(xy), s=60, color=colours[str(r["group"])], **style)
        for g, c in colours.items():
            ax.scatter([], [], color=c, label=g)
        ax.set_title(f"{name}: client latents (PCA)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def plot_seed_curves(rows: list, path: Path) -> None:
    """`fedpref summarize --plot`: accuracy vs local steps, a line per method (mean over seeds) with its 95%
    t-interval as a band; one panel per configuration. `rows` are summary.Row of kind 'accuracy'."""
    rows = [r for r in rows if r.kind == "accuracy"]
    groups = list(dict.fromkeys(r.group for r in rows))
    if not groups:
        return
    fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 3.4), sharey=True, squeeze=False)
    for ax, group in zip(axes[0], groups):
        for method in dict.fromkeys(r.method for r in rows if r.group == group):
            mine = sorted((r for r in rows if r.group == group and r.method == method), key=lambda r: r.step)
            steps, means = [r.step for r in mine], [r.est.mean for r in mine]
            (line,) = ax.plot(steps, means, marker="o", markersize=3, label=f"{method} (n={mine[0].est.n})")
            if all(r.est.half_width is not None for r in mine):
                lo = [r.est.mean - r.est.half_width for r in mine]
                hi = [r.est.mean + r.est.half_width for r in mine]
                ax.fill_between(steps, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
        ax.set_title(group, fontsize=9)
        ax.set_xlabel("personalization steps")
        ax.set_xticks(sorted({r.step for r in rows if r.group == group}))
        ax.set_ylim(0, 102)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test accuracy (%)")
    fig.suptitle("mean over seeds, band: 95% t-interval", fontsize=8)
    axes[0][-1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
