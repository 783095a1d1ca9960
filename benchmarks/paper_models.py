"""Paper-size causal selectors (Qwen2-0.5B, Gemma-2B) with random weights, built from their published configs.

No download: `model_configs/<name>.json` holds the published `config.json` values, `from_config` builds the
architecture with seeded random weights. Speed does not depend on the weights' values. The token ids come
from the embedded MiniLM's WordPiece tokenizer (30,522 ids, all inside both vocabularies): its token counts
for English text are close to those of the papers' BPE tokenizers, unlike a small-vocabulary tokenizer's
(stories260K's 512 pieces make a prompt about 2.5 times longer).

As a script it writes such a model as a backbone folder, so that `fedpref run` and `fedpref estimate` time a
paper-size run where no weights can be downloaded (docs/speed.md, On a GPU). The folder has no tokenizer (MiniLM's
saved beside a Qwen2 config would load as a Qwen2 tokenizer): name MiniLM's as the run's.

    python benchmarks/paper_models.py qwen2-0.5b /tmp/qwen2-0.5b-random
    fedpref estimate fedgd_imbalanced_qwen2 --set "model.backbone='/tmp/qwen2-0.5b-random'" \
        --set "model.tokenizer='minilm'" --set "model.head='selector'"
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from fedpref.config import LoraConfig
from fedpref.models.backbone import resolve_backbone
from fedpref.models.selector_reward import SelectorRewardModel

CONFIGS = Path(__file__).resolve().parent / "model_configs"
PAPER_MODELS = sorted(p.stem for p in CONFIGS.glob("*.json"))


def paper_config(name: str, attn: str = "sdpa"):
    """The published architecture `name` (a file stem in model_configs/) as a transformers config."""
    values = {k: v for k, v in json.loads((CONFIGS / f"{name}.json").read_text()).items() if not k.startswith("_")}
    config = AutoConfig.for_model(values.pop("model_type"), **values)
    config._attn_implementation = attn
    return config


def build_paper_selector(
    name: str,
    lora: LoraConfig,
    max_length: int,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    attn: str = "sdpa",
) -> SelectorRewardModel:
    """fedpref's A/B selector on a randomly initialized `name` (frozen, eval mode), LoRA as `lora`."""
    torch.manual_seed(seed)
    backbone = AutoModelForCausalLM.from_config(paper_config(name, attn), dtype=dtype)
    backbone.requires_grad_(False)
    backbone.eval()
    tokenizer = AutoTokenizer.from_pretrained(resolve_backbone("minilm"))
    tokenizer.model_max_length = max_length  # MiniLM's own 512 is its position limit, not this model's
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.unk_token or tokenizer.eos_token
    torch.manual_seed(seed)  # peft draws LoRA A from the global generator
    return SelectorRewardModel(backbone, tokenizer, lora, max_length, torch.Generator().manual_seed(seed))


def save_random_backbone(name: str, out: Path, seed: int = 0) -> Path:
    """Write `name` with seeded random weights (bf16 on disk) to the folder `out`."""
    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(paper_config(name), dtype=torch.bfloat16).save_pretrained(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="Write a paper-size causal LM with random weights as a folder.")
    parser.add_argument("name", choices=PAPER_MODELS)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    print(f"wrote {save_random_backbone(args.name, args.out)}")


if __name__ == "__main__":
    main()
