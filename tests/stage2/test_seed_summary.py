"""`fedpref stage2-summary` and `fedpref stage2 --seeds` on hand-written results.json files."""

import json
from pathlib import Path

import pytest

from fedpref.cli import main
from fedpref.errors import FedprefError
from fedpref.stage2.seed_summary import by_method, find_stage2_runs, paired_rows, win_rate_rows

# Oracle win rates (G1, G2) per seed 0, 1, 2.
RATES = {"FedVPA-GP": [(60, 50), (70, 30), (80, 40)], "FedVPL": [(90, 20), (90, 10), (90, 30)]}


def _rates(g1: float, g2: float) -> dict:
    return {"oracle": {"G1": {"win_rate": g1}, "G2": {"win_rate": g2}}, "distinct_2": {"base": 0.6, "G1": 0.3}}


def write_run(path: Path, method: str, seed: int, g1: float, g2: float, **config) -> Path:
    base = {"name": "t", "seed": seed, "stage1": {"method": method, "rounds": 20}, "dpo": {"steps": 300}}
    results = {
        "config": base | config,
        "task": {"name": "stories", "types": ["G1", "G2"]},
        "stage1": {"by_group": {"G1": {"acc": 90.0 + seed, "base_acc": 50.0}, "G2": {"acc": 80.0, "base_acc": 70.0}}},
        "stage2": {"win_rates": _rates(g1, g2)},
        "feddpo": {"win_rates": _rates(40, 60)},
    }
    path.mkdir(parents=True)
    (path / "results.json").write_text(json.dumps(results))
    return path


@pytest.fixture
def runs(tmp_path) -> Path:
    for method, per_seed in RATES.items():
        for seed, (g1, g2) in enumerate(per_seed):
            write_run(tmp_path / method / f"seed={seed}", method, seed, g1, g2)
    return tmp_path


def test_win_rates_over_seeds_by_hand(runs):
    rows = {(r.method, r.policy, r.context): r for r in win_rate_rows(by_method(find_stage2_runs([runs])), "oracle")}
    g1 = rows["FedVPA-GP", "conditional DPO", "G1"]  # 60, 70, 80
    assert g1.est.mean == pytest.approx(70.0) and g1.est.std == pytest.approx(10.0)
    low, high = g1.est.interval  # 70 -+ 4.3027 * 10 / sqrt(3)
    assert (low, high) == (pytest.approx(45.1584, abs=1e-4), pytest.approx(94.8416, abs=1e-4))
    worse = rows["FedVPA-GP", "conditional DPO", "worse type"]  # min(G1, G2) per seed: 50, 30, 40
    assert worse.est.values == (50.0, 30.0, 40.0) and worse.seeds == (0, 1, 2)
    assert rows["FedVPL", "conditional DPO", "worse type"].est.mean == pytest.approx(20.0)
    assert rows["FedVPL", "FedDPO", "G2"].est.mean == pytest.approx(60.0)


def test_paired_difference_is_per_seed(runs):
    groups = by_method(find_stage2_runs([runs]))
    rows = {r.context: r for r in paired_rows(groups, "FedVPA-GP", "FedVPL", "oracle")}
    assert rows["worse type"].est.values == (30.0, 20.0, 10.0)  # 50-20, 30-10, 40-30
    assert rows["G1"].est.mean == pytest.approx(-20.0) and rows["G1"].est.std == pytest.approx(10.0)
    with pytest.raises(FedprefError, match="no run of 'FedDPO'"):
        paired_rows(groups, "FedVPA-GP", "FedDPO", "oracle")


def test_markdown_and_cli(runs, tmp_path, capsys):
    out = tmp_path / "summary.md"
    assert main(["stage2-summary", str(runs), "--pair", "FedVPA-GP,FedVPL", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text == out.read_text()
    assert (
        "| FedVPA-GP | conditional DPO | G1 | 3 | 70.00 | 10.00 | [45.16, 94.84] | 0: 60.00, 1: 70.00, 2: 80.00 |"
        in text
    )
    assert "| FedVPA-GP - FedVPL | conditional DPO | worse type | 3 | 20.00 | 10.00 | [-4.84, 44.84] |" in text
    assert "| FedVPA-GP | selector with z | G1 | 3 | 91.00 |" in text  # 90, 91, 92
    assert main(["stage2-summary", str(runs), "--judge", "chat"]) == 2
    assert "no run has win rates by the 'chat' judge (--judge; these runs have: oracle)" in capsys.readouterr().err


def test_runs_that_are_not_one_configuration_are_refused(tmp_path):
    write_run(tmp_path / "a", "FedVPA-GP", 0, 50, 50)
    write_run(tmp_path / "b", "FedVPA-GP", 1, 50, 50, dpo={"steps": 60})
    with pytest.raises(FedprefError, match=r"differs from .* in dpo.steps, not only in its seed"):
        by_method(find_stage2_runs([tmp_path]))
    write_run(tmp_path / "c", "FedVPL", 0, 50, 50)
    write_run(tmp_path / "d", "FedVPL", 0, 50, 50)
    with pytest.raises(FedprefError, match="FedVPL: two runs share a seed"):
        by_method(find_stage2_runs([tmp_path / "c", tmp_path / "d"]))


def test_other_results_files_are_not_stage2_runs(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.json").write_text(json.dumps({"methods": {}}))  # a `fedpref run` folder
    with pytest.raises(FedprefError, match="no finished `fedpref stage2` run"):
        find_stage2_runs([tmp_path])


def test_stage2_seeds_skip_finished_and_rerun_unfinished(tmp_path, monkeypatch, capsys):
    import fedpref.stage2.pipeline as pipeline

    ran = []

    def fake_pipeline(cfg, run_dir, log, resume=False):
        ran.append((cfg.seed, run_dir.name))
        (run_dir / "results.json").write_text("{}")
        (run_dir / "table.md").write_text("table\n")

    monkeypatch.setattr(pipeline, "run_pipeline", fake_pipeline)
    config = Path(__file__).resolve().parents[2] / "src/fedpref/configs/stage2/stories.toml"
    out = tmp_path / "out"
    write_run(out / "seed=0", "FedVPA-GP", 0, 50, 50)  # finished
    (out / "seed=1").mkdir()
    (out / "seed=1" / "stage1_pairs.jsonl").write_text("{}\n")  # interrupted before results.json
    assert main(["stage2", str(config), "--seeds", "0,1,2", "--out", str(out)]) == 0
    assert ran == [(1, "seed=1"), (2, "seed=2")]
    assert "[1/3] seed=0: skipped (finished)" in capsys.readouterr().out  # through `fedpref sweep`
    assert main(["stage2", str(config), "--seeds", "0,0", "--out", str(out)]) == 2


def test_summarize_json_carries_the_rows(runs, tmp_path):
    out = tmp_path / "summary.json"
    assert main(["summarize", str(runs), "--pair", "FedVPA-GP,FedVPL", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    worse = next(r for r in rows if r["kind"] == "paired_win_rate" and r["context"] == "worse type")
    where = (worse["group"], worse["method"], worse["policy"])
    assert where == ("judge oracle", "FedVPA-GP - FedVPL", "conditional DPO")
    assert (worse["values"], worse["seeds"], worse["mean"]) == ([30.0, 20.0, 10.0], [0, 1, 2], 20.0)
    selector = next(r for r in rows if r["kind"] == "selector_accuracy" and r["method"] == "FedVPA-GP")
    found = (selector["policy"], selector["context"], selector["values"])
    assert found == ("selector with z", "G1", [90.0, 91.0, 92.0])  # 90 + seed


def test_stage2_summaries_of_some_seeds_merge_into_the_summary_of_all_of_them(tmp_path):
    for seed, (g1, g2) in enumerate(RATES["FedVPA-GP"]):
        write_run(tmp_path / ("first" if seed == 0 else "rest") / f"seed={seed}", "FedVPA-GP", seed, g1, g2)
    whole, first, merged = (tmp_path / f"{name}.json" for name in ("whole", "first", "merged"))
    assert main(["summarize", str(tmp_path), "--json", str(whole)]) == 0
    assert main(["summarize", str(tmp_path / "first"), "--json", str(first)]) == 0
    assert main(["summarize", str(tmp_path / "rest"), str(first), "--json", str(merged)]) == 0
    expected, got = (json.loads(p.read_text()) for p in (whole, merged))
    assert got["configurations"] == expected["configurations"]
    assert got["configurations"]["judge oracle"]["FedVPA-GP: dpo.steps"] == 300
    key = ("kind", "policy", "context")
    assert sorted((tuple(r[k] for k in key), r["seeds"], r["values"]) for r in got["rows"]) == sorted(
        (tuple(r[k] for k in key), r["seeds"], r["values"]) for r in expected["rows"]
    )
    worse = next(r for r in got["rows"] if r["policy"] == "conditional DPO" and r["context"] == "worse type")
    assert (worse["values"], worse["mean"]) == ([50.0, 30.0, 40.0], 40.0)  # per seed the lower of G1, G2
    assert main(["summarize", str(first), "--csv", str(tmp_path / "x.csv")]) == 2  # no CSV of Stage 2 rows


def test_a_stage2_summary_merges_only_with_the_same_configuration(tmp_path, capsys):
    write_run(tmp_path / "a" / "seed=0", "FedVPA-GP", 0, 60, 50)
    write_run(tmp_path / "b" / "seed=1", "FedVPA-GP", 1, 70, 30, dpo={"steps": 30})
    first = tmp_path / "first.json"
    assert main(["summarize", str(tmp_path / "a"), "--json", str(first)]) == 0
    assert main(["summarize", str(tmp_path / "b"), str(first)]) == 2
    assert "FedVPA-GP: dpo.steps: 30 vs 300" in capsys.readouterr().err.replace("\n", "")


def test_stage2_runs_have_no_csv_or_curves(runs, tmp_path):
    assert main(["summarize", str(runs), "--csv", str(tmp_path / "x.csv")]) == 2
    assert not (tmp_path / "x.csv").exists()
