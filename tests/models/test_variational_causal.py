"""The latent-conditioned selector on causal LMs (paper 001, Sec. 4.1, 4.4): response spans, embeddings, logits."""

import dataclasses
import json

import pytest
import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from fedpref.cli import main
from fedpref.client.variational import LossSettings, local_loss
from fedpref.config import ExperimentConfig, LoraConfig, VariationalConfig, VPADiagnosisConfig
from fedpref.data.pairs import PreferencePair
from fedpref.errors import ConfigError
from fedpref.models.adapters import load_trainable_state, trainable_state
from fedpref.models.encoded import EncodedPairs
from fedpref.models.factory import build_reward_model
from fedpref.models.selector_reward import (
    END_MARKERS,
    TEMPLATE_HEAD,
    TEMPLATE_TAIL,
    SelectorRewardModel,
    marker_ids,
)
from fedpref.models.variational import VariationalSelector, VariationalSpec, position_flags

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # peft on a directly built Llama
# The paper's literal reading of z in training (the sampled z of Eq. 17), as these tests were written for.
OPTIONS = VariationalConfig(latent_dim=8, feature_dim=16, sigma_max=0.5, selector_reads="sample")
SPEC = VariationalSpec.from_config(OPTIONS, VPADiagnosisConfig(), seed=0)
LOSS = LossSettings.from_config(OPTIONS, VPADiagnosisConfig(), orthogonal=True)
# Responses ending in punctuation, a newline, trailing spaces and a word: the span ends must skip only
# the whitespace between a response and the next marker.
ENDINGS = ("friend {i}!", "case {i}.\n", "number {i}  ", "plainly {i}", "done {i}?\n\n")
PAIRS = [
    PreferencePair(
        f"Question {i}: why is the sky blue?",
        "Because light bounces around, " + ENDINGS[i % 5].format(i=i),
        "Rayleigh scattering, per " + ENDINGS[(i + 2) % 5].format(i=i),
        "c0",
    )
    for i in range(10)
]
# Llama-3's pre-tokenizer split: punctuation keeps its trailing newlines ("!\n"), newline runs merge.
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


@pytest.fixture(scope="module")
def stories(stories_path):
    cfg = ExperimentConfig()
    cfg.model.backbone, cfg.model.head, cfg.data.max_length = str(stories_path), "selector", 320
    cfg.lora.rank, cfg.data.cache_dir = 4, ""
    return build_reward_model(cfg)


def merging_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on filled templates, merging newlines into punctuation as Llama-3 does."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    texts = [TEMPLATE_HEAD + p.prompt + TEMPLATE_TAIL.format(a=p.chosen, b=p.rejected) for p in PAIRS] * 5
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    tok.train_from_iterator(
        texts, trainers.BpeTrainer(vocab_size=400, special_tokens=["<pad>"], initial_alphabet=alphabet)
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>")


@pytest.fixture(scope="module")
def tiny():
    """A randomly initialized two-layer Llama on the merging tokenizer."""
    tokenizer = merging_tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
    )
    lm = LlamaForCausalLM(config).requires_grad_(False).eval()
    return SelectorRewardModel(lm, tokenizer, LoraConfig(rank=2), 256, torch.Generator().manual_seed(0))


@pytest.fixture(params=["stories", "tiny"])
def selector(request) -> SelectorRewardModel:
    return request.getfixturevalue(request.param)


def responses_ab(pair: PreferencePair, chosen_is_a: bool) -> tuple[str, str]:
    return (pair.chosen, pair.rejected) if chosen_is_a else (pair.rejected, pair.chosen)


def test_span_ends_are_the_last_tokens_of_each_response(selector):
    enc = selector.encode(PAIRS)
    ends = selector.response_ends(enc)
    decode = selector.tokenizer.decode
    for seq, (end_a, end_b), flag, pair in zip(enc.seqs, ends.tolist(), enc.chosen_is_a.tolist(), PAIRS):
        seq = seq.tolist()
        for end, text, marker in zip((end_a, end_b), responses_ab(pair, flag), END_MARKERS):
            assert decode(seq[: end + 1]).rstrip().endswith(text.rstrip()), (text, decode(seq[: end + 1])[-40:])
            assert decode(seq[end + 1 :]).lstrip().startswith(marker)
            assert decode(seq[end : end + 1]).strip()  # the span ends on a token with content


def test_markers_are_found_as_the_template_tokenizes_them(stories, tiny):
    alone = stories.tokenizer(END_MARKERS[0], add_special_tokens=False)["input_ids"]
    assert marker_ids(stories.tokenizer)[0] != alone  # tokenized alone it gains a leading-space token
    enc = tiny.encode(PAIRS)
    last = [tiny.tokenizer.decode(int(s[e])) for s, ends in zip(enc.seqs, tiny.response_ends(enc)) for e in ends]
    assert any(t.endswith("\n") for t in last)  # a newline merged into a response's last token was handled


def test_responses_too_long_together_are_cut_to_their_beginnings(tiny, monkeypatch):
    long_b = PreferencePair("Q?", " ".join(["light"] * 200), " ".join(["scattering"] * 200), "c0")
    monkeypatch.setattr(tiny, "max_length", 160)
    enc = tiny.encode([long_b])  # either response alone is longer than 160 tokens: both are cut, both stay
    (end_a, end_b), seq = tiny.response_ends(enc)[0].tolist(), enc.seqs[0].tolist()
    text = tiny.tokenizer.decode(seq)
    assert len(seq) <= 160 and 0 < end_a < end_b
    assert "RESPONSE A: light light" in text or "RESPONSE A: scattering scattering" in text
    assert "RESPONSE B: light light" in text or "RESPONSE B: scattering scattering" in text
    monkeypatch.setattr(tiny, "max_length", 12)  # not even the instructions fit: a clear error
    with pytest.raises(ConfigError, match="data.max_length = 12"):
        tiny.response_ends(tiny.encode([long_b]))
    monkeypatch.setattr(tiny, "max_length", 64)
    cut_a = PreferencePair("Q?", " ".join(["Rayleigh"] * 80) + " end.", "Plain.", "c0")
    cut_b = dataclasses.replace(cut_a, chosen=cut_a.rejected, rejected=cut_a.chosen)
    enc = tiny.encode([cut_a, cut_b])
    long_at_a = 0 if enc.chosen_is_a[0] else 1  # response A loses its start, not its end
    seq, (end_a, _) = enc.seqs[long_at_a].tolist(), tiny.response_ends(enc)[long_at_a].tolist()
    assert len(seq) == 64 and tiny.tokenizer.decode(seq[: end_a + 1]).rstrip().endswith("Rayleigh end.")


def test_check_spans_finds_a_lost_response_from_the_token_ids_alone(tiny, monkeypatch):
    long_b = PreferencePair("Q?", " ".join(["light"] * 200), " ".join(["scattering"] * 200), "c0")
    monkeypatch.setattr(tiny, "max_length", 64)
    tiny.check_spans([*PAIRS, long_b])  # they fit (long responses cut)
    calls = []
    monkeypatch.setattr(tiny.lm, "forward", lambda *a, **k: calls.append(1))
    monkeypatch.setattr(tiny, "max_length", 12)
    with pytest.raises(ConfigError, match="11 of 11 selector prompts lost response A"):
        tiny.check_spans([*PAIRS, long_b])
    assert calls == []  # no forward pass before the error


def test_a_variational_run_refuses_truncated_pairs_at_set_up(stories_path, tmp_path, capsys):
    sets = [
        f"model.backbone='{stories_path}'",
        "model.head='selector'",
        "data.max_length=24",  # not even the instructions fit
        "data.cache_dir=''",
        "data.group_sizes=[2, 2, 0, 0]",
        "algorithm.methods=['FL', 'FedVPA-GP']",
    ]
    argv = ["run", "tiny", "--out", str(tmp_path / "run"), *[a for s in sets for a in ("--set", s)]]
    assert main(argv) != 0
    assert "96 of 96 selector prompts lost response A" in capsys.readouterr().err
    rounds = tmp_path / "run" / "rounds.jsonl"
    assert not rounds.exists() or rounds.read_text() == ""  # not one round ran


def perturb_lora(model: torch.nn.Module) -> dict:
    state = trainable_state(model)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.add_(0.5)
    return state


def test_embeddings_are_the_adapter_free_hidden_states_at_the_span_ends(stories):
    enc = stories.encode(PAIRS[:4])
    state = perturb_lora(stories)  # the adapters change the hidden states; the embeddings must not see them
    model = VariationalSelector(stories, SPEC)
    h = model.frozen_embeddings(enc)
    assert h.shape == (4, 2, stories.lm.config.hidden_size) and model.frozen_embeddings(enc) is h
    ends = stories.response_ends(enc)
    with torch.no_grad():
        for i, seq in enumerate(enc.seqs):
            chosen, rejected = ends[i].tolist() if enc.chosen_is_a[i] else ends[i].flip(0).tolist()
            adapted = stories.lm(input_ids=seq[None], output_hidden_states=True).hidden_states[-1][0]
            with stories.lm.disable_adapter():
                frozen = stories.lm(input_ids=seq[None], output_hidden_states=True).hidden_states[-1][0]
            torch.testing.assert_close(h[i], frozen[[chosen, rejected]])
            assert not torch.allclose(adapted[[chosen, rejected]], h[i])
    load_trainable_state(stories, state)


def test_base_logits_are_the_letter_logits_behind_the_margins(stories):
    enc, index = stories.encode(PAIRS), torch.arange(len(PAIRS))
    model = VariationalSelector(stories, SPEC)
    with torch.no_grad():
        base, _ = model.logit_parts(enc, index, torch.randn(1, 8))
        margins = stories.margins(enc, index)
    flags = position_flags(enc)
    torch.testing.assert_close(torch.where(flags, base[:, 0] - base[:, 1], base[:, 1] - base[:, 0]), margins)
    assert flags.any() and not flags.all()


def test_swapping_a_and_b_flips_embeddings_targets_and_margins(stories):
    enc, index = stories.encode(PAIRS), torch.arange(len(PAIRS))
    swapped = EncodedPairs(enc.seqs, len(enc), ~enc.chosen_is_a)  # same prompts, the other answer chosen
    model = VariationalSelector(stories, SPEC)
    torch.testing.assert_close(model.frozen_embeddings(swapped), model.frozen_embeddings(enc).flip(1))
    with torch.no_grad():
        torch.testing.assert_close(
            model.base_logits(swapped, index, ~position_flags(enc)), model.base_logits(enc, index, position_flags(enc))
        )
        torch.testing.assert_close(stories.margins(swapped, index), -stories.margins(enc, index))
    out, out_swapped = (model.training_outputs(e, index, torch.Generator().manual_seed(0)) for e in (enc, swapped))
    torch.testing.assert_close(out_swapped.target, 1 - out.target)


def test_training_moves_lora_and_the_variational_modules_not_the_frozen_lm(stories):
    enc = stories.encode(PAIRS)
    model = VariationalSelector(stories, dataclasses.replace(SPEC, latent_context="pair"))
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    before, h = trainable_state(model), model.frozen_embeddings(enc).clone()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    generator = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(3):
        out = model.training_outputs(enc, torch.randperm(len(enc), generator=generator)[:6], generator)
        loss = local_loss(out, LOSS, model.prototypes, SPEC.prototype_scale, 0, None, None)["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    after = trainable_state(model)
    changed = {k.split(".")[0] for k in after if not torch.equal(after[k], before[k])}
    assert changed == {"base", "features", "posterior", "latent", "projection", "prototypes"}
    assert any("lora_B" in k and not torch.equal(after[k], before[k]) for k in after)
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if not p.requires_grad)
    torch.testing.assert_close(model._span_frozen(enc), h)  # the frozen embeddings do not move with LoRA
    load_trainable_state(model, before)


def test_fedvpa_gp_on_stories260k_through_the_cli(stories_path, tmp_path):
    out = tmp_path / "run"
    sets = [
        f"model.backbone='{stories_path}'",
        "model.head='selector'",
        "data.max_length=512",
        "data.cache_dir=''",
        "data.group_sizes=[2, 2, 0, 0]",
        "algorithm.methods=['FedVPA-GP']",
        "personalization.steps=[0]",
        "variational.latent_dim=8",
    ]
    assert main(["run", "tiny", "--out", str(out), *[a for s in sets for a in ("--set", s)]]) == 0
    results = json.loads((out / "results.json").read_text())
    selector = results["methods"]["FedVPA-GP"]["selector"]
    assert len(selector["seen"]["per_client"]) == 4 and len(selector["latent_trace"]) == 2
    assert 0 <= selector["seen"]["acc_mean"] <= 100
    log = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in log] == [0, 1] and all(r["train_loss"] is not None for r in log)
