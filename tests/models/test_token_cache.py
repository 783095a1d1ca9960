"""The tokenized-data cache: hits skip the tokenizer, any change of texts or tokenizer misses, results match."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer

from fedpref.config import ExperimentConfig
from fedpref.data.pairs import PreferencePair
from fedpref.models.backbone import resolve_backbone
from fedpref.models.factory import build_reward_model
from fedpref.models.selector_reward import chosen_is_a
from fedpref.models.token_cache import cached_token_ids, tokenizer_fingerprint

TEXTS = [("Why is the sky blue?", "Rayleigh scattering."), ("Best pizza?", "Margherita, obviously.")]
PAIRS = [
    PreferencePair(f"Post {i}: my cat purrs all day, is that normal?", f"Cat purrs {i}.", f"Normal cat {i}?", "c0")
    for i in range(8)
]


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(resolve_backbone("minilm"))


class Counting:
    """A tokenize function that counts its calls."""

    def __init__(self, tokenizer, max_length: int = 32):
        self.tokenizer, self.max_length, self.calls = tokenizer, max_length, 0

    def __call__(self, texts):
        self.calls += 1
        return [self.tokenizer(a, b, truncation=True, max_length=self.max_length)["input_ids"] for a, b in texts]


def lookup(cache_dir, tokenizer, texts, fn, max_length=32, version="v1"):
    return cached_token_ids(cache_dir, tokenizer, texts, fn, max_length=max_length, version=version)


def test_hit_returns_the_same_ids_without_tokenizing(tmp_path, tokenizer):
    fn = Counting(tokenizer)
    first = lookup(tmp_path, tokenizer, TEXTS, fn)
    second = lookup(tmp_path, tokenizer, TEXTS, fn)
    assert fn.calls == 1 and second == first == fn(TEXTS)
    assert len(list((tmp_path / "tokens").glob("*.npz"))) == 1


@pytest.mark.parametrize(
    "change",
    [
        {"texts": [TEXTS[0], ("Best pizza?", "Margherita, obviously!")]},
        {"max_length": 16},
        {"version": "v2"},
    ],
    ids=["text", "max_length", "template_version"],
)
def test_changed_input_misses(tmp_path, tokenizer, change):
    texts, max_length, version = change.get("texts", TEXTS), change.get("max_length", 32), change.get("version", "v1")
    fn = Counting(tokenizer, max_length)
    lookup(tmp_path, tokenizer, TEXTS, fn)
    lookup(tmp_path, tokenizer, texts, fn, max_length, version)
    assert fn.calls == 2


def test_modified_tokenizer_misses(tmp_path, tokenizer):
    other = AutoTokenizer.from_pretrained(resolve_backbone("minilm"))
    other.add_tokens(["purrfect"])
    assert tokenizer_fingerprint(other) != tokenizer_fingerprint(tokenizer)
    fn = Counting(tokenizer)
    lookup(tmp_path, tokenizer, TEXTS, fn)
    lookup(tmp_path, other, TEXTS, fn)
    assert fn.calls == 2


def test_disabled_and_damaged_caches_only_cost_time(tmp_path, tokenizer):
    fn = Counting(tokenizer)
    assert lookup("", tokenizer, TEXTS, fn) == lookup(None, tokenizer, TEXTS, fn)
    assert fn.calls == 2
    expected = lookup(tmp_path, tokenizer, TEXTS, fn)
    (entry,) = (tmp_path / "tokens").glob("*.npz")
    entry.write_bytes(b"not a numpy file")
    assert lookup(tmp_path, tokenizer, TEXTS, fn) == expected and fn.calls == 4
    assert lookup(tmp_path, tokenizer, TEXTS, fn) == expected and fn.calls == 4  # rewritten


def model(cache_dir, **overrides):
    cfg = ExperimentConfig()
    cfg.data.max_length, cfg.data.cache_dir = 48, str(cache_dir)
    cfg.lora.top_layers, cfg.lora.cache_frozen_prefix = 2, False
    for key, value in overrides.items():
        section, name = key.split("__")
        setattr(getattr(cfg, section), name, value)
    return build_reward_model(cfg)


def count_tokenizer_calls(monkeypatch, tokenizer) -> list:
    calls: list = []
    original = type(tokenizer).__call__

    def counted(self, *args, **kwargs):
        calls.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(tokenizer), "__call__", counted)
    return calls


def test_scalar_encode_through_the_cache(tmp_path, monkeypatch):
    cached, plain = model(tmp_path), model("")
    first = cached.encode(PAIRS)
    calls = count_tokenizer_calls(monkeypatch, cached.tokenizer)
    again, reference = cached.encode(PAIRS), plain.encode(PAIRS)
    assert len(calls) == len(PAIRS) * 2  # only the uncached model tokenized
    for a, b, c in zip(first.seqs, again.seqs, reference.seqs):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_selector_flips_are_per_pair_and_cached_encode_matches(tmp_path, stories_path, monkeypatch):
    backbone = {"model__backbone": str(stories_path), "model__head": "selector"}
    cached, plain = model(tmp_path, **backbone), model("", **backbone)
    forward, backward = cached.encode(PAIRS), cached.encode(PAIRS[::-1])
    assert forward.chosen_is_a.tolist() == backward.chosen_is_a.flip(0).tolist()
    assert forward.chosen_is_a.tolist() == [chosen_is_a(0, p) for p in PAIRS]
    assert 0 < int(forward.chosen_is_a.sum()) < len(PAIRS)
    calls = count_tokenizer_calls(monkeypatch, cached.tokenizer)
    again, reference = cached.encode(PAIRS), plain.encode(PAIRS)
    # only the uncached model tokenized (head, tail, prompt), and once more to find the end markers that tell
    # whether response A survived truncation (once per model)
    assert len(calls) == 3 * len(PAIRS) + 1
    assert torch.equal(again.chosen_is_a, reference.chosen_is_a)
    for a, b, c in zip(forward.seqs, again.seqs, reference.seqs):
        assert torch.equal(a, b) and torch.equal(a, c)
