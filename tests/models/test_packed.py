"""Packed BERT layers: hand-checked indices, and equality with HF's padded BertLayer."""

import torch
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertLayer

from fedpref.models.packed import Packing, packed_bert_layer


def test_packing_indices_by_hand():
    p = Packing.of([2, 3, 1])  # longest 3: the padded grid is 3 x 3
    assert p.grid_index.tolist() == [0, 1, 3, 4, 5, 6]
    assert p.seq_index.tolist() == [0, 0, 1, 1, 1, 2]
    assert p.key_mask[:, 0, 0].tolist() == [[True, True, False], [True, True, True], [True, False, False]]


def test_grid_round_trip_and_mean():
    p = Packing.of([2, 1])
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])  # (T = 3, H = 2)
    grid = p.to_grid(x)
    assert grid.tolist() == [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [0.0, 0.0]]]
    assert torch.equal(p.from_grid(grid), x)
    assert p.mean(x).tolist() == [[2.0, 3.0], [5.0, 6.0]]


def _padded(seqs):
    longest = max(len(s) for s in seqs)
    grid = torch.zeros(len(seqs), longest, seqs[0].shape[-1])
    for i, s in enumerate(seqs):
        grid[i, : len(s)] = s
    return grid


def test_packed_layer_equals_padded_bert_layer_with_gradients():
    cfg = BertConfig(hidden_size=16, num_attention_heads=4, intermediate_size=32, attn_implementation="sdpa")
    layer = BertLayer(cfg).eval()
    lengths = [5, 2, 4]
    gen = torch.Generator().manual_seed(0)
    seqs = [torch.randn(n, 16, generator=gen) for n in lengths]
    p = Packing.of(lengths)

    packed = packed_bert_layer(layer, torch.cat(seqs), p)
    packed.sum().backward()
    grad_packed = layer.attention.self.query.weight.grad.clone()
    layer.zero_grad()

    key_mask = p.key_mask.expand(-1, 1, max(lengths), -1)  # (N, 1, L, L): HF's boolean sdpa mask
    padded = layer(_padded(seqs), key_mask)
    real = torch.cat([padded[i, :n] for i, n in enumerate(lengths)])
    real.sum().backward()
    assert torch.allclose(packed, real, atol=1e-5), (packed - real).abs().max()
    assert torch.allclose(grad_packed, layer.attention.self.query.weight.grad, atol=1e-5)
