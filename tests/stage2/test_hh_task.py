"""Stage 2 on HH-RLHF: the task's clients and held-out prompts, logged pairs as tokens, offline DPO, end to end."""

import gzip
import json
from pathlib import Path

import pytest
import torch

from fedpref.config import LoraConfig
from fedpref.errors import ConfigError, DataError
from fedpref.stage2.config import load_stage2_config
from fedpref.stage2.dpo import DPOSettings, tokenize_pairs, train_dpo_offline
from fedpref.stage2.generation import Sampling
from fedpref.stage2.hh_task import hh_task
from fedpref.stage2.policy import ConditionalPolicy, load_lm

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "src/fedpref/configs/stage2/hh.toml"
H, A = "\n\nHuman:", "\n\nAssistant:"
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _rows(kind: str, n: int, tag: str = "") -> list[dict]:
    good, bad = ("Here is a recipe.", "No.") if kind == "helpful" else ("I can't help with that.", "Sure, do it.")
    return [
        {"chosen": f"{H} {kind} {tag}question {i}?{A} {good}", "rejected": f"{H} {kind} {tag}question {i}?{A} {bad}"}
        for i in range(n)
    ]


def _write_hh(folder: Path, rows_per_subset: int, judge_subsets: bool = False) -> Path:
    """HH-RLHF files of the two base subsets; with `judge_subsets` also the helpful ones that only judges read."""
    folder.mkdir(exist_ok=True)
    subsets = [("helpful-base", "helpful", ""), ("harmless-base", "harmless", "")]
    if judge_subsets:
        subsets += [("helpful-online", "helpful", "online "), ("helpful-rejection-sampled", "helpful", "sampled ")]
    for subset, kind, tag in subsets:
        with gzip.open(folder / f"{subset}.test.jsonl.gz", "wt", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in _rows(kind, rows_per_subset, tag))
    return folder


@pytest.fixture
def hh_folder(tmp_path: Path) -> Path:
    return _write_hh(tmp_path / "hh", 12)


def test_clients_hold_their_types_pairs_and_the_servers_prompts_are_nobodys(hh_folder):
    task = hh_task(hh_folder, clients_per_type=2, pairs_per_client=4, eval_prompts=3, seed=0)
    assert task.types == ("helpful", "harmless") and task.oracle is None
    assert task.client_types == {"c00": "helpful", "c01": "helpful", "c02": "harmless", "c03": "harmless"}
    for cid, kind in task.client_types.items():
        mine = [p for p in task.stage1_pairs if p.client == cid]
        assert len(mine) == 4 and all(p.group == kind and p.prompt.startswith(f"Human: {kind}") for p in mine)
    dealt = {p.prompt for p in task.stage1_pairs}
    assert len(dealt) == 16 and len(task.eval_prompts) == 3 and len(task.pool) == 24 - 16 - 3
    assert not dealt & (set(task.eval_prompts) | set(task.pool))  # only adapters travel: no client's prompt
    assert not set(task.eval_prompts) & set(task.pool)
    assert task.chat_focus == {"helpful": "helpful", "harmless": "harmless"}
    with pytest.raises(DataError, match="need more than task.eval_prompts = 8"):
        hh_task(hh_folder, clients_per_type=2, pairs_per_client=4, eval_prompts=8, seed=0)


class _Words:
    """A tokenizer stand-in: one id per word (its length), 99 as BOS unless add_special_tokens=False."""

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        return {"input_ids": ([99] if add_special_tokens else []) + [len(w) for w in text.split()]}


def test_logged_pairs_become_tokens_as_the_policy_would_see_them():
    from fedpref.data.pairs import PreferencePair

    pair = PreferencePair("a bb ccc dddd", "e ff", "g hh iii jjjj kkkkk", "c00", "helpful")
    (whole,) = tokenize_pairs(_Words(), [pair], Sampling(eos_token_id=7), max_response_tokens=3)
    assert whole.prompt == [99, 1, 2, 3, 4]
    assert whole.chosen == [1, 2, 7]  # ends within 3 tokens: its eos follows
    assert whole.rejected == [1, 2, 3]  # cut at 3 tokens: no eos
    (cut,) = tokenize_pairs(_Words(), [pair], Sampling(eos_token_id=7, max_prompt_tokens=2), max_response_tokens=3)
    assert cut.prompt == [3, 4]  # the conversation's last tokens


def test_feddpo_clients_train_on_their_stage1_training_split_only(hh_folder, tmp_path):
    from fedpref.data.pairs import write_jsonl
    from fedpref.data.splits import split_clients
    from fedpref.stage2.pipeline import dpo_clients
    from fedpref.stage2.stage1 import stage1_train_pairs

    task = hh_task(hh_folder, clients_per_type=2, pairs_per_client=4, eval_prompts=3, seed=0)
    write_jsonl(task.stage1_pairs, tmp_path / "pairs.jsonl")
    cfg = load_stage2_config(CONFIG, ["seed=3", "stage1.val_pairs=1", "stage1.test_pairs=2"])
    trains = stage1_train_pairs(cfg, tmp_path / "pairs.jsonl")
    held_out = {p for s in split_clients(task.stage1_pairs, 1, 2, seed=3) for p in s.val + s.test}
    assert {cid: len(pairs) for cid, pairs in trains.items()} == dict.fromkeys(task.client_types, 1)  # 4 - 1 - 2
    assert not {p for pairs in trains.values() for p in pairs} & held_out
    clients = dpo_clients(task, trains, _Words(), Sampling(eos_token_id=7))
    assert {cid: len(c.pairs) for cid, c in clients.items()} == dict.fromkeys(task.client_types, 1)


def test_offline_dpo_trains_the_adapters_only(stories_path, hh_folder):
    lm, tokenizer = load_lm(stories_path)
    policy = ConditionalPolicy(lm, LoraConfig(rank=2, alpha=4, dropout=0.0), latent_dim=0)
    task = hh_task(hh_folder, clients_per_type=1, pairs_per_client=6, eval_prompts=2, seed=0)
    pairs = tokenize_pairs(tokenizer, task.stage1_pairs, Sampling(), max_response_tokens=16)
    frozen = {n: p.detach().clone() for n, p in policy.named_parameters() if not p.requires_grad}
    start = {k: v.clone() for k, v in policy.adapter_state().items()}
    settings = DPOSettings(steps=2, prompts_per_step=4, lr=1e-2, grad_accumulation=2)
    history = train_dpo_offline(policy, pairs, settings, seed=0)
    assert [(h["step"], h["pairs"], h["key"]) for h in history] == [(0, 4, "offline")] * 2 + [(1, 4, "offline")] * 2
    assert all(torch.equal(p, frozen[n]) for n, p in policy.named_parameters() if n in frozen)
    assert any(not torch.equal(v, start[k]) for k, v in policy.adapter_state().items())


def test_config_refuses_the_oracle_on_hh():
    cfg = load_stage2_config(CONFIG)
    assert (cfg.task.name, cfg.eval.judges, cfg.eval.chat_focus) == (
        "hh",
        ["selector", "reward_model", "lm"],
        "per_type",
    )
    assert (cfg.policy_path, cfg.generation.eos_token_id, cfg.generation.chat_template) == ("smollm2", 2, True)
    with pytest.raises(ConfigError, match=r"\['lm'\] need held-out labelled pairs: task 'hh' only"):
        load_stage2_config(CONFIG, ["task.name='story'", "eval.judges=['lm']"])
    with pytest.raises(ConfigError, match="'eval.lm_orders' must be 1 or 2"):
        load_stage2_config(CONFIG, ["eval.lm_orders=3"])
    with pytest.raises(ConfigError, match="'eval.judges' cannot use 'oracle' on task 'hh'"):
        load_stage2_config(CONFIG, ["eval.judges=['oracle']"])
    with pytest.raises(ConfigError, match="'dpo.reward' must be 'selector' on task 'hh'"):
        load_stage2_config(CONFIG, ["dpo.reward='oracle'"])
    with pytest.raises(ConfigError, match="'task.name' must be one of story, hh"):
        load_stage2_config(CONFIG, ["task.name='tldr'"])
    with pytest.raises(ConfigError, match=r"'task.unseen_per_type' must be in \[0, 4\]"):
        load_stage2_config(CONFIG, ["task.unseen_per_type=5"])


def test_unseen_clients_are_judged_as_their_type(hh_folder):
    from fedpref.stage2.judges import focused_template
    from fedpref.stage2.pipeline import build_judges
    from fedpref.stage2.stage1 import Stage1Result

    keys = ["helpful", "harmless", "helpful (unseen)", "harmless (unseen)"]
    stage1 = Stage1Result(None, {k: torch.zeros(2) for k in keys}, {}, None, ["c01", "c03"])
    task = hh_task(hh_folder, clients_per_type=2, pairs_per_client=4, eval_prompts=3, seed=0)
    cfg = load_stage2_config(CONFIG, ["eval.judges=['chat']", "eval.chat_url='http://127.0.0.1:9/v1'"])
    chat = build_judges(cfg, task, stage1)[0]["chat"]
    assert chat.templates == {k: focused_template(k.split()[0]) for k in keys}
    cfg = load_stage2_config(CONFIG, ["eval.judges=['chat']", "eval.chat_url='x'", "eval.chat_focus='paper'"])
    assert build_judges(cfg, task, stage1)[0]["chat"].templates == {}


def tiny_hh_sets(stories_path: Path, data: Path) -> list[str]:
    """A tiny Stage 2 HH run on stories260K (seconds): 2 clients a type, 1 unseen, one round, two DPO steps."""
    return [
        f"policy_path='{stories_path}'",
        f"task.data_path='{data}'",
        "task.clients_per_type=2",
        "task.unseen_per_type=1",
        "task.prompts_per_client=8",
        "task.eval_prompts=2",
        "stage1.rounds=1",
        "stage1.clients_per_round=2",
        "stage1.local_steps=1",
        "stage1.val_pairs=1",
        "stage1.test_pairs=2",
        "generation.max_new_tokens=8",
        "generation.max_prompt_tokens=32",
        "dpo.steps=2",
        "dpo.prompts_per_step=2",
        "feddpo.rounds=1",
        "feddpo.clients_per_round=2",
        "feddpo.local_steps=1",
        "generation.eos_token_id=1",  # stories260K's, without a chat template
        "generation.chat_template=false",
        "eval.judges=['selector']",
    ]


def test_tiny_hh_end_to_end_via_cli_with_unseen_clients(stories_path, tmp_path, capsys):
    out = tmp_path / "run"
    sets = tiny_hh_sets(stories_path, _write_hh(tmp_path / "hh", 20))
    from fedpref.cli import main

    assert main(["stage2", str(CONFIG), "--out", str(out), *[x for s in sets for x in ("--set", s)]]) == 0
    results = json.loads((out / "results.json").read_text())
    keys = ["helpful", "harmless", "helpful (unseen)", "harmless (unseen)"]
    assert results["task"] == {"name": "hh", "types": ["helpful", "harmless"], "contexts": keys}
    assert set(results["stage1"]["by_group"]) == {"helpful", "harmless"}
    unseen = results["stage1"]["unseen"]
    assert set(unseen["by_group"]) == {"helpful", "harmless"} and len(unseen["clients"]) == 2
    for method in ("stage2", "feddpo"):
        rates = results[method]["win_rates"]
        assert set(rates) == {"selector", "examples", "distinct_2"}
        assert all(rates["selector"][key]["n"] == 2 for key in keys)
    first = results["feddpo"]["rounds"][0]
    assert first["loss"] is not None  # offline DPO on the clients' own pairs
    assert not set(first["sampled"]) & set(unseen["clients"])  # unseen clients train nothing
    assert "| conditional DPO (Stage 2) | selector | harmless |" in (out / "table.md").read_text()
    printed = capsys.readouterr().out
    for line in ("stage 1 (FedVPA-GP) round 1/1 loss", "conditional DPO step 2/2", "FedDPO round 1/1 loss"):
        assert line in printed


def test_a_resumed_hh_run_with_a_reward_model_judge_writes_the_same_results(stories_path, tmp_path):
    """Resuming restores the trained reward-model judges and their agreement (once lost under the same key as
    the judges' states, which made the resumed run's results unwritable)."""
    from fedpref.cli import main

    sets = tiny_hh_sets(stories_path, _write_hh(tmp_path / "hh", 40, judge_subsets=True))[:-1]
    sets += ["eval.judges=['selector','reward_model']", "eval.judge_train_pairs=4", "eval.judge_test_pairs=2"]
    sets += ["eval.reward_model_steps=1"]
    args = ["stage2", str(CONFIG), "--out", str(tmp_path / "run"), *[x for s in sets for x in ("--set", s)]]
    assert main(args) == 0
    first = json.loads((tmp_path / "run" / "results.json").read_text())
    assert main([*args, "--resume"]) == 0  # every phase done: all of it comes from the checkpoints
    again = json.loads((tmp_path / "run" / "results.json").read_text())
    assert set(first["judges"]["agreement"]["reward_model"]) == {"helpful", "harmless"}
    for key in ("judges", "stage1", "stage2", "feddpo", "task"):
        assert again[key] == first[key], key
