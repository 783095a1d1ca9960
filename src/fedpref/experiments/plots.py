"""Figures: group-wise personalization curves (the FedGD paper's Figures 2 and 3)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

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
