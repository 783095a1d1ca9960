"""Figures: checked on the matplotlib objects and files drawn from small hand-written results."""

import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba

from fedpref.errors import FedprefError
from fedpref.reports import plots

TRUE_GROUPS = {"c000": "G1", "c001": "G1", "c002": "G2", "c003": "G2"}


def curves(per_client: dict[str, list[float]]) -> dict:
    """A personalization entry as the engines write it, from per-client curves at steps 0, 1, 2."""
    columns = np.array(list(per_client.values()))
    by_group = {
        g: np.mean([per_client[c] for c in per_client if TRUE_GROUPS[c] == g], axis=0).tolist() for g in ("G1", "G2")
    }
    return {
        "steps": [0, 1, 2],
        "acc_mean": columns.mean(axis=0).tolist(),
        "acc_std": columns.std(axis=0).tolist(),
        "by_group": by_group,
        "per_client": per_client,
    }


def selector(kind_of: dict[str, str]) -> dict:
    """Latents of four clients in 3-D, two types apart, with a two-round trace of the seen ones' uploads."""
    rng = np.random.default_rng(0)
    mean = {c: (rng.normal(size=3) + (5 if TRUE_GROUPS[c] == "G2" else 0)).tolist() for c in TRUE_GROUPS}
    out = {
        "latent_trace": [{"round": r, "means": {c: mean[c] for c in kind_of if kind_of[c] == "seen"}} for r in (0, 1)]
    }
    for kind in ("seen", "unseen"):
        out[kind] = {
            "per_client": {c: {"group": TRUE_GROUPS[c], "latent_mean": mean[c]} for c in kind_of if kind_of[c] == kind}
        }
    return out


METHODS = {
    "FL": {
        "personalization": curves(
            {"c000": [90, 100, 100], "c001": [80, 95, 100], "c002": [40, 50, 60], "c003": [20, 30, 50]}
        )
    },
    "FedGD": {
        "personalization": curves(
            {"c000": [70, 80, 90], "c001": [60, 70, 80], "c002": [50, 60, 70], "c003": [40, 50, 60]}
        ),
        "assignments": [
            {"round": 1, "assignment": {"c000": 0, "c001": -1, "c002": 1, "c003": 1}},
            {"round": 3, "assignment": {"c000": 0, "c001": 0, "c002": 1, "c003": 2}},
        ],
    },
    "FedVPA-GP": {
        "personalization": curves(
            {"c000": [60, 60, 60], "c001": [60, 60, 60], "c002": [60, 60, 60], "c003": [60, 60, 60]}
        ),
        "selector": selector({"c000": "seen", "c001": "unseen", "c002": "seen", "c003": "unseen"}),
    },
}


@pytest.fixture
def drawn(monkeypatch):
    """The figures drawn by a call, kept open (save_figure would close them) so their axes can be read."""
    figures = []
    real = plots.plt.close
    monkeypatch.setattr(plots.plt, "close", lambda fig: figures.append(fig))
    yield figures
    for fig in figures:
        real(fig)


@pytest.mark.parametrize("fmt", ["png", "pdf", "svg"])
def test_a_figure_is_written_in_the_chosen_format(tmp_path, fmt):
    magic = {"png": b"\x89PNG", "pdf": b"%PDF", "svg": b"<?xml"}[fmt]
    written = plots.plot_assignments(METHODS, tmp_path / "assignments.png", TRUE_GROUPS, figure_format=fmt)
    assert written == tmp_path / f"assignments.{fmt}" and written.read_bytes().startswith(magic)
    assert [p.name for p in tmp_path.iterdir()] == [written.name]  # the format replaces the suffix, no PNG beside


def test_every_figure_takes_the_format(tmp_path):
    written = [
        plots.plot_group_curves(METHODS, tmp_path / "personalization.png", TRUE_GROUPS, figure_format="svg"),
        plots.plot_latents(METHODS, tmp_path / "latents.png", figure_format="svg"),
    ]
    assert [p.name for p in written] == ["personalization.svg", "latents.svg"]


def test_the_cli_offers_the_formats_plots_writes():
    from fedpref.cli import FIGURE_FORMATS, build_parser

    assert FIGURE_FORMATS == plots.FIGURE_FORMATS
    assert build_parser().parse_args(["run", "c.toml"]).figure_format == "png"
    assert build_parser().parse_args(["run", "c.toml", "--figure-format", "svg"]).figure_format == "svg"
    assert build_parser().parse_args(["summarize", "d", "--plot", "p.png"]).figure_format is None  # by the suffix


def test_the_format_follows_the_suffix_and_an_unknown_one_is_refused(tmp_path):
    assert plots.plot_latents(METHODS, tmp_path / "z.svg").read_bytes().startswith(b"<?xml")
    with pytest.raises(FedprefError, match="png, pdf, svg"):
        plots.plot_latents(METHODS, tmp_path / "z.jpg")


def test_curves_have_std_bands_integer_steps_and_headroom(tmp_path, drawn):
    plots.plot_group_curves(METHODS, tmp_path / "p.png", TRUE_GROUPS)
    axes = drawn[0].axes
    assert [ax.get_title() for ax in axes] == ["all clients", "G1", "G2"]
    for ax in axes:
        assert len([c for c in ax.collections if isinstance(c, PolyCollection)]) == 3  # a band per method
        assert list(ax.get_xticks()) == [0, 1, 2]
        low, high = ax.get_ylim()
        assert low < 0 and high > 100  # FL reaches 100%: its line must not sit on the frame
    g1_fl_band = axes[1].collections[0].get_paths()[0].vertices[:, 1]
    assert g1_fl_band.max() == pytest.approx(100.0) and g1_fl_band.min() == pytest.approx(80.0)  # 85 ± 5, clipped
    labels = [t.get_text() for t in drawn[0].legends[0].get_texts()]
    assert labels == ["FL", "FedGD", "FedVPA-GP", "± 1 std over clients"]


def test_group_panels_without_the_truth_have_no_band(tmp_path, drawn):
    plots.plot_group_curves(METHODS, tmp_path / "p.png")
    all_clients, g1, _ = drawn[0].axes
    assert len(all_clients.collections) == 3 and len(g1.collections) == 0


def test_assignments_unassigned_has_its_own_colour_a_legend_and_group_boundaries(tmp_path, drawn):
    plots.plot_assignments(METHODS, tmp_path / "a.png", TRUE_GROUPS)
    (ax,) = drawn[0].axes
    (image,) = ax.get_images()
    colour = lambda v: image.cmap(image.norm(v))  # noqa: E731
    assert colour(-1) == to_rgba(plots.UNASSIGNED_COLOUR)
    assert colour(-1) not in {colour(g) for g in range(3)} and len({colour(g) for g in range(3)}) == 3
    assert image.get_array()[1, 0] == -1  # c001 unassigned in round 1
    legend = [t.get_text() for t in drawn[0].legends[0].get_texts()]
    assert legend == ["group 0", "group 1", "group 2", "unassigned"]
    boundaries = [line.get_ydata()[0] for line in ax.get_lines()]
    assert boundaries == [1.5]  # between G1 (rows 0-1) and G2 (rows 2-3)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["G1", "G2"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "3"]


def test_no_assignments_or_latents_draws_nothing(tmp_path):
    only_fl = {"FL": METHODS["FL"]}
    assert plots.plot_assignments(only_fl, tmp_path / "a.png") is None
    assert plots.plot_latents(only_fl, tmp_path / "z.png") is None
    assert not list(tmp_path.iterdir())


def test_principal_components_by_hand():
    """Spread 2 along x and 1 along y: x holds 8/10 of the variance (sum of squares 8 vs 2)."""
    xy, share = plots.principal_components(np.array([[2.0, 5.0], [-2.0, 5.0], [0.0, 6.0], [0.0, 4.0]]))
    assert share == pytest.approx([0.8, 0.2])
    assert np.abs(xy) == pytest.approx(np.array([[2, 0], [2, 0], [0, 1], [0, 1]]))


def test_latents_label_the_principal_components_and_every_mark(tmp_path, drawn):
    plots.plot_latents(METHODS, tmp_path / "z.png")
    (ax,) = drawn[0].axes
    assert ax.get_xlabel().startswith("PC1 (") and "% of variance" in ax.get_xlabel()
    assert ax.get_ylabel().startswith("PC2 (")
    legend = [t.get_text() for t in drawn[0].legends[0].get_texts()]
    assert legend == [
        "type G1",
        "type G2",
        "seen client: final z",
        "unseen client: final z",
        "uploaded mean (lighter = earlier)",
    ]


def rate(win_rate: float | None, low: float, high: float) -> dict:
    return {"win_rate": win_rate, "n": 30, "wins": 0, "ties": 0, "losses": 0, "ci95": [low, high]}


STAGE2 = {
    "stage2": {
        "win_rates": {
            "reward_model": {"helpful": rate(46.67, 30.2, 63.8), "harmless": rate(40.0, 24.6, 57.7)},
            "lm": {"helpful": rate(36.67, 21.9, 54.5), "harmless": rate(None, 0.0, 100.0)},
            "distinct_2": {"base": 0.8, "helpful": 0.7, "harmless": 0.75},
            "examples": {"helpful": [["a prompt", "a reply"]]},
        }
    },
    "feddpo": {"win_rates": {"reward_model": {"helpful": rate(60.0, 42.3, 75.4), "harmless": rate(50.0, 33.2, 66.8)}}},
}


def test_win_rates_draw_a_panel_per_judge_a_bar_per_policy_and_type_with_its_interval(tmp_path, drawn):
    assert plots.plot_win_rates(STAGE2, tmp_path / "win_rates.png").is_file()
    axes = drawn[0].axes
    assert [ax.get_title() for ax in axes] == ["judge: reward_model", "judge: lm"]  # distinct_2, examples: no judges
    heights = [[round(b.get_height(), 2) for b in ax.patches] for ax in axes]
    assert heights == [[46.67, 40.0, 60.0, 50.0], [36.67]]  # lm: no FedDPO rates, and a type without a rate is left out
    whiskers = axes[0].collections[0].get_segments()[0]  # conditional DPO, helpful: from its interval's low to high
    assert (round(whiskers[0][1], 2), round(whiskers[1][1], 2)) == (30.2, 63.8)
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["helpful", "harmless"]


def test_win_rates_without_any_draw_nothing(tmp_path):
    assert plots.plot_win_rates({"stage2": {"win_rates": {"distinct_2": {"base": 0.8}}}}, tmp_path / "w.png") is None
    assert list(tmp_path.iterdir()) == []
