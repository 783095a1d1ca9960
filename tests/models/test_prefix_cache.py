"""The frozen-prefix disk cache: a hit returns what the frozen layers computed, any change of weights or ids misses."""

from __future__ import annotations

import torch
from torch import nn

from fedpref.config import load_config
from fedpref.data.pairs import PreferencePair
from fedpref.models.factory import build_reward_model
from fedpref.models.prefix_cache import PrefixCache, modules_fingerprint

IDS = [torch.tensor([101, 7, 8, 102]), torch.tensor([101, 9, 102])]


class Counting:
    """A prefix function that counts its calls: (L, 2) hidden states from token ids."""

    def __init__(self):
        self.calls = 0

    def __call__(self, ids):
        self.calls += 1
        return [torch.stack([s.float(), -s.float()], dim=1) for s in ids]


def cache(root, fingerprint="f", max_bytes=2**20) -> PrefixCache:
    return PrefixCache(root, lambda: fingerprint, max_bytes)


def test_hit_returns_the_computed_states_without_computing(tmp_path):
    fn = Counting()
    first = cache(tmp_path).hidden_states(IDS, fn)
    second = cache(tmp_path).hidden_states(IDS, fn)
    assert fn.calls == 1
    assert (
        [h.tolist() for h in second]
        == [h.tolist() for h in first]
        == [[[101, -101], [7, -7], [8, -8], [102, -102]], [[101, -101], [9, -9], [102, -102]]]
    )


def test_other_ids_or_fingerprint_miss(tmp_path):
    fn = Counting()
    cache(tmp_path).hidden_states(IDS, fn)
    cache(tmp_path).hidden_states([IDS[0], torch.tensor([101, 10, 102])], fn)
    cache(tmp_path, fingerprint="g").hidden_states(IDS, fn)
    assert fn.calls == 3


def test_an_entry_over_the_size_limit_is_not_written(tmp_path):
    fn = Counting()
    small = cache(tmp_path, max_bytes=7 * 2 * 4 - 1)  # 7 tokens x 2 floats x 4 bytes: one byte short
    small.hidden_states(IDS, fn)
    small.hidden_states(IDS, fn)
    assert fn.calls == 2 and not (tmp_path / "prefix").exists()


def test_a_corrupt_entry_is_recomputed(tmp_path, caplog):
    fn = Counting()
    c = cache(tmp_path)
    c.hidden_states(IDS, fn)
    c.path(IDS).write_bytes(b"not a tensor file")
    again = c.hidden_states(IDS, fn)
    assert fn.calls == 2 and again[1].tolist() == [[101, -101], [9, -9], [102, -102]]
    assert "unreadable prefix cache entry" in caplog.text


def test_fingerprint_follows_every_weight_and_setting():
    torch.manual_seed(0)
    layer = nn.Linear(3, 2)
    base = modules_fingerprint([layer], "packed")
    assert modules_fingerprint([layer], "packed") == base
    assert modules_fingerprint([layer], "padded") != base
    with torch.no_grad():
        layer.bias[0] += 1e-7
    assert modules_fingerprint([layer], "packed") != base


def test_the_reward_model_reads_back_exactly_what_it_computed(tmp_path):
    cfg = load_config(None, ["lora.top_layers=1", f"data.cache_dir={str(tmp_path)!r}"])
    pairs = [PreferencePair(f"Prompt {i}?", f"Answer {i}.", f"Other {i}!", "c0") for i in range(5)]
    cold = build_reward_model(cfg).encode(pairs)
    assert len(list((tmp_path / "prefix").glob("*.pt"))) == 1
    warm = build_reward_model(cfg).encode(pairs)
    uncached = build_reward_model(load_config(None, ["lora.top_layers=1", "data.prefix_cache_mb=0"]))
    uncached = uncached.encode(pairs)
    assert all(torch.equal(a, b) for a, b in zip(cold.seqs, warm.seqs, strict=True))
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(cold.seqs, uncached.seqs, strict=True))
    assert cold.seqs[0].dim() == 2  # hidden states, not token ids
