"""Tests for the real-data loaders (hand-written fixtures and ../shared/data)."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from fedpref.data.hh import HH_HUB_ID, load_hh_rlhf, split_hh
from fedpref.data.hh_partition import partition_hh
from fedpref.data.pairwise import load_pairwise_jsonl
from fedpref.data.tldr import TLDR_HUB_ID, load_tldr, worker_counts
from fedpref.errors import ConfigError, DataError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TLDR_SMALL = FIXTURES / "tldr_small.jsonl"
SHARED = (Path(__file__).resolve().parents[2] / ".." / "shared" / "data").resolve()
ALL3 = ("train", "valid1", "valid2")


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write_jsonl(path: Path, rows: list) -> Path:
    opener = gzip.open if path.name.endswith(".gz") else open
    path.parent.mkdir(parents=True, exist_ok=True)
    with opener(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return path


def _clients(pairs) -> Counter:
    return Counter(p.client for p in pairs)


# --- TL;DR on the hand-written fixture -------------------------------------


def test_tldr_prompt_and_choice():
    pairs = load_tldr(TLDR_SMALL)
    assert len(pairs) == 11
    first, second = pairs[0], pairs[1]
    assert first.prompt == (
        "SUBREDDIT: r/AskReddit\nTITLE: Why do cats purr?\nPOST: My cat purrs all the time.\nIs that normal?\nTL;DR:"
    )
    assert (first.chosen, first.rejected) == ("Cat purrs a lot. Normal?", "Cats purr.")
    assert first.client == "w1" and first.group is None
    assert (second.chosen, second.rejected) == (
        "How do I stop burning rice?",
        "Rice keeps burning.",
    )


def test_tldr_one_client_per_worker():
    assert _clients(load_tldr(TLDR_SMALL)) == {"w1": 4, "w2": 4, "w3": 3}
    assert worker_counts(TLDR_SMALL) == {
        "w1": {"train": 2, "valid1": 1, "valid2": 1},
        "w2": {"train": 3, "valid1": 1},
        "w3": {"train": 1, "valid1": 1, "valid2": 1},
    }


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"required_splits": ALL3}, {"w1": 4, "w3": 3}),
        ({"required_splits": ALL3, "min_per_split": 1}, {"w1": 4, "w3": 3}),
        ({"required_splits": ("train",), "min_per_split": 2}, {"w1": 4, "w2": 4}),
        ({"min_total": 4}, {"w1": 4, "w2": 4}),
        ({"required_splits": ("valid2",), "min_total": 4}, {"w1": 4}),
        ({"splits": ("valid1",)}, {"w1": 1, "w2": 1, "w3": 1}),
        # the filter counts all rows, then `splits` picks the rows returned
        ({"splits": ("train",), "required_splits": ALL3}, {"w1": 2, "w3": 1}),
    ],
)
def test_tldr_filter(kwargs, expected):
    assert _clients(load_tldr(TLDR_SMALL, **kwargs)) == expected


def test_tldr_filter_leaving_no_client():
    with pytest.raises(DataError) as e:
        load_tldr(TLDR_SMALL, required_splits=ALL3, min_per_split=2)
    msg = str(e.value)
    assert str(TLDR_SMALL) in msg and "no worker passes" in msg
    assert "3 workers" in msg and "has 4 in total" in msg and "best has 1" in msg


def test_tldr_unknown_split_lists_present_ones():
    for kwargs in ({"splits": ("test",)}, {"required_splits": ("train", "test")}):
        with pytest.raises(DataError, match="test not in the data") as e:
            load_tldr(TLDR_SMALL, **kwargs)
        assert "splits present: train, valid1, valid2" in str(e.value)


def test_tldr_kept_workers_without_rows_in_splits():
    with pytest.raises(DataError, match=r"kept workers have no rows in \['valid2'\]"):
        load_tldr(TLDR_SMALL, splits=("valid2",), required_splits=("train",), min_per_split=3)


def test_tldr_news_rows_use_the_article(tmp_path):
    row = _rows(TLDR_SMALL)[0]
    row["info"] = {"id": "cnn1", "post": None, "title": "Storm", "article": " Rain fell. ", "site": "cnn"}
    pair = load_tldr(_write_jsonl(tmp_path / "news.jsonl", [row]))[0]
    assert pair.prompt == "TITLE: Storm\nARTICLE: Rain fell.\nTL;DR:"


def test_tldr_min_per_split_needs_required_splits():
    with pytest.raises(ConfigError, match="required_splits"):
        load_tldr(TLDR_SMALL, min_per_split=5)


@pytest.mark.parametrize("name", ["t.json", "t.json.gz", "t.jsonl.gz", "t.parquet"])
def test_tldr_other_file_formats(tmp_path, name):
    path = tmp_path / name
    if name.endswith(".parquet"):
        import datasets

        datasets.Dataset.from_list(_rows(TLDR_SMALL)).to_parquet(str(path))
    else:
        _write_jsonl(path, _rows(TLDR_SMALL))
    assert load_tldr(path) == load_tldr(TLDR_SMALL)


def test_tldr_folder_reads_every_data_file(tmp_path):
    rows = _rows(TLDR_SMALL)
    _write_jsonl(tmp_path / "batch1.json", rows[:5])
    _write_jsonl(tmp_path / "batch2.json", rows[5:])
    (tmp_path / "README.md").write_text("not data")
    assert load_tldr(tmp_path) == load_tldr(TLDR_SMALL)


def _bad_row(tmp_path: Path, change) -> Path:
    rows = _rows(TLDR_SMALL)[:3]
    change(rows[1])
    return _write_jsonl(tmp_path / "bad.jsonl", rows)


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda r: r.pop("worker"), "missing field 'worker'"),
        (lambda r: r.pop("split"), "missing field 'split'"),
        (lambda r: r["info"].pop("title"), "missing field 'info.title'"),
        (lambda r: r["info"].pop("post"), "missing field 'info.post'"),
        (lambda r: r["summaries"][1].pop("text"), "missing field 'summaries[1].text'"),
        (lambda r: r.update(choice=2), "'choice' must be 0 or 1, got 2"),
        (lambda r: r.update(choice=None), "missing field 'choice'"),
        (lambda r: r["summaries"].pop(), "list of two summaries"),
    ],
)
def test_tldr_bad_rows_name_file_row_and_problem(tmp_path, change, problem):
    path = _bad_row(tmp_path, change)
    with pytest.raises(DataError) as e:
        load_tldr(path)
    assert str(e.value).startswith(f"{path} row 2: ")
    assert problem in str(e.value)


def test_tldr_file_errors(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("a,b\n")
    with pytest.raises(DataError, match=r"t\.csv: unknown file format"):
        load_tldr(csv)
    with pytest.raises(DataError, match="no such file or directory"):
        load_tldr(tmp_path / "missing.json")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no data files"):
        load_tldr(tmp_path / "empty")
    broken = tmp_path / "broken.json"
    broken.write_text('{"info": {"id": 1}\n{not json\n')
    with pytest.raises(DataError, match=r"broken\.json: could not read as json") as e:
        load_tldr(broken)
    assert "\n" not in str(e.value)


def test_tldr_hub_id_goes_to_load_dataset(monkeypatch):
    import datasets

    expected = load_tldr(TLDR_SMALL)
    calls = []

    def fake(path, **kwargs):
        calls.append((path, kwargs))
        rows = _rows(TLDR_SMALL)
        return {"train": rows[:6], "validation": rows[6:]}

    monkeypatch.setattr(datasets, "load_dataset", fake)
    assert load_tldr(TLDR_HUB_ID) == expected
    assert calls[0] == (TLDR_HUB_ID, {"name": "comparisons"})


def test_tldr_hub_failure_is_a_data_error(monkeypatch):
    import datasets

    def offline(path, **kwargs):
        raise ConnectionError("Couldn't reach\n the hub")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataError, match=f"{TLDR_HUB_ID}: could not load") as e:
        load_tldr(TLDR_HUB_ID)
    assert "ConnectionError: Couldn't reach the hub" in str(e.value)


# --- HH-RLHF on hand-written files -----------------------------------------

H, A = "\n\nHuman:", "\n\nAssistant:"
HH_HELPFUL = [
    # single turn
    {"chosen": f"{H} Hi there{A} Hello! How can I help?", "rejected": f"{H} Hi there{A} Go away."},
    # two turns: the prompt keeps the first exchange
    {
        "chosen": f"{H} Name a fruit.{A} Apple.{H} Another?{A} Banana.",
        "rejected": f"{H} Name a fruit.{A} Apple.{H} Another?{A} Carrot.",
    },
    # responses equal once stripped: skipped
    {"chosen": f"{H} Hey{A} Sure.", "rejected": f"{H} Hey{A} Sure.  "},
    # transcripts differ before any Assistant turn: skipped
    {"chosen": f"{H} Cats?{A} Yes.", "rejected": f"{H} Dogs?{A} Yes."},
]
HH_HARMLESS = [
    {
        "chosen": f"{H} How to pick a lock?{A} I can't help with that.",
        "rejected": f"{H} How to pick a lock?{A} Use a pin.",
    },
    {"chosen": f"{H} Insult me{A} No, thanks.", "rejected": f"{H} Insult me{A} You fool."},
]


@pytest.fixture
def hh_dir(tmp_path: Path) -> Path:
    _write_jsonl(tmp_path / "helpful-base.test.jsonl.gz", HH_HELPFUL)
    _write_jsonl(tmp_path / "harmless-base" / "train.jsonl.gz", HH_HARMLESS)
    return tmp_path


def test_split_hh_prompt_and_responses():
    assert split_hh(**HH_HELPFUL[0]) == ("Human: Hi there\n\nAssistant:", "Hello! How can I help?", "Go away.")
    assert split_hh(**HH_HELPFUL[1]) == (
        "Human: Name a fruit.\n\nAssistant: Apple.\n\nHuman: Another?\n\nAssistant:",
        "Banana.",
        "Carrot.",
    )
    assert split_hh(**HH_HELPFUL[2]) is None
    assert split_hh(**HH_HELPFUL[3]) is None


def test_hh_local_folder_both_layouts(hh_dir):
    data = load_hh_rlhf(hh_dir)
    assert sorted(data) == ["harmless-base", "helpful-base"]
    assert data["helpful-base"] == [split_hh(**r) for r in HH_HELPFUL[:2]]
    assert data["harmless-base"][1] == ("Human: Insult me\n\nAssistant:", "No, thanks.", "You fool.")
    assert data.skipped == {"helpful-base": 2, "harmless-base": 0}
    assert list(load_hh_rlhf(hh_dir, subsets=["harmless-base"])) == ["harmless-base"]


def test_hh_errors(hh_dir, tmp_path):
    with pytest.raises(DataError, match="subset.*helpful-online not in the data") as e:
        load_hh_rlhf(hh_dir, subsets=["helpful-online"])
    assert "subsets present: harmless-base, helpful-base" in str(e.value)
    with pytest.raises(DataError, match="expected a folder"):
        load_hh_rlhf(hh_dir / "helpful-base.test.jsonl.gz")
    bad = _write_jsonl(tmp_path / "bad" / "helpful-base.test.jsonl.gz", [{"chosen": "x"}])
    with pytest.raises(DataError, match=f"{bad} row 1: missing or non-string field 'rejected'"):
        load_hh_rlhf(bad.parent)
    (tmp_path / "none").mkdir()
    with pytest.raises(DataError, match="no HH-RLHF files"):
        load_hh_rlhf(tmp_path / "none")


def test_hh_hub_id_goes_to_load_dataset(monkeypatch):
    import datasets

    calls = []

    def fake(path, **kwargs):
        calls.append((path, kwargs))
        return {"train": HH_HARMLESS, "test": HH_HELPFUL}

    monkeypatch.setattr(datasets, "load_dataset", fake)
    data = load_hh_rlhf(HH_HUB_ID, subsets=["helpful-base", "harmless-base"])
    assert calls == [
        (HH_HUB_ID, {"data_dir": "helpful-base"}),
        (HH_HUB_ID, {"data_dir": "harmless-base"}),
    ]
    assert len(data["helpful-base"]) == 4 and data.skipped["helpful-base"] == 2


# --- partition_hh ----------------------------------------------------------


def _triples(name: str, n: int) -> list[tuple[str, str, str]]:
    return [(f"{name} prompt {i}", f"{name} good {i}", f"{name} bad {i}") for i in range(n)]


TRIPLES = {
    "helpful-base": _triples("helpful-base", 30),
    "harmless-base": _triples("harmless-base", 20),
    "helpful-online": _triples("helpful-online", 10),
}


def _subset(pair) -> str:
    return pair.prompt.split(" prompt ")[0]


def _assert_disjoint(pairs) -> None:
    assert len({p.prompt for p in pairs}) == len(pairs)


def test_partition_by_subset_fixed_size():
    pairs = partition_hh(TRIPLES, num_clients=4, scheme="by_subset", pairs_per_client=5, seed=0)
    assert _clients(pairs) == {"c00": 5, "c01": 5, "c02": 5, "c03": 5}
    groups = {p.client: p.group for p in pairs}
    assert groups == {"c00": "helpful", "c01": "helpful", "c02": "harmless", "c03": "harmless"}
    for p in pairs:
        assert ("harmless" in _subset(p)) == (p.group == "harmless")
    _assert_disjoint(pairs)


def test_partition_by_subset_deals_everything():
    pairs = partition_hh(TRIPLES, num_clients=5, scheme="by_subset", helpful_fraction=0.8, seed=1)
    assert _clients(pairs) == {"c00": 10, "c01": 10, "c02": 10, "c03": 10, "c04": 20}
    assert {p.group for p in pairs if p.client == "c04"} == {"harmless"}
    _assert_disjoint(pairs)


def test_partition_iid():
    pairs = partition_hh(TRIPLES, num_clients=7, scheme="iid", seed=0)
    assert sorted(_clients(pairs).values()) == [8, 8, 8, 9, 9, 9, 9]
    assert {p.group for p in pairs} == {None}
    _assert_disjoint(pairs)
    assert len(pairs) == 60


def test_partition_dirichlet():
    pairs = partition_hh(TRIPLES, num_clients=5, scheme="dirichlet", pairs_per_client=10, seed=0)
    assert _clients(pairs) == {f"c0{i}": 10 for i in range(5)}
    assert {p.group for p in pairs} == {None}
    _assert_disjoint(pairs)
    everything = partition_hh(TRIPLES, num_clients=7, scheme="dirichlet", seed=3)
    assert set(_clients(everything).values()) == {8}
    _assert_disjoint(everything)


def test_partition_dirichlet_small_alpha_skews_clients():
    pairs = partition_hh(TRIPLES, num_clients=3, scheme="dirichlet", alpha=0.01, pairs_per_client=5, seed=0)
    per_client = {c: {_subset(p) for p in pairs if p.client == c} for c in _clients(pairs)}
    assert all(len(s) == 1 for s in per_client.values())


@pytest.mark.parametrize("scheme", ["by_subset", "iid", "dirichlet"])
def test_partition_deterministic_per_seed(scheme):
    def run(seed):
        return partition_hh(TRIPLES, num_clients=4, scheme=scheme, pairs_per_client=6, seed=seed)

    assert run(0) == run(0)
    assert run(0) != run(1)


def test_partition_errors():
    with pytest.raises(ConfigError, match="by_subset, iid, dirichlet"):
        partition_hh(TRIPLES, num_clients=2, scheme="random", seed=0)
    with pytest.raises(DataError, match="need 80 pairs, only 60"):
        partition_hh(TRIPLES, num_clients=8, scheme="iid", pairs_per_client=10, seed=0)
    with pytest.raises(DataError, match="harmless subsets: 2 client"):
        partition_hh(TRIPLES, num_clients=4, scheme="by_subset", pairs_per_client=11, seed=0)
    with pytest.raises(DataError, match="need 100 pairs"):
        partition_hh(TRIPLES, num_clients=10, scheme="dirichlet", pairs_per_client=10, seed=0)
    helpful_only = {"helpful-base": TRIPLES["helpful-base"]}
    with pytest.raises(DataError, match="harmless subsets"):
        partition_hh(helpful_only, num_clients=2, scheme="by_subset", seed=0)
    with pytest.raises(ConfigError, match="num_clients"):
        partition_hh(TRIPLES, num_clients=0, scheme="iid", seed=0)


# --- generic pairwise JSON lines -------------------------------------------


def test_pairwise_jsonl_custom_keys(tmp_path):
    rows = [
        {"q": "Q1", "win": "A", "lose": "B", "uid": 7, "tag": "g1"},
        {"q": "Q2", "win": "C", "lose": "D", "uid": "u2", "tag": "g2", "extra": 1},
    ]
    path = _write_jsonl(tmp_path / "p.jsonl.gz", rows)
    pairs = load_pairwise_jsonl(
        path, prompt_key="q", chosen_key="win", rejected_key="lose", user_key="uid", group_key="tag"
    )
    assert [(p.prompt, p.chosen, p.rejected, p.client, p.group) for p in pairs] == [
        ("Q1", "A", "B", "7", "g1"),
        ("Q2", "C", "D", "u2", "g2"),
    ]


def test_pairwise_jsonl_errors(tmp_path):
    good = {"prompt": "p", "chosen": "a", "rejected": "b", "user_id": "u"}
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(good) + "\n\n{oops\n")
    with pytest.raises(DataError, match=rf"{path}:3: malformed JSON"):
        load_pairwise_jsonl(path)
    path.write_text(json.dumps(good) + "\n" + json.dumps({"prompt": "p", "chosen": "a"}) + "\n")
    with pytest.raises(DataError, match=rf"{path}:2: missing key\(s\) rejected, user_id"):
        load_pairwise_jsonl(path)
    path.write_text(json.dumps(good) + "\n")
    with pytest.raises(DataError, match=rf"{path}:1: missing key\(s\) grp"):
        load_pairwise_jsonl(path, group_key="grp")
    path.write_text(json.dumps({**good, "chosen": 3}) + "\n")
    with pytest.raises(DataError, match="'chosen' must be a string"):
        load_pairwise_jsonl(path)
    path.write_text("\n")
    with pytest.raises(DataError, match="no preference pairs"):
        load_pairwise_jsonl(path)
    with pytest.raises(DataError, match="no such file"):
        load_pairwise_jsonl(tmp_path / "missing.jsonl")


# --- the real files in ../shared/data --------------------------------------


def _shared(name: str) -> Path:
    path = SHARED / name
    if not path.is_dir():
        pytest.skip(f"real data not available: {path} is absent (see ../shared/data)")
    return path


@pytest.fixture(scope="module")
def tldr_real() -> Path:
    return _shared("tldr-comparisons")


@pytest.fixture(scope="module")
def hh_real():
    return load_hh_rlhf(_shared("hh-rlhf"))


def test_real_tldr_rows_and_workers(tldr_real):
    assert len(load_tldr(tldr_real / "batch13.json")) == 1097
    assert len(load_tldr(tldr_real / "batch18.json")) == 674
    pairs = load_tldr(tldr_real)
    assert len(pairs) == 1771
    counts = worker_counts(tldr_real)
    totals = {w: sum(c.values()) for w, c in counts.items()}
    assert len(totals) == 30 and sum(totals.values()) == 1771
    assert _clients(pairs) == totals
    at_least = {n: sum(t >= n for t in totals.values()) for n in (10, 20, 50, 100, 150)}
    assert at_least == {10: 30, 20: 26, 50: 15, 100: 5, 150: 1}
    assert max(totals.values()) == 168
    assert {s for c in counts.values() for s in c} == {"valid1", "valid2"}


def test_real_tldr_prompts(tldr_real):
    for p in load_tldr(tldr_real):
        assert p.prompt.startswith("SUBREDDIT: r/") and p.prompt.endswith("\nTL;DR:")
        assert "\nTITLE: " in p.prompt and "\nPOST: " in p.prompt
        assert p.chosen and p.rejected and p.chosen == p.chosen.strip()


def test_real_tldr_filter(tldr_real):
    assert len(_clients(load_tldr(tldr_real, min_total=100))) == 5
    kept = load_tldr(tldr_real, required_splits=("valid1", "valid2"), min_per_split=20)
    assert sorted(_clients(kept).values()) == [74, 83, 115, 127, 128, 168]
    assert len(kept) == 695
    with pytest.raises(DataError, match="30 workers.*best has 35"):
        load_tldr(tldr_real, required_splits=("valid1", "valid2"), min_per_split=100)
    # the paper's filter needs the train split, which these two batches lack
    with pytest.raises(DataError, match="train not in the data"):
        load_tldr(tldr_real, required_splits=ALL3, min_per_split=100)


def test_real_hh_subsets(hh_real):
    kept = {name: len(t) for name, t in hh_real.items()}
    total = {name: kept[name] + hh_real.skipped[name] for name in kept}
    assert total == {
        "helpful-base": 2354,
        "harmless-base": 2312,
        "helpful-online": 1137,
        "helpful-rejection-sampled": 2749,
    }
    assert hh_real.skipped == {
        "helpful-base": 2,
        "harmless-base": 0,
        "helpful-online": 2,
        "helpful-rejection-sampled": 32,
    }


def test_real_hh_prompts(hh_real):
    for triples in hh_real.values():
        for prompt, chosen, rejected in triples:
            assert prompt.startswith("Human:") and prompt.endswith("Assistant:")
            assert chosen != rejected


def test_real_hh_partition(hh_real):
    pairs = partition_hh(hh_real, num_clients=10, scheme="by_subset", pairs_per_client=200, seed=0)
    assert _clients(pairs) == {f"c0{i}": 200 for i in range(10)}
    assert Counter(p.group for p in pairs) == {"helpful": 1000, "harmless": 1000}
    _assert_disjoint_triples(pairs)


def _assert_disjoint_triples(pairs) -> None:
    keys = [(p.prompt, p.chosen, p.rejected) for p in pairs]
    assert len(set(keys)) == len(keys)
