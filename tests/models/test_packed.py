"""Packed BERT layers: hand-checked indices, equality with HF's padded BertLayer, bf16 frozen products."""

import torch
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertLayer

from fedpref.models.frozen_bf16 import Bf16Bases
from fedpref.models.packed import Packing, _plain_lora, fused_linear, packed_bert_layer


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


def _lora_block(dropout: float) -> torch.nn.Module:
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    block = torch.nn.ModuleDict({"q": torch.nn.Linear(6, 4), "k": torch.nn.Linear(6, 4), "v": torch.nn.Linear(6, 5)})
    wrapped = get_peft_model(block, LoraConfig(r=2, lora_alpha=6, lora_dropout=dropout, target_modules=["q", "k"]))
    for name, p in wrapped.named_parameters():
        if "lora_B" in name:  # B starts at zero; give the update a value so it is checked
            torch.nn.init.normal_(p)
    return wrapped.base_model.model


def test_fused_linear_equals_the_modules_forward_and_gradients():
    block = _lora_block(dropout=0.0)
    x = torch.randn(7, 6, generator=torch.Generator().manual_seed(1))
    modules = [block["q"], block["k"]]
    assert all(_plain_lora(m) is not None for m in modules)

    def grads_of(out):
        (out * torch.arange(out.numel()).view_as(out)).sum().backward()
        grads = {n: p.grad.clone() for n, p in block.named_parameters() if p.requires_grad}
        block.zero_grad()
        return grads

    fused = fused_linear(modules, x)
    grad_fused = grads_of(fused)
    plain = torch.cat([m(x) for m in modules], dim=-1)
    grad_plain = grads_of(plain)
    assert fused.shape == (7, 8)
    assert torch.allclose(fused, plain, atol=1e-5)
    assert grad_fused.keys() == grad_plain.keys() and len(grad_fused) == 4  # A and B of q and k
    for name in grad_fused:
        assert torch.allclose(grad_fused[name], grad_plain[name], atol=1e-4), name


def test_fused_linear_falls_back_to_the_modules_forward():
    dropped = _lora_block(dropout=0.5)
    assert _plain_lora(dropped["q"]) is None  # dropout must draw its own mask per module
    plain = _lora_block(dropout=0.0)
    assert _plain_lora(plain["v"]) is None  # not adapted
    x = torch.randn(3, 6)
    assert torch.equal(fused_linear([plain["q"], plain["v"]], x), torch.cat([plain["q"](x), plain["v"](x)], -1))


def test_fused_linear_under_bf16_autocast_matches_the_modules_forward():
    # autocast leaves in-place ops alone: the LoRA product must be cast to the base output's bf16 (a CUDA run
    # with train.precision 'auto' failed here before)
    block = _lora_block(dropout=0.0)
    x = torch.randn(7, 6, generator=torch.Generator().manual_seed(1))
    modules = [block["q"], block["k"]]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused = fused_linear(modules, x)
        plain = torch.cat([m(x) for m in modules], dim=-1)
    fused.float().sum().backward()  # gradients reach the fp32 LoRA weights through the casts
    assert fused.dtype == plain.dtype == torch.bfloat16
    assert torch.allclose(fused.float(), plain.float(), atol=0.1, rtol=0.02)
    assert block["q"].lora_B["default"].weight.grad is not None


def test_fused_linear_with_bf16_bases_is_close_to_fp32_with_its_lora_gradients():
    block = _lora_block(dropout=0.0)
    x = torch.randn(7, 6, generator=torch.Generator().manual_seed(1))
    modules = [block["q"], block["k"]]
    bases = Bf16Bases()
    outs, grads = [], []
    for bf16_bases in (bases, None):
        out = fused_linear(modules, x, bf16_bases)
        (out * torch.arange(out.numel()).view_as(out)).sum().backward()
        outs.append(out.detach())
        grads.append({n: p.grad.clone() for n, p in block.named_parameters() if p.requires_grad})
        block.zero_grad()
    (bf16, fp32), (grad_bf16, grad_fp32) = outs, grads
    assert bf16.dtype == torch.float32 and not torch.equal(bf16, fp32)
    assert torch.allclose(bf16, fp32, rtol=0.02, atol=0.02)
    assert grad_bf16.keys() == grad_fp32.keys() and len(grad_bf16) == 4  # A and B of q and k
    for name in grad_bf16:
        assert torch.allclose(grad_bf16[name], grad_fp32[name], rtol=0.02, atol=0.05), name
    parts = [_plain_lora(m) for m in modules]
    weights, biases = [p[0] for p in parts], [p[1] for p in parts]
    stacked, bias = bases.stacked(tuple(weights), tuple(biases))
    assert stacked.dtype == torch.bfloat16 and stacked.shape == (8, 6) and bias.dtype == torch.float32
    assert bases.stacked(tuple(weights), tuple(biases))[0] is stacked  # cast once, not per call
    assert all(w.dtype == torch.float32 for w in weights)  # the base itself stays as loaded


def test_bf16_bases_cast_during_evaluation_serve_a_later_backward():
    # evaluation runs under inference_mode; a bf16 copy made there once failed training's backward
    block = _lora_block(dropout=0.0)
    x = torch.randn(7, 6)
    bases = Bf16Bases()
    with torch.inference_mode():
        fused_linear([block["q"]], x, bases)
    fused_linear([block["q"]], x, bases).sum().backward()
    assert block["q"].lora_A["default"].weight.grad is not None
