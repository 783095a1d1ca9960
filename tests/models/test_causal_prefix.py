"""The causal frozen-prefix cache: the adapted top layers on cached hidden states equal the full forward."""

import pytest
import torch

from fedpref.config import ExperimentConfig
from fedpref.data.pairs import PreferencePair
from fedpref.models.factory import build_reward_model

PAIRS = [
    PreferencePair(f"Tell me about cat number {i}.", f"Cat {i} is soft and warm.", f"No {'cats ' * i}today.", "c0")
    for i in range(6)
]


def selector(stories_path, cache: bool, head: str = "selector"):
    cfg = ExperimentConfig()
    cfg.model.backbone, cfg.model.head, cfg.data.max_length = str(stories_path), head, 400
    cfg.lora.top_layers, cfg.lora.cache_frozen_prefix = 2, cache
    return build_reward_model(cfg)


def test_cached_prefix_gives_the_full_forwards_margins_and_gradients(stories_path):
    results = []
    for cache in (True, False):
        model = selector(stories_path, cache)
        enc = model.encode(PAIRS)
        assert (enc.seqs[0].dim() == 2) is cache  # (L, H) hidden states only with the cache
        assert len({len(s) for s in enc.seqs}) > 1  # the lengths differ, so padding happens
        margins = model.margins(enc, torch.arange(len(PAIRS)))
        margins.sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
        results.append((margins.detach(), grads, model.response_ends(enc)))
    (cached, cached_grads, cached_ends), (full, full_grads, full_ends) = results
    assert torch.allclose(cached, full, atol=1e-5), (cached - full).abs().max()
    for name, grad in full_grads.items():
        assert torch.allclose(cached_grads[name], grad, atol=1e-5), name
    assert torch.equal(cached_ends, full_ends)  # the response spans are found on the token ids


def test_a_decoder_that_the_split_forward_does_not_reproduce_runs_whole(stories_path, caplog):
    model = selector(stories_path, cache=True)
    original = model.prefix.run_top
    model.prefix.run_top = lambda hidden, mask: original(hidden * 2.0, mask)  # e.g. Gemma's embedding scale
    enc = model.encode(PAIRS)
    assert not model.prefix.exact and enc.seqs[0].dim() == 1
    assert "frozen-prefix cache is off" in caplog.text
    full = selector(stories_path, cache=False)
    index = torch.arange(len(PAIRS))
    assert torch.allclose(model.margins(enc, index), full.margins(full.encode(PAIRS), index), atol=1e-6)


@pytest.mark.parametrize("top_layers", [0, 5])
def test_no_cache_without_frozen_layers(stories_path, top_layers):
    cfg = ExperimentConfig()
    cfg.model.backbone, cfg.model.head = str(stories_path), "selector"
    cfg.lora.top_layers = top_layers  # 0: every layer adapted; 5: all 5 of stories260K's layers
    assert build_reward_model(cfg).prefix is None


def test_the_causal_scalar_head_reads_the_same_last_token_through_the_cache(stories_path):
    margins = []
    for cache in (True, False):
        model = selector(stories_path, cache, head="scalar")
        enc = model.encode(PAIRS)
        assert (enc.seqs[0].dim() == 2) is cache
        margins.append(model.margins(enc, torch.arange(len(PAIRS))).detach())
    assert torch.allclose(margins[0], margins[1], atol=1e-5), (margins[0] - margins[1]).abs().max()


def test_the_frozen_prefix_is_read_back_from_disk_exactly(stories_path, tmp_path):
    def build(top_layers: int = 2):
        cfg = ExperimentConfig()
        cfg.model.backbone, cfg.model.head, cfg.data.max_length = str(stories_path), "selector", 400
        cfg.lora.top_layers, cfg.data.cache_dir, cfg.data.prefix_cache_mb = top_layers, str(tmp_path), 1
        return build_reward_model(cfg)

    cold = build().encode(PAIRS)
    entries = list((tmp_path / "prefix").glob("*.pt"))
    assert len(entries) == 1  # one entry per encode call
    warm_model = build()
    computed, original = [], warm_model.prefix.frozen_prefix
    warm_model.prefix.frozen_prefix = lambda ids, device: computed.append(len(ids)) or original(ids, device)
    warm = warm_model.encode(PAIRS)
    assert computed == [1]  # the one-sequence exactness check only: the states themselves come from disk
    assert all(torch.equal(a, b) for a, b in zip(cold.seqs, warm.seqs, strict=True))
    build(top_layers=3).encode(PAIRS)  # another cut, another fingerprint: a second entry
    assert len(list((tmp_path / "prefix").glob("*.pt"))) == 2


def test_no_disk_entry_without_a_cache_dir_or_over_the_size_limit(stories_path, tmp_path):
    cfg = ExperimentConfig()
    cfg.model.backbone, cfg.model.head, cfg.data.max_length = str(stories_path), "selector", 400
    cfg.lora.top_layers, cfg.data.cache_dir, cfg.data.prefix_cache_mb = 2, "", 64
    assert build_reward_model(cfg).prefix.store is None
    cfg.data.cache_dir, cfg.data.prefix_cache_mb = str(tmp_path), 0
    assert build_reward_model(cfg).prefix.store is None
