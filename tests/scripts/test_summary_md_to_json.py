"""scripts/summary_md_to_json.py: Markdown summaries back to `fedpref summarize --json`'s rows, and the committed
docs/results/*.json what it writes from their Markdown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from load_script import ROOT, load_script

from fedpref.reports.summary import summarize, to_json
from fedpref.stage2.seed_summary import stage2_summary

FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture(scope="module")
def converter():
    return load_script("scripts/summary_md_to_json.py")


def test_the_fixtures_markdown_gives_summarizes_rows_to_two_decimals(converter, monkeypatch):
    monkeypatch.chdir(ROOT)
    _, rows = summarize([Path("tests/fixtures/run_tiny_v0")])
    expected = json.loads(to_json(rows))["rows"]
    for r in expected:
        r |= {k: None if r[k] is None else round(r[k], 2) for k in ("mean", "std", "ci_low", "ci_high")}
        r["values"] = [round(v, 2) for v in r["values"]]
    converted = converter.convert((FIXTURES / "run_tiny_v0.summary.md").read_text(encoding="utf-8"))
    assert converted == expected


MARKDOWN = """## Summary of runs

### tiny, train.lr=0.001

2 run(s), seeds 0, 1: `runs/a`, `runs/b`

Paired difference FedGD - FL in accuracy points (one value per client: A - B on the same client):

| method | step | n | mean | std | 95% CI | per seed |
|---|---|---|---|---|---|---|
| FedGD - FL | 10 | 16 | 1.25 | 4.00 | [-0.88, 3.38] | (16 clients) |

Diagnostics (FedGD paper Tables 1-2; `fedpref diagnose`): mean over seeds [95% t-interval]:

| method | n | GQ(l) | GQ_B | GQ_H | m0_R | m0_W | H+_R | P10_R | H+_W | P10_W |
|---|---|---|---|---|---|---|---|---|---|---|
| FL | 2 | 0.10 [0.05, 0.15] | – | – | – | – | – | – | – | 91.5 |

## Across algorithm.num_models: tiny

| method | algorithm.num_models=2 | algorithm.num_models=4 |
|---|---|---|
| FedGD | 90.00 (1) at step 10 | 92.00 (1) at step 10 |

Paired difference against algorithm.num_models=4 in accuracy points (same method, seeds and clients; one value):

| method | step | n | mean | std | 95% CI | per seed |
|---|---|---|---|---|---|---|
| FedGD: algorithm.num_models=2 - algorithm.num_models=4 | 10 | 2 | -2.00 | 1.00 | [-10.98, 6.98] | -1.29, -2.71 |
"""


def test_pairs_diagnostics_and_across_tables(converter):
    rows = converter.convert(MARKDOWN)
    assert [(r["group"], r["kind"], r["method"], r["step"]) for r in rows] == [
        ("tiny, train.lr=0.001", "paired_difference", "FedGD - FL", 10),
        ("tiny, train.lr=0.001", "diagnostic:GQ_mean", "FL", None),
        ("tiny, train.lr=0.001", "diagnostic:P10_W", "FL", None),
        ("tiny", "across:algorithm.num_models", "FedGD: algorithm.num_models=2 - algorithm.num_models=4", 10),
    ]
    pair, gq, p10, across = rows
    assert (pair["unit"], pair["n"], pair["ci_low"], pair["seeds"], pair["values"]) == ("client", 16, -0.88, None, [])
    assert (gq["mean"], gq["ci_low"], gq["ci_high"], gq["n"]) == (0.10, 0.05, 0.15, 2)
    assert (p10["mean"], p10["ci_low"]) == (91.5, None)
    assert (across["unit"], across["values"], across["seeds"]) == ("seed", [-1.29, -2.71], None)  # seeds of a group


def test_committed_json_is_what_the_converter_writes(converter):
    """Each converted docs/results/X.json (not one that `summarize --json` wrote) matches its X.md today."""
    converted = 0
    for path in sorted((ROOT / "docs" / "results").glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        if document.get("converted_from") is None:
            continue
        markdown = path.with_suffix(".md").read_text(encoding="utf-8")
        stale = f"{path.name}: run `python scripts/summary_md_to_json.py docs/results/{path.stem}.md`"
        assert document["rows"] == converter.convert(markdown), stale
        converted += 1
    assert converted >= 25


def stage2_run(path: Path, method: str, seed: int, g1: float, g2: float) -> None:
    """A finished `fedpref stage2` results.json with oracle win rates (G1, G2) and the selector's accuracy."""
    rates = {"oracle": {"G1": {"win_rate": g1}, "G2": {"win_rate": g2}}}
    results = {
        "config": {"name": "t", "seed": seed, "stage1": {"method": method}},
        "task": {"name": "stories", "types": ["G1", "G2"]},
        "stage1": {"by_group": {"G1": {"acc": 90.0 + seed, "base_acc": 50.0}, "G2": {"acc": 80.0, "base_acc": 70.0}}},
        "stage2": {"win_rates": rates},
        "feddpo": {"win_rates": rates},
    }
    path.mkdir(parents=True)
    (path / "results.json").write_text(json.dumps(results), encoding="utf-8")


def test_a_stage2_summary_round_trips(converter, tmp_path):
    """The converter reads a Stage 2 summary's Markdown back into the rows `--json` writes (to two decimals)."""
    for seed, (g1, g2) in enumerate([(60, 50), (70, 30), (80, 40)]):
        stage2_run(tmp_path / "A" / f"seed={seed}", "FedVPA-GP", seed, g1, g2)
        stage2_run(tmp_path / "B" / f"seed={seed}", "FedVPL", seed, 90, 20 + seed / 3)
    markdown, records = stage2_summary([tmp_path], "oracle", [("FedVPA-GP", "FedVPL")])
    assert {r["kind"] for r in records} == {"win_rate", "selector_accuracy", "paired_win_rate"}
    for r in records:
        r |= {k: None if r[k] is None else round(r[k], 2) for k in ("mean", "std", "ci_low", "ci_high")}
        r["values"] = [round(v, 2) for v in r["values"]]
    assert converter.convert(markdown) == records
