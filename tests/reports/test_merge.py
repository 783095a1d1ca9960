"""Summaries of different seeds merged (`fedpref summarize A.json B.json`): numbers by hand, and the same rows as
summarizing all the runs at once."""

import json

import pytest
from tests.reports.test_summary import write_run

from fedpref.cli import main
from fedpref.errors import FedprefError
from fedpref.reports.merge import Summary, merge_summaries, merged_markdown


def row(seeds, values, unit="seed", **names) -> dict:
    return {"group": "g", "kind": "accuracy", "method": "FL", "step": 5} | names | {
        "unit": unit, "n": len(values), "mean": sum(values) / len(values), "std": None, "ci_low": None,
        "ci_high": None, "seeds": seeds, "values": values,
    }  # fmt: skip


def test_rows_of_disjoint_seeds_are_one_row_over_all_of_them():
    merged = merge_summaries([Summary("a", [row([0], [10.0])]), Summary("b", [row([1, 2], [12.0, 14.0])])])
    [r] = merged.rows
    # mean 12, std 2, half-width t(2) * 2 / sqrt(3) = 4.3027 * 1.1547 = 4.9683
    assert (r["seeds"], r["values"], r["n"], r["mean"], r["std"]) == ([0, 1, 2], [10.0, 12.0, 14.0], 3, 12.0, 2.0)
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((7.0317, 16.9683), abs=1e-4)


def test_a_one_seed_paired_row_counts_as_its_clients_mean():
    a = row([0], [1.0, 3.0], unit="client", kind="paired_difference")  # seed 0: clients 1 and 3, mean 2
    b = row([1], [4.0, 4.0], unit="client", kind="paired_difference")  # seed 1: mean 4
    [r] = merge_summaries([Summary("a", [a]), Summary("b", [b])]).rows
    # values 2, 4: mean 3, std sqrt(2), half-width t(1) * sqrt(2) / sqrt(2) = 12.7062
    assert (r["unit"], r["seeds"], r["values"], r["mean"]) == ("seed", [0, 1], [2.0, 4.0], 3.0)
    assert r["std"] == pytest.approx(2**0.5)
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((3 - 12.7062, 3 + 12.7062), abs=1e-4)


def test_rows_with_other_names_stay_apart_and_a_row_only_one_summary_holds_is_kept_as_it_is():
    only = row([0], [1.0, 3.0], unit="client", kind="paired_difference")
    a = [row([0], [10.0]), only, row([0], [50.0], policy="FedDPO", context="helpful")]
    b = [row([1], [20.0]), row([1], [70.0], policy="FedDPO", context="harmless")]
    rows = merge_summaries([Summary("a", a), Summary("b", b)]).rows
    assert [(r["kind"], r.get("context"), r["seeds"]) for r in rows] == [
        ("accuracy", None, [0, 1]), ("paired_difference", None, [0]), ("accuracy", "helpful", [0]),
        ("accuracy", "harmless", [1]),
    ]  # fmt: skip
    assert rows[1] is only


def test_the_same_seed_twice_must_have_the_same_value():
    same = merge_summaries([Summary("a", [row([0, 1], [10.0, 20.0])]), Summary("b", [row([1], [20.0])])])
    assert [r["values"] for r in same.rows] == [[10.0, 20.0]]
    with pytest.raises(FedprefError, match="seed 1: 20.0 in a but 21.0 in b: two different runs of one seed"):
        merge_summaries([Summary("a", [row([0, 1], [10.0, 20.0])]), Summary("b", [row([1], [21.0])])])


def test_a_group_must_be_one_configuration_in_every_summary_but_for_where_it_ran():
    ok = {"g": {"train.lr": 0.001, "data.path": "/data/a", "device": "cpu", "train.new_field": 1}}
    moved = {"g": {"train.lr": 0.001, "data.path": "/elsewhere/a", "device": "cuda"}}
    merged = merge_summaries([Summary("a", [row([0], [1.0])], ok), Summary("b", [row([1], [2.0])], moved)])
    assert merged.configurations == ok and not merged.warnings
    other = {"g": {"train.lr": 0.01}}
    with pytest.raises(FedprefError, match=r"group 'g' is not the same configuration in a and b \(train.lr: "):
        merge_summaries([Summary("a", [row([0], [1.0])], ok), Summary("b", [row([1], [2.0])], other)])
    unknown = merge_summaries([Summary("a", [row([0], [1.0])], ok), Summary("old", [row([1], [2.0])])])
    assert unknown.warnings == ["old records no configurations: its runs' settings could not be compared"]


def test_the_markdown_names_every_seed_and_the_sources():
    merged = merge_summaries([Summary("a.json", [row([0], [10.0])]), Summary("b.json", [row([1, 2], [12.0, 14.0])])])
    text = merged_markdown(merged, ["a.json", "b.json"])
    assert "From: `a.json`, `b.json`." in text
    assert "| FL | 5 | 3 | 12.00 | 2.00 | [7.03, 16.97] | 0: 10.00, 1: 12.00, 2: 14.00 |" in text


def test_merging_summaries_of_some_seeds_gives_the_summary_of_all_of_them(tmp_path, capsys):
    for seed in (0, 1, 2):
        write_run(tmp_path / "sweep" / f"seed={seed}", seed)
    whole, first, rest, merged = (tmp_path / f"{name}.json" for name in ("whole", "first", "rest", "merged"))
    pair = ["--pair", "FedGD,FL"]
    assert main(["summarize", str(tmp_path / "sweep"), *pair, "--json", str(whole)]) == 0
    assert main(["summarize", str(tmp_path / "sweep" / "seed=0"), *pair, "--json", str(first)]) == 0
    rest_dirs = [str(tmp_path / "sweep" / f"seed={s}") for s in (1, 2)]
    assert main(["summarize", *rest_dirs, *pair, "--json", str(rest)]) == 0
    assert main(["summarize", str(first), str(rest), "--json", str(merged)]) == 0
    expected = json.loads(whole.read_text())
    got = json.loads(merged.read_text())
    assert got["configurations"] == expected["configurations"]
    by_name = {json.dumps({k: r[k] for k in ("kind", "method", "step")}): r for r in got["rows"]}
    for want in expected["rows"]:
        have = by_name[json.dumps({k: want[k] for k in ("kind", "method", "step")})]
        assert have["seeds"] == want["seeds"] and have["values"] == pytest.approx(want["values"])
        assert (have["mean"], have["ci_low"], have["ci_high"]) == pytest.approx(
            (want["mean"], want["ci_low"], want["ci_high"])
        )
    # and a run folder with a summary of other seeds: the same again
    assert main(["summarize", str(first), *rest_dirs, *pair, "--json", str(merged)]) == 0
    assert len(json.loads(merged.read_text())["rows"]) == len(got["rows"])


def test_merging_refuses_what_it_cannot_do(tmp_path):
    write_run(tmp_path / "seed=0", 0)
    summary = tmp_path / "s.json"
    assert main(["summarize", str(tmp_path / "seed=0"), "--json", str(summary)]) == 0
    assert main(["summarize", str(summary), "--pair", "FedGD,FL"]) == 2
    assert main(["summarize", str(summary), "--across", "train.lr"]) == 2
    (tmp_path / "not.json").write_text('{"rows": []}')
    assert main(["summarize", str(summary), str(tmp_path / "not.json")]) == 2
