"""fedpref.claims: the rules on hand-made readings and summaries, every claim's quantity in the committed summaries,
and the generated results page, README table and research-notes verdicts current."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from fedpref import claims as C
from fedpref.claims import DOES_NOT_HOLD, HOLDS, INDICATIVE, MIXED, NO_SUMMARY, NOT_RUN, Reading, decide
from fedpref.cli import build_parser, main
from fedpref.errors import FedprefError

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"


def r(mean: float, low: float | None, high: float | None, seeds: int = 3) -> Reading:
    return Reading(mean, low, high, seeds)


def test_greater_and_less():
    assert decide("greater", r(1.5, 0.5, 2.5)) == HOLDS
    assert decide("greater", r(1.0, -1.0, 3.0)) == MIXED
    assert decide("greater", r(-0.5, -2.0, 1.0)) == DOES_NOT_HOLD
    assert decide("greater", r(0.0, -1.0, 1.0)) == DOES_NOT_HOLD  # no effect is not "beats"
    assert decide("greater", r(95.0, 91.0, 99.0), value=90.0) == HOLDS  # "above 90%"
    assert decide("less", r(-1.5, -2.5, -0.5)) == HOLDS
    assert decide("less", r(-1.0, -3.0, 1.0)) == MIXED
    assert decide("less", r(0.5, -1.0, 2.0)) == DOES_NOT_HOLD


def test_against_another_row_needs_disjoint_intervals():
    other = r(10.0, 8.0, 12.0)
    assert decide("greater", r(14.0, 12.5, 15.5), than=other) == HOLDS
    assert decide("greater", r(13.0, 11.0, 15.0), than=other) == MIXED  # overlapping intervals
    assert decide("greater", r(9.0, 7.0, 11.0), than=other) == DOES_NOT_HOLD
    assert decide("less", r(6.0, 5.0, 7.5), than=other) == HOLDS
    assert decide("greater", r(14.0, 12.5, 15.5), than=r(10.0, None, None, 1)) == INDICATIVE


def test_near_and_at_least_with_the_tolerance():
    assert decide("near", r(0.5, -1.0, 1.5), tolerance=2.0) == HOLDS
    assert decide("near", r(0.5, -3.0, 4.0), tolerance=2.0) == MIXED
    assert decide("near", r(3.0, 2.5, 3.5), tolerance=2.0) == DOES_NOT_HOLD
    assert decide("near", r(0.97, 0.96, 0.99), value=1.0, tolerance=0.05) == HOLDS  # ARI
    assert decide("at_least", r(-1.0, -1.5, -0.5), tolerance=2.0) == HOLDS
    assert decide("at_least", r(-1.0, -5.0, 3.0), tolerance=2.0) == MIXED
    assert decide("at_least", r(-3.0, -4.0, -2.5), tolerance=2.0) == DOES_NOT_HOLD


def test_one_seed_is_indicative_whatever_it_shows():
    assert decide("greater", r(20.0, 15.0, 25.0, seeds=1)) == INDICATIVE  # a CI over clients of one run
    assert decide("near", r(0.0, None, None, seeds=1), tolerance=2.0) == INDICATIVE
    with pytest.raises(FedprefError, match="unknown rule"):
        decide("beats", r(1.0, 0.5, 1.5))


def test_combine():
    assert C.combine([HOLDS, HOLDS]) == HOLDS
    assert C.combine([HOLDS, DOES_NOT_HOLD]) == MIXED
    assert C.combine([HOLDS, INDICATIVE]) == INDICATIVE
    assert C.combine([DOES_NOT_HOLD, NO_SUMMARY]) == DOES_NOT_HOLD
    assert C.combine([NO_SUMMARY]) == NO_SUMMARY


TOY_CLAIMS = """
[[claim]]
id = "T1"
paper = "FedGD"
source = "Table 3"
statement = "A beats B"
paper_number = "90 vs 80"
command = "make toy"
summary = "toy"
group = "g"
checks = [{ rule = "greater", method = "A - B", step = 10 }]

[[claim]]
id = "T2"
paper = "FedGD"
source = "Table 3"
statement = "A gains from personalization"
paper_number = "60 -> 70"
command = "make toy"
summary = "toy"
group = "g"
checks = [{ rule = "greater", method = "A", from_step = 0, step = 10 }]

[[claim]]
id = "T3"
paper = "FedGD"
source = "Table 4"
statement = "on a model we do not have"
paper_number = "1"
command = "-"
status = "not run"
"""


def row(kind: str, method: str, step: int | None, mean: float, low, high, values: list[float], seeds=(0, 1, 2)):
    numbers = {"mean": mean, "std": None, "ci_low": low, "ci_high": high}
    where = {"group": "g", "kind": kind, "method": method, "step": step, "unit": "seed", "n": len(values)}
    return where | numbers | {"seeds": list(seeds), "values": values}


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    rows = [
        row("paired_difference", "A - B", 10, 3.0, 1.0, 5.0, [2.0, 3.0, 4.0]),
        row("accuracy", "A", 0, 61.0, 58.5, 63.5, [60.0, 62.0, 61.0]),
        row("accuracy", "A", 10, 71.33, 67.5, 75.2, [70.0, 71.0, 73.0]),
    ]
    path = tmp_path / "toy.json"
    path.write_text(json.dumps({"format": "fedpref-summary/1", "rows": rows}), encoding="utf-8")
    return path


def test_claims_decided_on_toy_summaries(toy):
    decisions = {d.claim.id: d for d in C.decide_all(C.load_summaries([toy]), C.load_claims(TOY_CLAIMS))}
    assert decisions["T1"].verdict == HOLDS
    change = decisions["T2"].outcomes[0].reading  # per seed 10, 9, 12: mean 10.33, std 1.53, t(2) 4.303
    assert (round(change.mean, 2), round(change.low, 2), round(change.high, 2)) == (10.33, 6.54, 14.13)
    assert decisions["T2"].verdict == HOLDS
    assert decisions["T3"].verdict == NOT_RUN and decisions["T3"].outcomes == []


def test_a_change_over_steps_pairs_only_the_same_seeds(tmp_path):
    rows = [
        row("accuracy", "A", 0, 61.0, 58.5, 63.5, [60.0, 62.0, 61.0]),
        row("accuracy", "A", 10, 71.33, 67.5, 75.2, [70.0, 71.0, 73.0], seeds=(0, 1, 3)),
    ]
    path = tmp_path / "toy.json"
    path.write_text(json.dumps({"format": "fedpref-summary/1", "rows": rows}), encoding="utf-8")
    q = C.Quantity("toy", "g", "A", step=10, from_step=0)
    assert C.read(C.load_summaries([path]), q) is None


def test_a_silhouette_difference_pairs_the_seeds_both_methods_hold(tmp_path):
    rows = [
        row("latent_silhouette", "A", 9, 0.4, None, None, [0.5, 0.4, 0.3], seeds=(0, 1, 2)),
        row("latent_silhouette", "B", 9, 0.1, None, None, [0.1, 0.2, 0.0], seeds=(1, 2, 3)),
    ]
    path = tmp_path / "toy.json"
    path.write_text(json.dumps({"format": "fedpref-summary/1", "rows": rows}), encoding="utf-8")
    q = C.Quantity("toy", "g", "A - B", step=9, kind="latent_silhouette")
    x = C.read(C.load_summaries([path]), q)  # seeds 1, 2: 0.4 - 0.1, 0.3 - 0.2; std 0.1414, t(1) 12.706
    assert (x.seeds, round(x.mean, 4), round(x.low, 4), round(x.high, 4)) == (2, 0.2, -1.0706, 1.4706)
    assert q.label() == "latent_silhouette A - B after round 9" and q.unit == "silhouette"
    assert C.decide("greater", x) == C.MIXED
    lone = C.Quantity("toy", "g", "A - C", step=9, kind="latent_silhouette")
    assert C.read(C.load_summaries([path]), lone) is None


def test_a_users_summaries_match_by_method_and_step_under_any_name(tmp_path, toy):
    mine = tmp_path / "my_gpu_rerun.json"
    document = json.loads(toy.read_text(encoding="utf-8"))
    for x in document["rows"]:
        x["group"] = 'my config, model.backbone="qwen2"'
    mine.write_text(json.dumps(document), encoding="utf-8")
    summaries = C.load_summaries([mine])
    toy_claims = C.load_claims(TOY_CLAIMS)
    assert [d.claim.id for d in C.decide_all(summaries, toy_claims, strict=False)] == ["T1", "T2"]
    assert C.decide_all(summaries, toy_claims)[0].verdict == NO_SUMMARY  # strict: its own file and group only


def test_llm_checks_give_a_verdict_of_their_own_on_the_committed_summaries(toy):
    llm = """
llm_summary = "toy"
llm_group = "g"
llm_checks = [{ rule = "less", method = "A - B", step = 10 }]
"""
    claims = C.load_claims(TOY_CLAIMS.replace('command = "-"\n', 'command = "-"\n' + llm, 1))
    t3 = C.decide_all(C.load_summaries([toy]), claims)[2]
    assert (t3.verdict, t3.llm_verdict) == (NOT_RUN, C.DOES_NOT_HOLD)  # A - B is 3.0 [1.0, 5.0]: not below 0
    assert C.decision_record(t3)["llm_checks"][0]["ours"]["mean"] == 3.0
    assert "| T3 | " not in C.to_markdown(C.decide_all(C.load_summaries([toy]), claims, strict=False))


def test_a_claim_without_checks_needs_a_status():
    with pytest.raises(FedprefError, match="status"):
        C.load_claims(TOY_CLAIMS.replace('status = "not run"', ""))


def test_every_claims_quantity_is_in_its_committed_summary():
    claims = C.load_claims()
    assert len({c.id for c in claims}) == len(claims) == 52
    summaries = C.load_summaries([RESULTS])
    for claim in claims:
        assert claim.paper in ("FedGD", "FedVPA-GP") and claim.statement and claim.command, claim.id
        for check in claim.checks + claim.llm_checks:
            assert check.rule in C.RULES, claim.id
            for q in (check.quantity, check.than):
                if q is not None:
                    assert (RESULTS / f"{q.summary}.md").is_file(), (claim.id, q.summary)
                    assert C.read(summaries, q) is not None, (claim.id, q.label(), q.group)
    assert 5 <= sum(c.headline for c in claims) <= 8


def test_the_generated_pages_are_current():
    """The results page, the README's glance table and the research notes' verdict column hold the verdicts the
    rules decide today from the committed summaries (`make reference` rewrites them)."""
    stale = [str(p) for p, text in C.generated_files(ROOT).items() if (ROOT / p).read_text(encoding="utf-8") != text]
    assert not stale, f"{stale} stale: run `make reference`"


def test_every_verdict_in_the_notes_is_the_rules():
    decided = {d.claim.id: d.verdict for d in C.decide_all(C.load_summaries([RESULTS]))}
    found = {}
    for line in (ROOT / C.NOTES_PAGE).read_text(encoding="utf-8").splitlines():
        if line.startswith("| F"):
            cells = line.split(" | ")
            found[cells[0].removeprefix("| ")] = cells[5]
    assert set(found) == set(decided)
    for claim_id, text in found.items():
        assert text.startswith(f"[{decided[claim_id]}]("), claim_id


def test_cli_lists_and_re_decides(capsys, tmp_path, toy):
    assert main(["claims", "--id", "F7"]) == 0
    expected = C.decide_claim(next(c for c in C.load_claims() if c.id == "F7"), C.load_summaries([RESULTS]))
    assert f"| {expected.verdict} |" in capsys.readouterr().out
    assert main(["claims", "--summaries", str(toy)]) == 2  # no claim reads an "A - B"
    assert "no claim has a number" in capsys.readouterr().err
    rerun = tmp_path / "rerun.json"  # FedGD - FL at acc^10 on a user's own runs: F7, and F7b (same quantity)
    rows = [row("paired_difference", "FedGD - FL", 10, 4.0, 2.0, 6.0, [3.0, 4.0, 5.0])]
    rerun.write_text(json.dumps({"format": "fedpref-summary/1", "rows": rows}), encoding="utf-8")
    assert main(["claims", "--summaries", str(rerun), "--format", "json"]) == 0
    listed = {d["id"]: d["verdict"] for d in json.loads(capsys.readouterr().out)}
    assert listed == {"F7": HOLDS, "F7b": HOLDS}


def test_every_command_names_a_make_target_or_a_fedpref_command():
    rules = re.findall(r"^([A-Za-z0-9_. -]+):(?!=)", (ROOT / "Makefile").read_text(encoding="utf-8"), flags=re.M)
    targets = {name for names in rules for name in names.split()}
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    for claim in C.load_claims():
        for part in claim.command.replace("&&", ";").split(";"):
            program, name, *_ = part.split()
            if program == "make":
                assert name in targets, (claim.id, name)
            elif program == "fedpref":
                assert name in commands, (claim.id, name)
            else:
                assert name.endswith(".py") and (ROOT / name).is_file(), (claim.id, part)  # python SCRIPT
