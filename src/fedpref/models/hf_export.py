"""Write a reward model as a PEFT `save_pretrained` folder, its head as safetensors and how to score with them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from torch import nn

from fedpref.embedded import CONVERTED_FILE

HEAD_FILE = "reward_head.safetensors"
SCORING_FILE = "fedpref_reward.json"
FORMAT = "fedpref-reward-1"


def peft_part(model: nn.Module) -> nn.Module:
    """The PeftModel inside a fedpref reward model (the LoRA-wrapped backbone)."""
    for name in ("encoder", "lm"):
        if hasattr(model, name):
            return getattr(model, name)
    raise TypeError(f"{type(model).__name__} has no PEFT backbone")


def scoring(model: nn.Module) -> dict[str, Any]:
    """How the exported files give a reward: what a user's own code must do to match fedpref."""
    kind = type(model).__name__
    if kind == "ScalarRewardModel":
        return {
            "head": "scalar",
            "backbone_class": "AutoModel",
            "inputs": "tokenizer(prompt, response, truncation='longest_first', max_length=max_length)",
            "pooling": "mean of the last hidden states over the attention mask",
            "reward": "pooled @ weight.T + bias",
        }
    if kind == "CausalScalarRewardModel":
        return {
            "head": "scalar",
            "backbone_class": "AutoModelForCausalLM",
            "inputs": "the last max_length ids of tokenizer(prompt + response)['input_ids'], right-padded",
            "pooling": "the last non-padding token's final hidden state (as AutoModelForSequenceClassification)",
            "reward": "hidden @ weight.T + bias",
        }
    if kind == "SelectorRewardModel":
        return {
            "head": "selector",
            "backbone_class": "AutoModelForCausalLM",
            "inputs": "fedpref.models.selector_reward TEMPLATE_HEAD + TEMPLATE_TAIL with both responses",
            "reward": "logits of ' A' / ' B' at the last position",
        }
    raise TypeError(f"cannot describe {kind}")


def save_reward_model(model: nn.Module, out: Path, info: dict[str, Any], merged: bool = False) -> list[Path]:
    """`out`: the PEFT adapter folder (load with `PeftModel.from_pretrained(base, out)`), the tokenizer, the head
    (`HEAD_FILE`) and `SCORING_FILE`; with `merged`, also `out/merged`, the backbone with LoRA merged in.
    The merge is made on a copy (the backbone is in memory twice for a moment), so `model` still scores after."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    peft_model = peft_part(model)
    peft_model.save_pretrained(str(out))
    model.tokenizer.save_pretrained(str(out))
    written = [out / "adapter_config.json", out / "adapter_model.safetensors"]
    head = getattr(model, "head", None)
    if head is not None:
        tensors = {"weight": head.weight.detach().float().cpu(), "bias": head.bias.detach().float().cpu()}
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(out / HEAD_FILE))
        written.append(out / HEAD_FILE)
    described = {"format": FORMAT, **scoring(model), "max_length": model.max_length, **info}
    described["head_file"] = HEAD_FILE if head is not None else None
    described["merged"] = "merged" if merged else None
    converted = Path(peft_model.peft_config["default"].base_model_name_or_path or "", CONVERTED_FILE)
    if converted.is_file():  # a backbone converted from GGUF (model.backbone 'smollm2'): which file it came from
        described["base_weights"] = json.loads(converted.read_text(encoding="utf-8"))
    (out / SCORING_FILE).write_text(json.dumps(described, indent=2) + "\n", encoding="utf-8")
    written.append(out / SCORING_FILE)
    if merged:
        full = copy.deepcopy(peft_model).merge_and_unload()
        full.save_pretrained(str(out / "merged"))
        model.tokenizer.save_pretrained(str(out / "merged"))
        written.append(out / "merged")
    return written
