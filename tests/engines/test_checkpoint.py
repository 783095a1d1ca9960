import pytest
import torch

from fedpref.engines.checkpoint import CheckpointError, CheckpointStore, decode, encode


def test_round_trip_with_tensors_and_numpy_generators(tmp_path):
    import numpy as np

    rng = np.random.default_rng(3)
    rng.random()
    store = CheckpointStore(tmp_path)
    store.save({"w": torch.arange(3.0), "rng": rng, "round": 7})
    loaded = store.load()
    assert torch.equal(loaded["w"], torch.arange(3.0)) and loaded["round"] == 7
    assert loaded["rng"].random() == rng.random()


def test_truncated_latest_falls_back_to_previous(tmp_path):
    store = CheckpointStore(tmp_path)
    store.save({"round": 1})
    store.save({"round": 2})
    latest = tmp_path / "latest.ckpt"
    latest.write_bytes(latest.read_bytes()[:-10])
    assert store.load() == {"round": 1}


def test_corrupted_byte_is_detected(tmp_path):
    blob = bytearray(encode({"round": 3}))
    blob[-5] ^= 0xFF
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        decode(bytes(blob), "x")
    with pytest.raises(CheckpointError, match="not a fedpref checkpoint"):
        decode(b"garbage", "x")


def test_both_corrupted_is_a_clear_error(tmp_path):
    store = CheckpointStore(tmp_path)
    store.save({"round": 1})
    store.save({"round": 2})
    for name in ("latest.ckpt", "previous.ckpt"):
        (tmp_path / name).write_bytes(b"FPCKPT01")
    with pytest.raises(CheckpointError, match="no complete checkpoint"):
        store.load()


def test_empty_store_has_nothing(tmp_path):
    assert CheckpointStore(tmp_path / "new").load() is None
