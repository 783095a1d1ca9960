"""`fedpref data split-clients`: one file per user, rows unchanged and in order."""

import json

import pytest

from fedpref.cli import main
from fedpref.data.client_files import file_name, split_by_user
from fedpref.errors import DataError

ROWS = [
    {"prompt": "p1", "chosen": "a", "rejected": "b", "user": "ann"},
    {"prompt": "p2", "chosen": "c", "rejected": "d", "user": "bo/b"},
    {"prompt": "p3", "chosen": "e", "rejected": "f", "user": "ann", "extra": [1, 2]},
]


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_user_gets_their_rows_unchanged_in_order(tmp_path):
    written = split_by_user(write(tmp_path / "all.jsonl", ROWS), "user", tmp_path / "out")
    assert sorted(written) == ["ann", "bo/b"]
    assert read(written["ann"]) == [ROWS[0], ROWS[2]] and read(written["bo/b"]) == [ROWS[1]]
    assert written["ann"].name == "ann.jsonl"
    assert written["bo/b"].parent == tmp_path / "out" and "/" not in written["bo/b"].name


def test_unsafe_ids_that_look_alike_get_distinct_files():
    assert file_name("a/b") != file_name("a_b") and file_name("a_b") == "a_b.jsonl"


def test_a_row_without_the_user_key_names_its_line(tmp_path):
    with pytest.raises(DataError, match=r"all.jsonl:2: no 'user'"):
        split_by_user(write(tmp_path / "all.jsonl", [ROWS[0], {"prompt": "x"}]), "user", tmp_path / "out")


def test_the_command(tmp_path, capsys):
    source = write(tmp_path / "all.jsonl", ROWS)
    assert main(["data", "split-clients", str(source), "--out", str(tmp_path / "o"), "--user-key", "user"]) == 0
    assert "wrote 2 client files" in capsys.readouterr().out
