"""`fedpref summarize`: statistics checked against hand-computed numbers, on hand-written run folders."""

import csv
import io
import json

import pytest

from fedpref.cli import main
from fedpref.engines.loop import partition_ari

# Per seed, per client accuracy at steps [0, 5]: FL and FedGD on two clients (c000 in G1, c001 in G2).
FL = {
    0: {"c000": [50, 75], "c001": [70, 85]},
    1: {"c000": [60, 80], "c001": [80, 90]},
    2: {"c000": [70, 85], "c001": [90, 95]},
}
FEDGD = {
    0: {"c000": [50, 75], "c001": [72, 85]},
    1: {"c000": [62, 80], "c001": [82, 90]},
    2: {"c000": [72, 86], "c001": [94, 96]},
}
ARI = {0: 1.0, 1: 0.5, 2: 0.0}
# FedGD's reassignments at rounds 0, 2, 4 (and the frozen record at 4, relabelled); the partition settles at
# round 2 on seed 0, 4 on seed 1, 0 on seed 2.
SPLIT, TOGETHER = {"c000": 0, "c001": 1}, {"c000": 1, "c001": 1}
SETTLING = {0: [TOGETHER, SPLIT, SPLIT], 1: [SPLIT, TOGETHER, SPLIT], 2: [SPLIT, SPLIT, SPLIT]}


def fedgd_assignments(seed: int) -> list[dict]:
    records = [{"round": r, "assignment": a} for r, a in zip((0, 2, 4), SETTLING[seed], strict=True)]
    relabelled = {c: 1 - k for c, k in SETTLING[seed][-1].items()}
    return [*records, {"round": 4, "assignment": relabelled, "frozen": True}]


def curves(per_client: dict[str, list[float]]) -> dict:
    columns = list(zip(*per_client.values()))
    return {
        "steps": [0, 5],
        "acc_mean": [sum(c) / len(c) for c in columns],
        "acc_std": [0.0, 0.0],
        "by_group": {"G1": per_client["c000"], "G2": per_client["c001"]},
        "per_client": per_client,
    }


def write_run(folder, seed: int, lr: float = 0.001, finished: bool = True, methods=("FL", "FedGD"), fl=FL) -> None:
    folder.mkdir(parents=True)
    config = f'name = "fx"\nseed = {seed}\n\n[data]\nsource = "synthetic"\ngroup_sizes = [1, 1]\n\n[train]\nlr = {lr}\n'
    config += f"\n[algorithm]\nmethods = {json.dumps(list(methods))}\n"
    (folder / "config.toml").write_text(config)
    results = {"seed": seed, "methods": {}}
    if "FL" in methods:
        results["methods"]["FL"] = {"personalization": curves(fl[seed]), "assignments": []}
    if "FedGD" in methods:
        results["methods"]["FedGD"] = {
            "personalization": curves(FEDGD[seed]),
            "partition_ari": ARI[seed],
            "assignments": fedgd_assignments(seed),
        }
    if finished:
        results["timing"] = {"wall_s": 1.0}
    (folder / "results.json").write_text(json.dumps(results))


@pytest.fixture
def runs(tmp_path):
    for seed in (0, 1, 2):
        write_run(tmp_path / "sweep" / f"seed={seed}", seed)
    write_run(tmp_path / "other", 0, lr=0.01, methods=("FL",))
    write_run(tmp_path / "sweep" / "busy", 1, finished=False)
    return tmp_path


def test_summarize_markdown_and_csv(runs, capsys):
    out_md, out_csv = runs / "summary.md", runs / "summary.csv"
    args = ["summarize", str(runs / "sweep"), str(runs / "other"), "--pair", "FedGD,FL", "--pair", "FL,FedGD"]
    assert main([*args, "--out", str(out_md), "--csv", str(out_csv)]) == 0
    printed = capsys.readouterr().out
    assert printed == out_md.read_text()
    lines = printed.splitlines()
    assert "## fx, train.lr=0.001" in lines and "## fx, train.lr=0.01" in lines
    assert any(line.startswith("Left out 1 unfinished run(s)") and "busy" in line for line in lines)
    # FL acc^0 over seeds: 60, 70, 80 -> mean 70, std 10, 95% CI 70 -/+ 24.84
    assert "| FL | 0 | 3 | 70.00 | 10.00 | [45.16, 94.84] | 60.00, 70.00, 80.00 |" in lines
    # FL acc^5: 80, 85, 90 -> mean 85, std 5, half-width 12.42
    assert "| FL | 5 | 3 | 85.00 | 5.00 | [72.58, 97.42] | 80.00, 85.00, 90.00 |" in lines
    # FedGD acc^0: 61, 72, 83 -> mean 72, std 11, half-width 4.3027 * 11 / sqrt(3) = 27.33
    assert "| FedGD | 0 | 3 | 72.00 | 11.00 | [44.67, 99.33] | 61.00, 72.00, 83.00 |" in lines
    # ARI 1, 0.5, 0 -> mean 0.5, std 0.5, half-width 1.242
    assert "| FedGD |  | 3 | 0.500 | 0.500 | [-0.742, 1.742] | 1.000, 0.500, 0.000 |" in lines
    # FedGD - FL per seed at step 0: 1, 2, 3 -> mean 2, std 1, half-width 2.48; at step 5: 0, 0, 1
    assert "| FedGD - FL | 0 | 3 | 2.00 | 1.00 | [-0.48, 4.48] | 1.00, 2.00, 3.00 |" in lines
    assert "| FedGD - FL | 5 | 3 | 0.33 | 0.58 | [-1.10, 1.77] | 0.00, 0.00, 1.00 |" in lines
    assert "| FL - FedGD | 0 | 3 | -2.00 | 1.00 | [-4.48, 0.48] | -1.00, -2.00, -3.00 |" in lines  # the second --pair
    # settle rounds 2, 4, 0 -> mean 2, std 2, half-width 4.3027 * 2 / sqrt(3) = 4.97
    assert "| FedGD |  | 3 | 2.0 | 2.0 | [-3.0, 7.0] | 2.0, 4.0, 0.0 |" in lines
    assert "| FL | 0 | 1 | 60.00 | – | – | 60.00 |" in lines  # the other group: one seed, no interval
    assert "- FedGD (seed 2): G1 72->86, G2 94->96" in lines
    assert "- FedGD (seed 1): G1 1 | G2 1" in lines  # the final partition by true group
    assert "No seed of this group has both FedGD and FL." in lines

    rows = list(csv.DictReader(io.StringIO(out_csv.read_text())))
    fl0 = next(r for r in rows if r["group"] == "fx, train.lr=0.001" and r["method"] == "FL" and r["step"] == "0")
    assert fl0 | {"ci_low": "", "ci_high": ""} == {
        "group": "fx, train.lr=0.001",
        "kind": "accuracy",
        "method": "FL",
        "step": "0",
        "unit": "seed",
        "n": "3",
        "mean": "70.0",
        "std": "10.0",
        "ci_low": "",
        "ci_high": "",
        "seeds": "0;1;2",
        "values": "60.0;70.0;80.0",
    }
    assert (float(fl0["ci_low"]), float(fl0["ci_high"])) == pytest.approx((45.1583, 94.8417), abs=1e-4)  # 70 -/+ 24.842
    kinds = [(r["kind"], r["method"], r["step"]) for r in rows if r["group"] == "fx, train.lr=0.001"]
    assert ("ari", "FedGD", "") in kinds and ("paired_difference", "FedGD - FL", "5") in kinds
    assert ("settled", "FedGD", "") in kinds
    # accuracy (2 methods x 2 steps), ARI, settle round, 2 pairs x 2 steps, the other group's FL
    assert len(rows) == 4 + 1 + 1 + 4 + 2


def test_summarize_json_has_the_csv_rows(runs, capsys):
    out_json = runs / "summary.json"
    assert main(["summarize", str(runs / "sweep"), "--pair", "FedGD,FL", "--json", str(out_json)]) == 0
    document = json.loads(out_json.read_text())
    assert document["format"] == "fedpref-summary/1"
    pair = next(r for r in document["rows"] if r["method"] == "FedGD - FL" and r["step"] == 0)
    # FedGD - FL per seed at step 0: 1, 2, 3 -> mean 2, std 1, half-width 4.3027 / sqrt(3) = 2.484
    assert {k: pair[k] for k in ("kind", "unit", "n", "mean", "std", "seeds", "values")} == {
        "kind": "paired_difference", "unit": "seed", "n": 3, "mean": 2.0, "std": 1.0, "seeds": [0, 1, 2],
        "values": [1.0, 2.0, 3.0],
    }  # fmt: skip
    assert (pair["ci_low"], pair["ci_high"]) == pytest.approx((-0.4842, 4.4842), abs=1e-4)


def test_summarize_plot_draws_the_bands(runs, monkeypatch):
    """One panel per configuration, a line per method, a band wherever there are two seeds or more."""
    from fedpref.reports import plots

    panels = []
    real = plots.plt.subplots

    def spy(*args, **kwargs):
        fig, axes = real(*args, **kwargs)
        panels.extend(axes[0])
        return fig, axes

    monkeypatch.setattr(plots.plt, "subplots", spy)
    png = runs / "curves.png"
    assert main(["summarize", str(runs / "sweep"), str(runs / "other"), "--plot", str(png)]) == 0
    assert png.stat().st_size > 0 and len(panels) == 2
    sweep, other = sorted(panels, key=lambda ax: ax.get_title())  # "fx, train.lr=0.001" before "...=0.01"
    assert [line.get_label() for line in sweep.get_lines()] == ["FL (n=3)", "FedGD (n=3)"]
    assert list(sweep.get_lines()[0].get_ydata()) == pytest.approx([70.0, 85.0])
    assert len(sweep.collections) == 2 and len(other.collections) == 0  # one seed: no interval, no band


def test_methods_from_separate_sweeps_pair_up_by_seed(tmp_path, capsys):
    for seed in FL:
        write_run(tmp_path / "fl" / f"s{seed}", seed, methods=("FL",))
        write_run(tmp_path / "fedgd" / f"s{seed}", seed, methods=("FedGD",))
    write_run(tmp_path / "fl_again" / "s0", 0, methods=("FL",))  # the same result summarized twice
    assert main(["summarize", str(tmp_path), "--pair", "FedGD,FL"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("## ") for line in lines) == 1  # one configuration, whichever methods each ran
    assert "Left out, as a second copy of a result above: FL (seed 0) in " in "\n".join(lines)
    # the same numbers as with both methods in one run (test_summarize_markdown_and_csv)
    assert "| FL | 0 | 3 | 70.00 | 10.00 | [45.16, 94.84] | 60.00, 70.00, 80.00 |" in lines
    assert "| FedGD - FL | 0 | 3 | 2.00 | 1.00 | [-0.48, 4.48] | 1.00, 2.00, 3.00 |" in lines
    assert "| FedGD - FL | 5 | 3 | 0.33 | 0.58 | [-1.10, 1.77] | 0.00, 0.00, 1.00 |" in lines


def test_summarize_across_a_config_key_by_hand(tmp_path, capsys):
    """FL at lr 0.001 scores FL's numbers, at lr 0.01 FEDGD's: the difference per seed is FedGD - FL above."""
    for seed in FL:
        write_run(tmp_path / "lr_small" / f"s{seed}", seed, methods=("FL",))
        write_run(tmp_path / "lr_large" / f"s{seed}", seed, lr=0.01, methods=("FL",), fl=FEDGD)
    csv_path = tmp_path / "s.csv"
    assert main(["summarize", str(tmp_path), "--across", "train.lr", "--csv", str(csv_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "## Across train.lr: fx" in lines
    assert "| method | train.lr=0.001 | train.lr=0.01 |" in lines
    # acc^5 at lr 0.001: 80, 85, 90 (mean 85, half-width 12.42); at 0.01: 80, 85, 91 -> mean 85.33, std 5.51,
    # half-width 4.3027 * 5.508 / sqrt(3) = 13.68, so [71.65, 99.02]
    assert "| FL | 85.00 [72.58, 97.42] (3) at step 5 | 85.33 [71.65, 99.02] (3) at step 5 |" in lines
    # lr 0.01 - lr 0.001 per seed at step 0: 1, 2, 3; at step 5: 0, 0, 1 (as FedGD - FL)
    assert "| FL: train.lr=0.01 - train.lr=0.001 | 0 | 3 | 2.00 | 1.00 | [-0.48, 4.48] | 1.00, 2.00, 3.00 |" in lines
    assert "| FL: train.lr=0.01 - train.lr=0.001 | 5 | 3 | 0.33 | 0.58 | [-1.10, 1.77] | 0.00, 0.00, 1.00 |" in lines
    rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    assert [(r["kind"], r["step"], r["values"]) for r in rows if r["kind"].startswith("across")] == [
        ("across:train.lr", "0", "1.0;2.0;3.0"),
        ("across:train.lr", "5", "0.0;0.0;1.0"),
    ]
    # the reference named: 1e-3 is 0.001, so this is the default order; 0.01 as reference flips the sign
    assert main(["summarize", str(tmp_path), "--across", "train.lr=1e-3"]) == 0
    assert "| FL: train.lr=0.01 - train.lr=0.001 | 0 | 3 | 2.00 | 1.00 | [-0.48, 4.48] | 1.00, 2.00, 3.00 |" in (
        capsys.readouterr().out.splitlines()
    )
    assert main(["summarize", str(tmp_path), "--across", "train.lr=0.01"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "| FL: train.lr=0.001 - train.lr=0.01 | 0 | 3 | -2.00 | 1.00 | [-4.48, 0.48] | -1.00, -2.00, -3.00 |" in out


def test_summarize_across_errors(tmp_path, capsys):
    for lr in (0.001, 0.01):
        write_run(tmp_path / str(lr), 0, lr=lr, methods=("FL",))
    for arg, message in [
        ("train.lr=0.5", "no configuration has train.lr = 0.5 (values: 0.001, 0.01)"),
        ("train.batch_size", "no two configurations of these runs differ only in train.batch_size"),
        ("seed", "are one configuration already"),
        ("train.lr=", "expected a config key"),
    ]:
        assert main(["summarize", str(tmp_path), "--across", arg]) == 2
        assert message in capsys.readouterr().err


def test_summarize_errors(runs, capsys):
    assert main(["summarize", str(runs / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert main(["summarize", str(runs / "sweep"), "--pair", "FedGD,CL"]) == 2
    assert "no method CL" in capsys.readouterr().err
    assert main(["summarize", str(runs / "sweep"), "--pair", "FedGD"]) == 2
    assert "expected two different method names" in capsys.readouterr().err


def test_a_fedgd_run_records_its_partition_ari(tmp_path, capsys):
    out = tmp_path / "run"
    fast = [
        "federation.rounds=2",
        "train.local_steps=1",
        "personalization.steps=[0,1]",
        "lora.cache_frozen_prefix=false",  # nothing encoded up front: 4x faster for so few steps
        "data.group_sizes=[1,1,1,1]",
        "algorithm.num_models=2",
    ]
    args = ["run", "tiny", "--out", str(out), "--set", "algorithm.methods=['FedGD']"]
    assert main(args + [x for item in fast for x in ("--set", item)]) == 0
    result = json.loads((out / "results.json").read_text())["methods"]["FedGD"]
    frozen = next(a["assignment"] for a in result["assignments"] if a.get("frozen"))
    truth = {f"c{k:03d}": f"G{k + 1}" for k in range(4)}  # one client per group
    assert result["partition_ari"] == partition_ari([{"assignment": frozen, "frozen": True}], truth)
    assert -1.0 <= result["partition_ari"] <= 1.0
    capsys.readouterr()
    assert main(["summarize", str(out)]) == 0
    assert f"| FedGD |  | 1 | {result['partition_ari']:.3f} | – | – |" in capsys.readouterr().out


def write_selector_run(folder, seed: int, g1_acc: float) -> None:
    """A FedVPA-GP run: its selector's per-client accuracies, and FL's acc^0 on the same clients."""
    folder.mkdir(parents=True)
    config = f'name = "vx"\nseed = {seed}\n\n[data]\nsource = "synthetic"\ngroup_sizes = [1, 1]\nunseen_clients = 0\n'
    (folder / "config.toml").write_text(config)
    per_client = {"c000": {"group": "G1", "acc": g1_acc}, "c001": {"group": "G2", "acc": 100.0}}
    selector = {"seen": {"acc_mean": (g1_acc + 100) / 2, "by_group": {}, "per_client": per_client}}
    fl = {"personalization": curves({"c000": [0, 0], "c001": [100, 100]})}
    results = {
        "seed": seed,
        "methods": {"FL": fl, "FedVPA-GP": {"selector": selector, "personalization": fl["personalization"]}},
        "timing": {"wall_s": 1.0},
    }
    (folder / "results.json").write_text(json.dumps(results))


def test_summarize_per_type_interval_over_clients(tmp_path, capsys):
    write_selector_run(tmp_path / "s0", 0, 90.0)
    write_selector_run(tmp_path / "s1", 1, 80.0)
    assert main(["summarize", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "95% t-interval over the clients" in printed
    # G1 over the two (seed, client) units 90, 80: mean 85, std 7.071, half-width 12.7062 * 7.071 / sqrt(2) = 63.53
    assert "| FedVPA-GP | 85.00 [21.47, 148.53] (2) | 100.00 [100.00, 100.00] (2) |" in printed
    assert "| FL | 0.00 [0.00, 0.00] (2) | 100.00 [100.00, 100.00] (2) |" in printed


def test_summarize_latent_separation_over_rounds(tmp_path, capsys):
    """Two G1 clients and one G2 client in 1-D; round 0 holds one type only, so it has no value."""
    for seed, c002 in ((0, 0.0), (1, 1.0)):
        write_selector_run(tmp_path / f"s{seed}", seed, 90.0)
        path = tmp_path / f"s{seed}" / "results.json"
        results = json.loads(path.read_text())
        per_client = results["methods"]["FedVPA-GP"]["selector"]["seen"]["per_client"]
        per_client["c002"] = {"group": "G1", "acc": 90.0}
        trace = [
            {"round": 0, "means": {"c000": [0.0], "c002": [c002]}},
            {"round": 1, "means": {"c001": [4.0]}},
        ]
        results["methods"]["FedVPA-GP"]["selector"]["latent_trace"] = trace
        path.write_text(json.dumps(results))
    out_csv = tmp_path / "summary.csv"
    assert main(["summarize", str(tmp_path), "--csv", str(out_csv)]) == 0
    printed = capsys.readouterr().out
    # Round 1, c001 (G2) alone in its type: s = 0. Seed 0: c000 = c002, a = 0, s = 1 each: 2/3.
    # Seed 1: c000 a = 1, b = 4 -> 3/4; c002 a = 1, b = 3 -> 2/3; (3/4 + 2/3) / 3 = 0.4722.
    # Over seeds: mean 0.5694, std (2/3 - 0.4722) / sqrt 2 = 0.1375.
    assert "| method | r=1 |" in printed
    assert "| FedVPA-GP | 0.57 ± 0.14 (2) |" in printed
    rows = [r for r in csv.DictReader(io.StringIO(out_csv.read_text())) if r["kind"] == "latent_silhouette"]
    assert [(r["method"], r["step"], r["n"]) for r in rows] == [("FedVPA-GP", "1", "2")]


# Per seed, FL's client-averaged diagnostics as `fedpref diagnose` records them; seed 2 has no wrong set (P10_W None).
DIAGNOSTICS = {
    0: {"GQ_mean": 0.1, "GQ_B": 1e-3, "m0_R": 2.0, "P10_W": 50.0},
    1: {"GQ_mean": 0.2, "GQ_B": 2e-3, "m0_R": 3.0, "P10_W": 70.0},
    2: {"GQ_mean": 0.3, "GQ_B": 3e-3, "m0_R": 4.0, "P10_W": None},
}


def test_summarize_diagnostics_over_seeds_by_hand(tmp_path, capsys):
    for seed, diagnostics in DIAGNOSTICS.items():
        write_run(tmp_path / f"s{seed}", seed, methods=("FL",))
        results = json.loads((tmp_path / f"s{seed}" / "results.json").read_text())
        results["methods"]["FL"]["diagnostics"] = diagnostics | {"eta": 3e-4, "GQ_H": None}
        (tmp_path / f"s{seed}" / "results.json").write_text(json.dumps(results))
    out_csv = tmp_path / "summary.csv"
    assert main(["summarize", str(tmp_path), "--csv", str(out_csv)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = "| method | n | GQ(l) | GQ_B | GQ_H | m0_R | m0_W | H+_R | P10_R | H+_W | P10_W |"
    assert header in lines
    # GQ 0.1, 0.2, 0.3: mean 0.2, std 0.1, half-width 4.3027 * 0.1 / sqrt(3) = 0.2484
    # GQ_B 1e-3..3e-3: 2e-3 -/+ 2.484e-3; m0_R 2, 3, 4: 3 -/+ 2.484
    # P10_W 50, 70 (seed 2 has none): mean 60, std 14.142, half-width 12.7062 * 14.142 / sqrt(2) = 127.06
    row = "| FL | 3 | 0.20 [-0.05, 0.45] | 2.00e-03 [-4.84e-04, 4.48e-03] | – | 3.00 [0.52, 5.48] | – | – | – | – |"
    assert row + " 60.00 [-67.06, 187.06] |" in lines
    rows = list(csv.DictReader(io.StringIO(out_csv.read_text())))
    p10w = next(r for r in rows if r["kind"] == "diagnostic:P10_W")
    assert (p10w["method"], p10w["n"], p10w["seeds"], p10w["values"]) == ("FL", "2", "0;1", "50.0;70.0")
    assert {r["kind"] for r in rows if r["kind"].startswith("diagnostic")} == {
        "diagnostic:GQ_mean",
        "diagnostic:GQ_B",
        "diagnostic:m0_R",
        "diagnostic:P10_W",
    }
