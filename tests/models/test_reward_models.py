"""Mechanics on real small models: only adapters and head train, the cache is exact, the selector works."""

import pytest
import torch

from fedpref.client.trainer import LocalTrainer, OptimConfig
from fedpref.config import ExperimentConfig
from fedpref.data.pairs import PreferencePair
from fedpref.errors import ConfigError, FedprefError
from fedpref.models.adapters import lora_layer_index, trainable_state
from fedpref.models.factory import build_reward_model

PAIRS = [
    PreferencePair(
        f"Question {i}: why is the sky blue?",
        f"Because light bounces around, friend number {i}!",
        f"Rayleigh scattering of shorter wavelengths, per case {i}, dominates.",
        "c0",
    )
    for i in range(10)
]


def config(**lora) -> ExperimentConfig:
    cfg = ExperimentConfig()
    cfg.data.max_length = 48
    for k, v in lora.items():
        setattr(cfg.lora, k, v)
    return cfg


@pytest.fixture(scope="module")
def minilm_top2():
    return build_reward_model(config(top_layers=2))


def frozen_state(model):
    return {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}


def test_only_lora_and_head_are_trainable(minilm_top2):
    names = list(trainable_state(minilm_top2))
    assert names and all("lora_" in n or n.startswith("head.") for n in names)
    layers = {lora_layer_index(n) for n in names if "lora_" in n}
    assert layers == {4, 5}  # top 2 of MiniLM's 6 layers


def test_training_changes_adapters_not_the_frozen_base(minilm_top2):
    model = minilm_top2
    before_frozen, before = frozen_state(model), trainable_state(model)
    trainer = LocalTrainer(model, OptimConfig(lr=1e-2, batch_size=4))
    after, _ = trainer.train(before, model.encode(PAIRS), steps=3, generator=torch.Generator().manual_seed(0))
    lora_b = [n for n in after if "lora_B" in n]
    assert any(not torch.equal(after[n], before[n]) for n in lora_b)
    assert not torch.equal(after["head.weight"], before["head.weight"])
    for n, p in frozen_state(model).items():
        assert torch.equal(p, before_frozen[n]), n


def test_cached_prefix_equals_full_forward(minilm_top2):
    cached = minilm_top2
    plain = build_reward_model(config(top_layers=2, cache_frozen_prefix=False))
    # give the adapters non-zero weights so the adapted layers matter, same in both models
    state = {
        k: v + 0.01 * torch.randn(v.shape, generator=torch.Generator().manual_seed(1))
        for k, v in trainable_state(cached).items()
    }
    from fedpref.models.adapters import load_trainable_state

    load_trainable_state(cached, state)
    load_trainable_state(plain, state)
    enc_cached, enc_plain = cached.encode(PAIRS), plain.encode(PAIRS)
    assert enc_cached.seqs[0].dim() == 2 and enc_plain.seqs[0].dim() == 1
    index = torch.arange(len(PAIRS))
    with torch.no_grad():
        a, b = cached.margins(enc_cached, index), plain.margins(enc_plain, index)
    assert torch.allclose(a, b, atol=1e-5, rtol=0), (a - b).abs().max()


def test_top_layers_beyond_depth_is_a_config_error():
    with pytest.raises(ConfigError, match="top_layers"):
        build_reward_model(config(top_layers=9))


def test_unknown_backbone_is_a_clear_error(tmp_path):
    cfg = config()
    cfg.model.backbone = str(tmp_path / "missing-model")
    with pytest.raises(FedprefError, match="cannot load"):
        build_reward_model(cfg)


def test_selector_on_a_real_causal_lm(stories_path):
    cfg = config()
    cfg.model.backbone, cfg.model.head, cfg.data.max_length = str(stories_path), "selector", 96
    model = build_reward_model(cfg)
    names = list(trainable_state(model))
    assert names and all("lora_" in n for n in names)
    enc = model.encode(PAIRS)
    assert enc.chosen_is_a is not None and 0 < int(enc.chosen_is_a.sum()) < len(PAIRS)
    trainer = LocalTrainer(model, OptimConfig(lr=1e-2, batch_size=5))
    start = trainer.evaluate(None, enc).loss
    state, _ = trainer.train(trainable_state(model), enc, steps=15, generator=torch.Generator().manual_seed(0))
    assert trainer.evaluate(state, enc).loss < start


def test_selector_margin_is_the_letter_logit_gap(stories_path):
    cfg = config()
    cfg.model.backbone, cfg.model.head = str(stories_path), "selector"
    model = build_reward_model(cfg)
    enc = model.encode(PAIRS[:2])
    with torch.no_grad():
        m = model.margins(enc, torch.tensor([0]))
        full = model.lm(input_ids=enc.seqs[0][None]).logits[0, -1]
    a, b = model.letters
    expected = full[a] - full[b] if enc.chosen_is_a[0] else full[b] - full[a]
    assert torch.allclose(m[0], expected, atol=1e-4)


def _tokenizerless_causal_lm(folder):
    """A tiny Qwen2 with random weights and no tokenizer files, as benchmarks/paper_models.py writes one."""
    from transformers import AutoConfig, AutoModelForCausalLM

    small = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2)
    config = AutoConfig.for_model("qwen2", vocab_size=30522, num_key_value_heads=1, **small)
    config.architectures = ["Qwen2ForCausalLM"]
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    return str(folder)


def test_model_tokenizer_replaces_a_missing_one(tmp_path):
    cfg = config()
    cfg.model.backbone, cfg.model.head = _tokenizerless_causal_lm(tmp_path / "qwen"), "selector"
    with pytest.raises(FedprefError, match="tokenizer is empty"):  # the folder has no tokenizer of its own
        build_reward_model(cfg)
    cfg.model.tokenizer = "minilm"
    model = build_reward_model(cfg)
    assert model.tokenizer.vocab_size == 30522 and model.tokenizer("blue sky")["input_ids"][1:3] == [2630, 3712]
    assert model.letters == [1037, 1038]  # MiniLM's ids of "a" and "b" (it lower-cases)
    margins = model.margins(model.encode(PAIRS[:3]), torch.arange(3))
    assert margins.shape == (3,) and torch.isfinite(margins).all()


def test_head_mismatch_is_a_config_error():
    cfg = config()  # the MiniLM encoder: no LM head for an A/B selector ('scalar' fits causal LMs too now)
    cfg.model.head = "selector"
    with pytest.raises(ConfigError, match="does not fit"):
        build_reward_model(cfg)


def test_head_init_scale_multiplies_only_the_initial_head_weights():
    cfg = config(top_layers=1)
    plain = build_reward_model(cfg)  # not the shared fixture: other tests train it
    cfg.model.head_init_scale = 10.0
    scaled = build_reward_model(cfg)
    assert torch.equal(scaled.head.weight, 10.0 * plain.head.weight)
    assert torch.equal(scaled.head.bias, plain.head.bias)
    enc = scaled.encode(PAIRS[:4])
    with torch.no_grad():
        index = torch.arange(4)
        assert torch.allclose(scaled.margins(enc, index), 10.0 * plain.margins(enc, index), atol=1e-5)


@pytest.mark.parametrize("cache", [True, False])
def test_packed_sequences_equal_padded_margins_and_gradients(cache):
    packed = build_reward_model(config(top_layers=2, cache_frozen_prefix=cache))
    padded = build_reward_model(config(top_layers=2, cache_frozen_prefix=cache, pack_sequences=False))
    enc = packed.encode(PAIRS)
    assert len({s.shape[0] for s in enc.seqs}) > 1  # lengths differ, so padding happens
    enc_padded = padded.encode(PAIRS)  # with the cache: the frozen prefix computed padded
    for s, t in zip(enc.seqs, enc_padded.seqs):
        assert torch.allclose(s.float(), t.float(), atol=1e-5)
    index = torch.arange(len(PAIRS))
    grads = []
    for model, data in ((packed, enc), (padded, enc_padded)):
        margins = model.margins(data, index)
        margins.sum().backward()
        grads.append((margins.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}))
    (a, grad_a), (b, grad_b) = grads
    assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
    for name in grad_a:
        assert torch.allclose(grad_a[name], grad_b[name], atol=1e-5), name


def test_bf16_evaluation_is_close_to_fp32(minilm_top2):
    enc = minilm_top2.encode(PAIRS)
    state = trainable_state(minilm_top2)
    fp32 = LocalTrainer(minilm_top2, OptimConfig(lr=1e-3, batch_size=4)).evaluate(state, enc)
    bf16 = LocalTrainer(minilm_top2, OptimConfig(lr=1e-3, batch_size=4, precision="bf16")).evaluate(state, enc)
    assert bf16.margins.dtype == torch.float32
    # bf16 keeps 8 bits of mantissa: a margin (a difference of two rewards) is off by about 1% of the
    # rewards' scale, not by float rounding
    with torch.no_grad():
        scale = float(minilm_top2.rewards(enc.seqs).abs().max())
    assert torch.allclose(bf16.margins, fp32.margins, atol=0.02 * scale), (bf16.margins - fp32.margins, scale)
    assert not torch.equal(bf16.margins, fp32.margins)  # the autocast really ran


def test_bf16_frozen_trains_adapters_only_and_stays_close_to_fp32(minilm_top2):
    cfg = config(top_layers=2, dropout=0.0)  # minilm_top2 has dropout, off in evaluation: the same function
    cfg.train.precision = "bf16-frozen"
    model = build_reward_model(cfg)
    assert model.bf16_bases is not None and minilm_top2.bf16_bases is None
    enc, state = model.encode(PAIRS), trainable_state(minilm_top2)
    fp32 = LocalTrainer(minilm_top2, OptimConfig(lr=1e-3, batch_size=4)).evaluate(state, enc)
    trainer = LocalTrainer(model, OptimConfig(lr=1e-2, batch_size=4, precision="bf16-frozen"))
    bf16 = trainer.evaluate(state, enc)
    with torch.no_grad():
        scale = float(minilm_top2.rewards(enc.seqs).abs().max())
    assert torch.allclose(bf16.margins, fp32.margins, atol=0.02 * scale), (bf16.margins - fp32.margins, scale)
    assert not torch.equal(bf16.margins, fp32.margins)  # the bf16 products really ran
    before_frozen = frozen_state(model)
    after, _ = trainer.train(state, enc, steps=3, generator=torch.Generator().manual_seed(0))
    assert any(not torch.equal(after[n], state[n]) for n in after if "lora_B" in n)
    for n, p in frozen_state(model).items():
        assert p.dtype == before_frozen[n].dtype and torch.equal(p, before_frozen[n]), n


def test_bf16_frozen_on_a_causal_lm_is_a_config_error(stories_path):
    cfg = config(dropout=0.0)
    cfg.model.backbone, cfg.model.head = str(stories_path), "selector"
    cfg.train.precision = "bf16-frozen"
    with pytest.raises(ConfigError, match="'bf16-frozen' is for encoders"):
        build_reward_model(cfg)


def test_gradient_checkpointing_recomputes_layers_with_the_same_gradients(stories_path):
    grads, calls = [], []
    for checkpointing in (False, True):
        cfg = config()
        cfg.model.backbone, cfg.model.head = str(stories_path), "selector"
        cfg.train.gradient_checkpointing = checkpointing
        model = build_reward_model(cfg)
        layer = model.lm.get_base_model().model.layers[0]
        count = []  # the layer's own hooks stay outside its checkpoint, its attention's run again
        layer.self_attn.register_forward_hook(lambda *_, count=count: count.append(1))
        model.train()
        margins = model.margins(model.encode(PAIRS), torch.arange(4))
        margins.sum().backward()
        model.eval()
        calls.append(len(count))
        grads.append({n: p.grad for n, p in model.named_parameters() if p.requires_grad})
        assert not layer.training  # eval mode again: evaluation never recomputes
    assert calls == [1, 2]  # the checkpointed layer ran again in the backward pass
    for name, grad in grads[0].items():
        assert torch.allclose(grad, grads[1][name], atol=1e-6), name


def test_gradient_checkpointing_on_an_encoder_is_a_config_error():
    cfg = config()
    cfg.train.gradient_checkpointing = True
    with pytest.raises(ConfigError, match="needs a causal-LM backbone"):
        build_reward_model(cfg)


def test_auto_device_and_precision_mean_cpu_and_fp32_without_a_gpu(minilm_top2):
    from fedpref.client.trainer import bf16_autocast
    from fedpref.models.factory import resolve_device

    if not torch.cuda.is_available() and not torch.backends.mps.is_available():
        assert resolve_device("auto") == "cpu"
    assert resolve_device("cuda:1") == "cuda:1"
    assert [bf16_autocast("auto", d) for d in ("cpu", "cuda", "mps")] == [False, True, False]
    assert bf16_autocast("bf16", "cpu") and not bf16_autocast("fp32", "cuda")


@pytest.mark.slow
def test_compiled_decoder_layers_give_the_same_margins(stories_path):
    margins = []
    for compiled in (False, True):
        cfg = config()
        cfg.model.backbone, cfg.model.head, cfg.data.max_length = str(stories_path), "selector", 400
        cfg.train.compile = compiled
        model = build_reward_model(cfg)
        enc = model.encode(PAIRS)
        out = model.margins(enc, torch.arange(4))
        out.sum().backward()  # the compiled backward runs too
        margins.append(out.detach())
    assert torch.allclose(margins[0], margins[1], atol=1e-5), (margins[0] - margins[1]).abs().max()


def test_compile_on_an_encoder_wraps_the_packed_layer_only_when_asked(minilm_top2):
    assert minilm_top2.compiled_layer is None
    cfg = config(top_layers=2)
    cfg.train.compile = True
    model = build_reward_model(cfg)  # torch.compile is lazy: nothing compiles before the first forward
    assert model.compiled_layer is not None


@pytest.mark.slow
@pytest.mark.parametrize("pack", [True, False])
def test_compiled_encoder_layers_give_the_same_margins_and_gradients(pack):
    results = []
    for compiled in (False, True):
        cfg = config(top_layers=2, pack_sequences=pack)
        cfg.train.compile = compiled
        model = build_reward_model(cfg)
        out = model.margins(model.encode(PAIRS), torch.arange(len(PAIRS)))
        out.sum().backward()  # the compiled backward runs too
        grads = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
        results.append((out.detach(), grads))
    (plain, plain_grads), (compiled, compiled_grads) = results
    assert torch.allclose(plain, compiled, atol=1e-5), (plain - compiled).abs().max()
    for name, grad in plain_grads.items():
        assert torch.allclose(grad, compiled_grads[name], atol=1e-5), name
