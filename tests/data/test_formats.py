"""data.source = 'pairwise': TRL preference formats from JSON lines, parquet, saved `datasets` folders and hub ids."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from fedpref.config import load_config
from fedpref.data.formats import chat_renderer, common_prefix, load_preferences, trl_texts
from fedpref.errors import ConfigError, DataError
from fedpref.experiments.setup import load_pairs

ROOT = Path(__file__).resolve().parents[2]
CONVERSATIONAL = ROOT / "tests" / "fixtures" / "trl_conversational.jsonl"
KEYS = {"prompt": "prompt", "chosen": "chosen", "rejected": "rejected", "client": "user_id"}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    # load_dataset must never reach the hub, whatever the machine
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def _rows(n: int = 6) -> list[dict]:
    return [
        {"question": f"Q{i}?", "good": f"yes {i}", "bad": f"no {i}", "worker": f"w{i % 2}", "g": "A"} for i in range(n)
    ]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _cfg(path: Path | str, *overrides: str):
    return load_config(None, ["data.source='pairwise'", f"data.path='{path}'", *overrides])


MAPPED = (
    "data.pairwise.prompt_key='question'",
    "data.pairwise.chosen_key='good'",
    "data.pairwise.rejected_key='bad'",
    "data.pairwise.user_key='worker'",
)


def test_explicit_prompt_from_parquet_json_and_jsonl_with_column_mapping(tmp_path):
    import datasets

    rows = _rows()
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "p.parquet"))
    (tmp_path / "p.json").write_text(json.dumps(rows), encoding="utf-8")
    _write_jsonl(tmp_path / "p.jsonl", rows)
    for name in ("p.parquet", "p.json", "p.jsonl"):
        pairs = load_pairs(_cfg(tmp_path / name, *MAPPED, "data.pairwise.group_key='g'"))
        assert [(p.prompt, p.chosen, p.rejected, p.client, p.group) for p in pairs[:2]] == [
            ("Q0?", "yes 0", "no 0", "w0", "A"),
            ("Q1?", "yes 1", "no 1", "w1", "A"),
        ], name
        assert len(pairs) == 6


def test_implicit_prompt_is_the_common_prefix(tmp_path):
    rows = [
        {"chosen": "Human: hi?\n\nAssistant: hello there", "rejected": "Human: hi?\n\nAssistant: go away", "u": "a"},
        {"chosen": "The sky is blue", "rejected": "The sky is green", "u": "b"},
    ]
    pairs = load_pairs(_cfg(_write_jsonl(tmp_path / "i.jsonl", rows), "data.pairwise.user_key='u'"))
    assert (pairs[0].prompt, pairs[0].chosen, pairs[0].rejected) == (
        "Human: hi?\n\nAssistant:",
        " hello there",
        " go away",
    )
    assert (pairs[1].prompt, pairs[1].chosen) == ("The sky is", " blue")
    assert common_prefix("abc", "abc") == "abc"


def test_conversational_without_a_chat_template_is_a_plain_join():
    pairs = load_pairs(_cfg(CONVERSATIONAL))
    assert Counter(p.client for p in pairs) == {"alice": 10, "bob": 10, "carol": 10, "dave": 10}
    assert pairs[0].prompt == "user: Tell me about the moon."
    assert pairs[0].chosen == "assistant: The moon: brief facts."
    # implicit conversational prompt: the shared leading messages
    talk = [{"role": "user", "content": "hi"}]
    p, c, r = trl_texts(
        None,
        talk + [{"role": "assistant", "content": "hello"}],
        talk + [{"role": "assistant", "content": "bye"}],
        chat_renderer(None),
        "row",
    )
    assert (p, c, r) == ("user: hi", "assistant: hello", "assistant: bye")


class _TemplateTokenizer:
    """A tokenizer's chat-template interface, as TRL uses it."""

    chat_template = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        text = "".join(f"<|{m['role']}|>{m['content']}\n" for m in messages)
        return text + ("<|assistant|>" if add_generation_prompt else "")


def test_conversational_with_a_chat_template_is_rendered_like_trl():
    from transformers import AutoTokenizer

    from fedpref.models.backbone import resolve_backbone

    tok = AutoTokenizer.from_pretrained(resolve_backbone("minilm"))
    tok.chat_template = _TemplateTokenizer.chat_template + "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    for tokenizer in (tok, _TemplateTokenizer()):
        pairs = load_preferences(CONVERSATIONAL, keys=KEYS, render=chat_renderer(tokenizer))
        assert pairs[0].prompt == "<|user|>Tell me about the moon.\n<|assistant|>"
        assert pairs[0].chosen == "The moon: brief facts.\n"


def test_model_tokenizer_supplies_the_chat_template(tmp_path):
    from transformers import AutoTokenizer

    from fedpref.models.backbone import resolve_backbone

    tok = AutoTokenizer.from_pretrained(resolve_backbone("minilm"))
    tok.chat_template = _TemplateTokenizer.chat_template + "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    tok.save_pretrained(tmp_path / "tok")
    user = "data.pairwise.user_key='user_id'"
    plain = load_pairs(_cfg(CONVERSATIONAL, user))  # the embedded MiniLM: no template
    templated = load_pairs(_cfg(CONVERSATIONAL, user, f"model.tokenizer='{tmp_path / 'tok'}'"))
    assert plain[0].prompt == "user: Tell me about the moon."
    assert templated[0].prompt == "<|user|>Tell me about the moon.\n<|assistant|>"


def test_saved_datasets_folder_and_split(tmp_path):
    import datasets

    data = datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(_rows(4)), "test": datasets.Dataset.from_list(_rows(2))}
    )
    data.save_to_disk(str(tmp_path / "saved"))
    assert len(load_pairs(_cfg(tmp_path / "saved", *MAPPED))) == 6
    assert len(load_pairs(_cfg(tmp_path / "saved", *MAPPED, "data.pairwise.split='test'"))) == 2
    with pytest.raises(DataError, match="split.*valid"):
        load_pairs(_cfg(tmp_path / "saved", *MAPPED, "data.pairwise.split='valid'"))
    datasets.Dataset.from_list(_rows(3)).save_to_disk(str(tmp_path / "one"))
    assert len(load_pairs(_cfg(tmp_path / "one", *MAPPED))) == 3


def test_hub_id_goes_through_load_dataset(tmp_path, monkeypatch):
    """The hub code path, on a local copy: `datasets.load_dataset` gets the hub id, answered from a local
    data-set folder (as a hub repository would be, offline)."""
    import datasets

    repo = tmp_path / "repo"
    repo.mkdir()
    _write_jsonl(repo / "train.jsonl", _rows(4))
    real, asked = datasets.load_dataset, []

    def local_hub(path, *args, **kwargs):
        asked.append(path)
        return real(str(repo) if path == "someone/prefs" else path, *args, **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", local_hub)
    pairs = load_pairs(_cfg("someone/prefs", *MAPPED))
    assert asked == ["someone/prefs"] and len(pairs) == 4


def test_errors_say_what_to_set(tmp_path):
    path = _write_jsonl(tmp_path / "trl.jsonl", [{"prompt": "p", "chosen": "a", "rejected": "b"}])
    with pytest.raises(DataError, match="user_id.*set data.pairwise.user_key"):
        load_pairs(_cfg(path))
    bad = _write_jsonl(tmp_path / "bad.jsonl", [{"chosen": "a", "rejected": ["x"], "user_id": 1}])
    with pytest.raises(DataError, match="both be strings"):
        load_pairs(_cfg(bad))
    with pytest.raises(ConfigError, match="model.dtype"):
        load_config(None, ["model.dtype='fp8'"])
