import pytest

from fedpref.data.pairs import PreferencePair, read_jsonl, write_jsonl
from fedpref.data.splits import split_clients
from fedpref.errors import DataError


def pairs_for(client, n, group=None):
    return [PreferencePair(f"p{i}", f"c{i}", f"r{i}", client, group) for i in range(n)]


def test_jsonl_round_trip(tmp_path):
    pairs = pairs_for("a", 3, "G1") + pairs_for("b", 2)
    write_jsonl(pairs, tmp_path / "x.jsonl")
    assert read_jsonl(tmp_path / "x.jsonl") == pairs
    assert '"group"' not in (tmp_path / "x.jsonl").read_text().splitlines()[-1]  # absent group is not written


def test_malformed_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "p", "chosen": "c", "rejected": "r", "client": "a"}\n{"prompt": \n')
    with pytest.raises(DataError, match=r"bad\.jsonl:2: malformed JSON"):
        read_jsonl(path)


def test_missing_field_names_the_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "p", "chosen": "c", "client": "a"}\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:1: missing field\(s\) rejected"):
        read_jsonl(path)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        read_jsonl(tmp_path / "none.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DataError, match="no preference pairs"):
        read_jsonl(tmp_path / "empty.jsonl")


def test_split_sizes_and_disjointness():
    splits = split_clients(pairs_for("a", 10, "G1") + pairs_for("b", 7, "G2"), val_pairs=2, test_pairs=3, seed=0)
    a, b = splits
    assert (a.client_id, a.group, len(a.train), len(a.val), len(a.test)) == ("a", "G1", 5, 2, 3)
    assert (b.client_id, len(b.train)) == ("b", 2)
    assert len({p.prompt for p in a.train + a.val + a.test}) == 10


def test_split_is_deterministic_per_seed():
    pairs = pairs_for("a", 20)
    assert split_clients(pairs, 2, 3, seed=1)[0].test == split_clients(pairs, 2, 3, seed=1)[0].test
    assert split_clients(pairs, 2, 3, seed=1)[0].test != split_clients(pairs, 2, 3, seed=2)[0].test


def test_too_few_pairs_is_a_clear_error():
    with pytest.raises(DataError, match="client 'a' has 5 pairs; it needs at least 6"):
        split_clients(pairs_for("a", 5), val_pairs=2, test_pairs=3, seed=0)


def test_mixed_groups_give_no_group():
    pairs = pairs_for("a", 4, "G1") + pairs_for("a", 4, "G2")
    assert split_clients(pairs, 1, 1, seed=0)[0].group is None
