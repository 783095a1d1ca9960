"""Held-out judges: the LM judge's two readings, agreement with labels, per-type reward models; chat prompts."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from fedpref.data.hh import hh_messages
from fedpref.data.pairs import PreferencePair
from fedpref.errors import DataError
from fedpref.stage2.generation import chat_token_ids
from fedpref.stage2.held_out_judges import LMJudge, agreement, judge_model_config, train_reward_judges
from fedpref.stage2.hh_task import held_out_judge_pairs


class CharTokenizer:
    """One token per character (its code point); 'A' and 'B' are tokens 65 and 66; a toy chat template."""

    chat_template = "toy"

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids: list[int]) -> str:
        return "".join(map(chr, ids))

    def convert_tokens_to_ids(self, token: str) -> int:
        return ord(token)

    def apply_chat_template(self, turns, add_generation_prompt: bool, tokenize: bool) -> str:
        assert add_generation_prompt and not tokenize
        return "".join(f"<{t['role'][0]}>{t['content']}" for t in turns) + "<a>"


class PositionBiasedLM(nn.Module):
    """Next-token logits: 'A' gets +3 (a position bias) plus 1 per '+' in RESPONSE A, 'B' 1 per '+' in RESPONSE B."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(200, 1)

    def get_input_embeddings(self) -> nn.Module:
        return self.embed

    def forward(self, input_ids, attention_mask, logits_to_keep=0):
        logits = torch.zeros(*input_ids.shape, 200)
        for i, row in enumerate(input_ids):
            text = "".join(chr(t) for t, m in zip(row.tolist(), attention_mask[i].tolist()) if m)
            a, b = text.split("[A]")[1].split("[B]")
            logits[i, -1, ord("A")] = 3.0 + a.count("+")
            logits[i, -1, ord("B")] = b.split("[END]")[0].count("+")
        return SimpleNamespace(logits=logits)


TEMPLATE = "{prompt}[A]{response_a}[B]{response_b}[END]"


def test_hh_messages_turns_a_transcript_into_chat_turns():
    prompt = "Human: hi\n\nAssistant: hello\n\nHuman: how are you?\n\nAssistant:"
    assert hh_messages(prompt) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "how are you?"},
    ]
    assert hh_messages("Once upon a time") == [{"role": "user", "content": "Once upon a time"}]


def test_chat_prompts_lose_their_earliest_turns_first():
    tok, turns = CharTokenizer(), hh_messages("Human: aaaa\n\nAssistant: bbbb\n\nHuman: cc\n\nAssistant:")
    assert tok.decode(chat_token_ids(tok, turns)) == "<u>aaaa<a>bbbb<u>cc<a>"
    assert tok.decode(chat_token_ids(tok, turns, max_tokens=12)) == "<u>cc<a>"  # the user turn and the reply cue
    assert tok.decode(chat_token_ids(tok, turns, max_tokens=5)) == "cc<a>"  # one turn left: its last tokens


def test_the_lm_judge_reads_a_and_b_logits_and_both_orders_cancel_its_position_bias():
    prompts, better, worse = ["q1", "q2"], ["++", "+"], ["", ""]
    once = LMJudge(PositionBiasedLM(), CharTokenizer(), {"helpful": TEMPLATE}, orders=1)
    assert once.margins(prompts, better, worse, "helpful") == [5.0, 4.0]  # 3 + 2 - 0, 3 + 1 - 0
    assert once(prompts, worse, better, "helpful") == [1.0, 1.0]  # A wins though it is worse
    both = LMJudge(PositionBiasedLM(), CharTokenizer(), {"helpful": TEMPLATE}, orders=2)
    assert both(prompts, worse, better, "helpful") == [0.0, 0.0]
    assert both(prompts, better, worse, "helpful (unseen)") == [1.0, 1.0]  # a context key reads its type's prompt
    assert both(["q"], ["+"], ["+"], "helpful") == [0.5]


def test_agreement_is_the_share_of_held_out_pairs_whose_chosen_response_the_judge_prefers():
    def prefers_longer(prompts, first, second, group):
        return [1.0 if len(a) > len(b) else 0.5 if len(a) == len(b) else 0.0 for a, b in zip(first, second)]

    pairs = [PreferencePair("p", c, r, "judge") for c, r in (("long", "s"), ("long", "s"), ("ab", "cd"), ("a", "bb"))]
    result = agreement(prefers_longer, {"helpful": pairs})["helpful"]
    assert (result["win_rate"], result["wins"], result["ties"], result["losses"]) == (62.5, 2, 1, 1)


def _triples(tag: str, n: int) -> list[tuple[str, str, str]]:
    return [(f"Human: {tag} {i}\n\nAssistant:", f"good {i}", f"bad {i}") for i in range(n)]


def test_held_out_judge_pairs_avoid_dealt_and_win_rate_prompts():
    triples = {
        "helpful-online": _triples("online", 6),
        "helpful-rejection-sampled": _triples("rs", 6),
        "harmless-base": _triples("harmless", 10),
    }
    dealt = [PreferencePair(*triples["harmless-base"][i], client="c02", group="harmless") for i in range(3)]
    asked = {triples["harmless-base"][3][0]}
    split = held_out_judge_pairs(triples, dealt, asked, (4, 2), seed=0)
    for group, (train, test) in split.items():
        assert (len(train), len(test)) == (4, 2) and all(p.group == group for p in train + test)
        prompts = [p.prompt for p in train + test]
        assert len(set(prompts)) == 6 and not set(prompts) & ({p.prompt for p in dealt} | asked)
    with pytest.raises(DataError, match="6 held-out harmless pair"):
        held_out_judge_pairs(triples, dealt, asked, (4, 3), seed=0)
    with pytest.raises(DataError, match="subset.s. helpful-rejection-sampled"):
        held_out_judge_pairs(
            {k: v for k, v in triples.items() if k != "helpful-rejection-sampled"}, [], set(), (1, 1), 0
        )


def test_reward_judges_are_trained_per_type_and_measured_on_their_test_pairs():
    def pairs(group: str, word: str, n: int) -> list[PreferencePair]:
        return [PreferencePair(f"q{i}", f"{word} {i}", f"no {i}", f"judge-{group}", group) for i in range(n)]

    held_out = {g: (pairs(g, w, 8), pairs(g, w, 4)) for g, w in (("helpful", "yes"), ("harmless", "safe"))}
    cfg = judge_model_config("minilm", "scalar", 32, steps=2, device="cpu", seed=0)
    judge, agreed = train_reward_judges(cfg, held_out)
    assert set(agreed) == {"helpful", "harmless"} and all(r["n"] == 4 for r in agreed.values())
    states = judge.margins.states
    assert any(not torch.equal(states["helpful"][k], states["harmless"][k]) for k in states["helpful"])
    assert len(judge(["q"], ["yes"], ["no"], "helpful (unseen)")) == 1
