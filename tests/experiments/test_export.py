"""A TRL conversational file end to end, then `fedpref export`: the client's model loads with peft and scores
exactly as inside fedpref."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from fedpref.cli import main

ROOT = Path(__file__).resolve().parents[2]
CONVERSATIONAL = ROOT / "tests" / "fixtures" / "trl_conversational.jsonl"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "run"
    args = [
        "run",
        "tiny",
        "--out",
        str(out),
        *("--set", "data.source='pairwise'", "--set", f"data.path='{CONVERSATIONAL}'"),
        *("--set", "data.val_pairs=2", "--set", "data.test_pairs=3", "--set", "data.cache_dir=''"),
        *("--set", "algorithm.methods=['FL']", "--set", "federation.rounds=1"),
        *("--set", "federation.clients_per_round=2", "--set", "personalization.steps=[0, 3]"),
    ]
    assert main(args) == 0
    return out


def _hf_rewards(backbone: torch.nn.Module, tokenizer, head: dict, pairs, max_length: int) -> torch.Tensor:
    """(N, 2) rewards of (chosen, rejected) the way fedpref_reward.json says, with plain transformers."""
    prompts = [p.prompt for p in pairs for _ in (0, 1)]
    responses = [r for p in pairs for r in (p.chosen, p.rejected)]
    enc = tokenizer(
        prompts, responses, truncation="longest_first", max_length=max_length, padding=True, return_tensors="pt"
    )
    with torch.no_grad():
        hidden = backbone(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).float()
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    return (pooled @ head["weight"].T + head["bias"]).view(-1, 2)


def test_conversational_run_and_export_load_with_peft(run_dir, tmp_path, capsys, monkeypatch):
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModel, AutoTokenizer

    from fedpref.experiments import export

    results = json.loads((run_dir / "results.json").read_text())
    per_client = results["methods"]["FL"]["personalization"]["per_client"]
    assert set(per_client) == {"alice", "bob", "carol", "dave"}  # one client per user of the TRL file

    replays = []  # the model `fedpref export` wrote, still in memory, to compare with

    real = export.personalized_model

    def replay(*args):
        replays.append(real(*args))
        return replays[-1]

    monkeypatch.setattr(export, "personalized_model", replay)
    out = tmp_path / "carol"
    assert main(["export", str(run_dir), "--method", "FL", "--client", "carol", "--out", str(out), "--merged"]) == 0
    described = json.loads((out / "fedpref_reward.json").read_text())
    assert described["head"] == "scalar" and described["client"] == "carol"
    assert described["test_accuracy"] == per_client["carol"][-1]  # the replay is the run's personalization

    (done,) = replays
    assert done.accuracies == per_client["carol"]
    model = done.model
    pairs = next(s for s in done.setup.splits if s.client_id == "carol").test
    with torch.no_grad():
        enc = model.encode(pairs)
        ours = model.rewards(enc.seqs).view(-1, 2)

    tokenizer = AutoTokenizer.from_pretrained(out)
    head = load_file(out / "reward_head.safetensors")
    base = AutoModel.from_pretrained(json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"])
    peft_model = PeftModel.from_pretrained(base, out).eval()
    theirs = _hf_rewards(peft_model, tokenizer, head, pairs, described["max_length"])
    torch.testing.assert_close(theirs, ours, atol=1e-5, rtol=0)
    margins = theirs[:, 0] - theirs[:, 1]
    torch.testing.assert_close(margins, model.margins(enc, torch.arange(len(pairs))).detach(), atol=1e-5, rtol=0)

    merged = AutoModel.from_pretrained(out / "merged").eval()
    torch.testing.assert_close(
        _hf_rewards(merged, tokenizer, head, pairs, described["max_length"]), ours, atol=1e-5, rtol=0
    )
    assert {"adapter_config.json", "adapter_model.safetensors", "tokenizer.json"} <= {p.name for p in out.iterdir()}

    assert main(["export", str(run_dir), "--method", "CL", "--client", "carol", "--out", str(tmp_path / "x")]) == 2
    assert "no method CL" in capsys.readouterr().err
    assert main(["export", str(run_dir), "--method", "FL", "--client", "zed", "--out", str(tmp_path / "y")]) == 2
    assert "no client zed" in capsys.readouterr().err


def _model(*overrides: str):
    from fedpref.config import load_config
    from fedpref.models.factory import build_reward_model

    cfg = load_config(ROOT / "src/fedpref/configs/quick/tiny.toml", ["data.cache_dir=''", *overrides])
    return build_reward_model(cfg)


def _pairs():
    from fedpref.data.pairs import PreferencePair

    return [PreferencePair(f"Once upon a time {i}", " a cat sat.", " the dog ran far away.", "c") for i in range(3)]


def test_scalar_head_on_a_causal_lm_exports_like_sequence_classification(stories_path, tmp_path):
    """model.head = 'scalar' on a causal LM: the last real token's hidden state, read by a linear head."""
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from fedpref.models.causal_scalar import CausalScalarRewardModel
    from fedpref.models.hf_export import save_reward_model

    model = _model(f"model.backbone='{stories_path}'", "model.head='scalar'", "lora.top_layers=0")
    assert isinstance(model, CausalScalarRewardModel)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:  # LoRA B starts at zero: give the adapters an effect to carry
                p.add_(0.01 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    pairs = _pairs()
    enc = model.encode(pairs)
    with torch.no_grad():
        ours = model.rewards(enc.seqs)
    save_reward_model(model, tmp_path / "out", {"client": "c"})
    base = AutoModelForCausalLM.from_pretrained(stories_path)
    lm = PeftModel.from_pretrained(base, tmp_path / "out").eval()
    head = load_file(tmp_path / "out" / "reward_head.safetensors")
    theirs = []
    with torch.no_grad():
        for p in pairs:
            for r in (p.chosen, p.rejected):
                ids = torch.tensor([model.tokenizer(p.prompt + r)["input_ids"]])
                last = lm(input_ids=ids, output_hidden_states=True).hidden_states[-1][0, -1]
                theirs.append(last @ head["weight"][0] + head["bias"][0])
    torch.testing.assert_close(torch.stack(theirs), ours, atol=1e-5, rtol=0)


def test_backbone_dtype(stories_path):
    """model.dtype loads the frozen backbone in bf16; LoRA and the head stay fp32 and train."""
    for backbone in ("minilm", str(stories_path)):
        model = _model(f"model.backbone='{backbone}'", "model.dtype='bf16'")
        frozen = {p.dtype for p in model.parameters() if not p.requires_grad}
        trained = {p.dtype for p in model.parameters() if p.requires_grad}
        assert frozen == {torch.bfloat16} and trained == {torch.float32}, backbone
        enc = model.encode(_pairs())
        margins = model.margins(enc, torch.arange(3))
        assert margins.dtype == torch.float32 and torch.isfinite(margins).all()
        margins.sum().backward()
