"""data.source = tldr / hh / pairwise_jsonl: config options, dispatch, `fedpref data stats` and its errors."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from fedpref.cli import main
from fedpref.config import load_config
from fedpref.data.splits import split_clients
from fedpref.errors import ConfigError
from fedpref.experiments.setup import check_client_count, load_pairs

ROOT = Path(__file__).resolve().parents[2]
TLDR_SMALL = ROOT / "tests" / "fixtures" / "tldr_small.jsonl"
SHARED = (ROOT / ".." / "shared" / "data").resolve()


TLDR_LOCAL = "../shared/data/tldr-comparisons"  # the shared subset, relative to the repository root


def _shared(name: str) -> Path:
    path = SHARED / name
    if not path.is_dir():
        pytest.skip(f"real data not available: {path} is absent (see ../shared/data)")
    return path


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return path


def _cfg(*overrides: str):
    return load_config(None, list(overrides))


def _clients(pairs) -> Counter:
    return Counter(p.client for p in pairs)


def run_cli(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out + out.err


# --- fixtures in the hub formats --------------------------------------------


def test_tldr_source_and_filter_options():
    cfg = _cfg("data.source='tldr'", f"data.path='{TLDR_SMALL}'")
    assert _clients(load_pairs(cfg)) == {"w1": 4, "w2": 4, "w3": 3}
    cfg = _cfg(
        "data.source='tldr'",
        f"data.path='{TLDR_SMALL}'",
        "data.tldr.required_splits=['train', 'valid1', 'valid2']",
        "data.tldr.splits=['train']",
    )
    assert _clients(load_pairs(cfg)) == {"w1": 2, "w3": 1}
    assert _clients(load_pairs(_cfg("data.source='tldr'", f"data.path='{TLDR_SMALL}'", "data.tldr.min_total=4"))) == {
        "w1": 4,
        "w2": 4,
    }


def _hh_row(i: int, kind: str) -> dict:
    prompt = f"\n\nHuman: {kind} question {i}?\n\nAssistant:"
    return {"chosen": f"{prompt} a kind answer {i}", "rejected": f"{prompt} a rude answer {i}"}


@pytest.fixture
def hh_dir(tmp_path: Path) -> Path:
    _write_jsonl(tmp_path / "helpful-base.test.jsonl.gz", [_hh_row(i, "helpful") for i in range(6)])
    _write_jsonl(tmp_path / "harmless-base.test.jsonl.gz", [_hh_row(i, "harmless") for i in range(6)])
    return tmp_path


def test_hh_source_partitions(hh_dir):
    base = ["data.source='hh'", f"data.path='{hh_dir}'", "data.hh.num_clients=4", "federation.clients_per_round=2"]
    pairs = load_pairs(_cfg(*base, "data.hh.pairs_per_client=3"))
    assert _clients(pairs) == {"c00": 3, "c01": 3, "c02": 3, "c03": 3}
    assert Counter(p.group for p in pairs) == {"helpful": 6, "harmless": 6}
    assert all(p.prompt.endswith("Assistant:") for p in pairs)
    iid = load_pairs(_cfg(*base, "data.hh.scheme='iid'", "data.hh.subsets=['helpful-base']"))
    assert _clients(iid) == {"c00": 2, "c01": 2, "c02": 1, "c03": 1} and {p.group for p in iid} == {None}
    dirichlet = load_pairs(_cfg(*base, "data.hh.scheme='dirichlet'", "data.hh.alpha=0.1"))
    assert _clients(dirichlet) == {"c00": 3, "c01": 3, "c02": 3, "c03": 3}


def test_pairwise_jsonl_source_with_key_names(tmp_path):
    rows = [{"q": f"q{i}", "good": "g", "bad": "b", "annotator": f"u{i % 2}", "cohort": "x"} for i in range(6)]
    path = _write_jsonl(tmp_path / "mine.jsonl", rows)
    keys = ["prompt_key='q'", "chosen_key='good'", "rejected_key='bad'", "user_key='annotator'", "group_key='cohort'"]
    cfg = _cfg("data.source='pairwise_jsonl'", f"data.path='{path}'", *(f"data.pairwise.{k}" for k in keys))
    pairs = load_pairs(cfg)
    assert _clients(pairs) == {"u0": 3, "u1": 3} and {p.group for p in pairs} == {"x"}
    assert (pairs[0].prompt, pairs[0].chosen, pairs[0].rejected) == ("q0", "g", "b")


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["data.source='tldr'"], "data.path"),
        (["data.source='parquet'"], "data.source"),
        (["data.source='hh'", "data.path='x'", "data.hh.scheme='random'"], "data.hh.scheme"),
        (["data.source='hh'", "data.path='x'", "data.hh.num_clients=3"], "federation.clients_per_round"),
        (["data.hh.helpful_fraction=1.5"], "data.hh.helpful_fraction"),
        (["data.tldr.min_per_split=10"], "data.tldr.min_per_split"),
        (["data.pairwise.user_key=''"], "data.pairwise.user_key"),
    ],
)
def test_bad_options_name_the_key(overrides, key):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        _cfg(*overrides)


def test_too_few_clients_for_the_federation():
    cfg = _cfg("data.source='tldr'", f"data.path='{TLDR_SMALL}'", "algorithm.methods=['FedGD']")
    check_client_count(cfg, 5)
    with pytest.raises(ConfigError, match=r"tldr_small\.jsonl: 3 client\(s\), fewer than federation.clients_per_round"):
        check_client_count(cfg, 3)
    cfg.federation.clients_per_round = 2
    with pytest.raises(ConfigError, match="fewer than algorithm.num_models = 4 for FedGD"):
        check_client_count(cfg, 3)


# --- through the CLI ----------------------------------------------------------


TLDR_CLI = ["--set", "data.source='tldr'", "--set", f"data.path='{TLDR_SMALL}'"]
SMALL_SPLITS = ["--set", "data.val_pairs=1", "--set", "data.test_pairs=1", "--set", "federation.clients_per_round=2"]


def test_data_stats_on_tldr(capsys):
    code, out = run_cli(capsys, "data", "stats", "tiny", *TLDR_CLI, *SMALL_SPLITS)
    assert code == 0, out
    assert "3 workers before the filter" in out and "3 clients, 11 pairs" in out
    assert "train / val / test: 5 / 3 / 3" in out


def test_filter_leaving_no_client_is_one_line(capsys):
    argv = [*TLDR_CLI, "--set", "data.tldr.required_splits=['valid1']", "--set", "data.tldr.min_per_split=2"]
    code, out = run_cli(capsys, "data", "stats", "tiny", *argv)
    error = out[out.index("error:") :].strip()
    assert code == 2 and "Traceback" not in out
    assert "\n" not in error and str(TLDR_SMALL) in error and "no worker passes the filter" in error


def test_stats_reports_too_few_clients(capsys):
    argv = [*TLDR_CLI, *SMALL_SPLITS[:4], "--set", "federation.clients_per_round=4"]
    code, out = run_cli(capsys, "data", "stats", "tiny", *argv)
    assert code == 2 and "3 clients, 11 pairs" in out and "fewer than federation.clients_per_round = 4" in out


# --- the real files in ../shared/data ----------------------------------------


def test_tldr_local_config_on_the_real_subset(monkeypatch):
    _shared("tldr-comparisons")
    monkeypatch.chdir(ROOT)  # data.path is relative to the repository root
    cfg = load_config(ROOT / "src/fedpref/configs/fedgd/tldr_local.toml", [f"data.path='{TLDR_LOCAL}'"])
    pairs = load_pairs(cfg)
    assert sorted(_clients(pairs).values()) == [74, 83, 115, 127, 128, 168] and len(pairs) == 695
    splits = split_clients(pairs, cfg.data.val_pairs, cfg.data.test_pairs, cfg.seed)
    assert {(len(s.val), len(s.test)) for s in splits} == {(cfg.data.val_pairs, cfg.data.test_pairs)}
    check_client_count(cfg, len(splits))


def test_real_tldr_filter_leaving_no_client_through_the_cli(capsys, monkeypatch):
    _shared("tldr-comparisons")
    monkeypatch.chdir(ROOT)
    argv = ["data", "stats", "tldr_local", "--set", f"data.path='{TLDR_LOCAL}'"]
    argv += ["--set", "data.tldr.min_per_split=100"]
    code, out = run_cli(capsys, *argv)
    error = out[out.index("error:") :].strip()
    assert code == 2 and "\n" not in error and "Traceback" not in out
    assert "tldr-comparisons: no worker passes the filter" in error and "30 workers" in error
    assert "30 workers before the filter" in out  # the counts are printed first


def test_real_hh_source():
    path = _shared("hh-rlhf")
    cfg = _cfg("data.source='hh'", f"data.path='{path}'", "data.hh.num_clients=6", "data.hh.pairs_per_client=50")
    pairs = load_pairs(cfg)
    assert _clients(pairs) == {f"c0{i}": 50 for i in range(6)}
    assert Counter(p.group for p in pairs) == {"helpful": 150, "harmless": 150}
