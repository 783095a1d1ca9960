"""Stage 1 -> Stage 2 -> win rates end to end on the story task or HH-RLHF (paper 001, Algorithm 1), plus FedDPO."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from fedpref.algorithms.registry import build_algorithm
from fedpref.client.variational import latent_center
from fedpref.config import load_config
from fedpref.data.pairs import PreferencePair, write_jsonl
from fedpref.engines.loop import ask_selector, run_rounds
from fedpref.experiments.runner import inprocess_federation
from fedpref.experiments.setup import build_setup
from fedpref.models.adapters import load_trainable_state
from fedpref.models.factory import resolve_device
from fedpref.models.variational import variational_model
from fedpref.stage2.config import Stage2Config
from fedpref.stage2.dpo import DPOSettings, tokenize_pairs, train_dpo
from fedpref.stage2.evaluate import win_rates
from fedpref.stage2.feddpo import DPOClient, FedSettings, run_feddpo
from fedpref.stage2.generation import Sampling, sample
from fedpref.stage2.hh_task import hh_task
from fedpref.stage2.judges import ChatJudge, Judge, MarginJudge, OracleJudge, focused_template
from fedpref.stage2.policy import ConditionalPolicy, load_lm
from fedpref.stage2.selector import SelectorMargins
from fedpref.stage2.task import TYPES, Stage2Task, oracle_scores, story_prompts

Log = Callable[[str], None]
TYPES_ORDER = tuple(TYPES)  # the story task's preference types


def client_types(cfg: Stage2Config) -> dict[str, str]:
    """The story task's client id -> type: c00.. for G1 first, then G2."""
    n = cfg.task.clients_per_type
    return {f"c{i:02d}": group for i, group in enumerate(g for g in TYPES for _ in range(n))}


def sampling_of(cfg: Stage2Config) -> Sampling:
    g = cfg.generation
    return Sampling(g.temperature, g.top_p, g.num_samples, g.max_new_tokens, g.eos_token_id, g.max_prompt_tokens)


def build_task(cfg: Stage2Config, policy: ConditionalPolicy, tokenizer) -> Stage2Task:
    """The configured task; the story task's Stage 1 data are the base policy's own samples."""
    t = cfg.task
    if t.name == "hh":
        return hh_task(t.data_path, t.clients_per_type, t.prompts_per_client, t.eval_prompts, cfg.seed)
    prompts = story_prompts(cfg.seed)
    eval_prompts, pool = prompts[: t.eval_prompts], prompts[t.eval_prompts :]
    pairs = make_stage1_pairs(policy, tokenizer, cfg, pool)
    return Stage2Task(TYPES_ORDER, client_types(cfg), pairs, eval_prompts, pool, oracle_scores(t.words))


def make_stage1_pairs(policy, tokenizer, cfg: Stage2Config, pool: list[str]) -> list[PreferencePair]:
    """Each client samples 2 base stories for each of its prompts; its type's oracle labels them; ties dropped."""
    judge, rng, pairs = OracleJudge(oracle_scores(cfg.task.words)), np.random.default_rng(cfg.seed), []
    two = replace(sampling_of(cfg), num_samples=2)
    for i, (cid, group) in enumerate(client_types(cfg).items()):
        prompts = [pool[j] for j in rng.choice(len(pool), cfg.task.prompts_per_client)]
        texts = sample(policy, tokenizer, prompts, two, seed=cfg.seed * 1000 + i, reference=True).texts
        verdicts = judge(prompts, texts[0::2], texts[1::2], group)
        for p, a, b, v in zip(prompts, texts[0::2], texts[1::2], verdicts):
            if v != 0.5:
                pairs.append(PreferencePair(p, a, b, cid, group) if v == 1.0 else PreferencePair(p, b, a, cid, group))
    return pairs


def run_stage1(
    cfg: Stage2Config, pairs_path: Path, types: tuple[str, ...] = TYPES_ORDER, log: Log = lambda line: None
) -> tuple[object, dict[str, torch.Tensor], dict]:
    """FedVPA-GP (or a variant) over the pairs file with fedpref.experiments; the selector, each type's mean
    client latent (z from the client's own training pairs, no label leakage) and the selector's evaluation.
    """
    s = cfg.stage1
    items = [
        f"seed={cfg.seed}",
        "data.source='jsonl'",
        f"data.path='{pairs_path}'",
        "data.cache_dir=''",  # Stage 2 encodes fresh generations: no disk cache
        f"data.val_pairs={s.val_pairs}",
        f"data.test_pairs={s.test_pairs}",
        f"algorithm.methods=['{s.method}']",
        f"federation.rounds={s.rounds}",
        f"federation.clients_per_round={s.clients_per_round}",
        f"train.local_steps={s.local_steps}",
        f"train.batch_size={s.batch_size}",
        f"train.lr={s.lr}",
        f"device='{cfg.device}'",
        *s.overrides,
    ]
    ecfg = load_config(None, items)
    setup = build_setup(ecfg)
    federation = inprocess_federation(ecfg, setup)
    algorithm = build_algorithm(s.method, ecfg, federation.trained(), setup.init_state, setup.model, setup.unseen)
    federation.transport.begin_method(s.method)
    run_rounds(algorithm, federation.transport, round_reporter(log, f"stage 1 ({s.method}) round", s.rounds))
    evaluation = ask_selector(algorithm, federation.transport, list(setup.clients), "selector")
    selector = variational_model(setup.model, algorithm.spec)
    load_trainable_state(selector, algorithm.global_state)
    device = next(selector.parameters()).device
    center, scale = latent_center(algorithm.center_payload(), device)
    latents = {}
    for group in types:
        means = [r["latent_mean"] for r in evaluation["per_client"].values() if r["group"] == group]
        with torch.no_grad():  # z as the selector reads it (centred, scaled, in its basis)
            latents[group] = selector.selector_input(torch.tensor(means, device=device).mean(0), center, scale)
    return selector, latents, evaluation


def every_tenth(log: Log, what: str, total: int) -> Callable[[int, float | None], None]:
    """`report(done, loss)` logs `what done/total loss x elapsed Ns` at every tenth of `total` (a progress line)."""
    start, stride = time.perf_counter(), max(1, total // 10)

    def report(done: int, loss: float | None) -> None:
        if done <= total and (done % stride == 0 or done == total):
            shown = f" loss {loss:.4f}" if loss is not None else ""
            log(f"{what} {done}/{total}{shown} elapsed {time.perf_counter() - start:.0f}s")

    return report


def round_reporter(log: Log, what: str, rounds: int) -> Callable[[dict], None]:
    """A `run_rounds` callback: `every_tenth` of the rounds, with the round's mean client loss."""
    report = every_tenth(log, what, rounds)
    return lambda record: report(record["round"] + 1, record["train_loss"])


def step_reporter(log: Log, steps: int) -> Callable[[int, list[dict]], None]:
    """A `train_dpo` callback: `every_tenth` of the steps, with the step's mean DPO loss."""
    report = every_tenth(log, "conditional DPO step", steps)

    def on_step(step: int, records: list[dict]) -> None:
        losses = [r["loss"] for r in records if "loss" in r]
        report(step + 1, statistics.fmean(losses) if losses else None)

    return on_step


def build_judges(cfg: Stage2Config, task: Stage2Task, selector, latents: dict[str, torch.Tensor]) -> dict[str, Judge]:
    judges: dict[str, Judge] = {}
    for name in cfg.eval.judges:
        if name == "oracle":
            judges[name] = OracleJudge(task.oracle)
        elif name == "selector":
            judges[name] = MarginJudge(SelectorMargins(selector, latents))
        else:
            e = cfg.eval
            focus = task.chat_focus if e.chat_focus == "per_type" else {}
            templates = {group: focused_template(quality) for group, quality in focus.items()}
            judges[name] = ChatJudge(e.chat_url, e.chat_model, api_key_env=e.chat_key_env, templates=templates)
    return judges


def dpo_settings(cfg: Stage2Config) -> DPOSettings:
    d = cfg.dpo
    return DPOSettings(
        beta=d.beta, lr=d.lr, steps=d.steps, prompts_per_step=d.prompts_per_step, grad_accumulation=d.grad_accumulation
    )


def summarize_history(history: list[dict], window: int = 20) -> dict:
    """Mean DPO loss / implicit-reward accuracy over the first and last `window` generation batches with pairs."""
    done, steps = [h for h in history if "loss" in h], len({h["step"] for h in history})
    if not done:
        return {"steps": steps, "pairs": 0}
    head, tail = done[:window], done[-window:]
    return {
        "steps": steps,
        "pairs": sum(h["pairs"] for h in history),
        "loss_first": round(statistics.fmean(h["loss"] for h in head), 4),
        "loss_last": round(statistics.fmean(h["loss"] for h in tail), 4),
        "reward_acc_last": round(statistics.fmean(h["reward_acc"] for h in tail), 4),
    }


def run_pipeline(cfg: Stage2Config, out_dir: Path, log: Log = print) -> dict:
    """Stage 1 data and selector, conditional DPO, FedDPO, win rates vs the frozen base; writes results.json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    timing, results, started = {}, {"config": cfg.to_dict()}, time.perf_counter()
    lm, tokenizer = load_lm(cfg.policy_path, resolve_device(cfg.device))
    policy = ConditionalPolicy(lm, _lora(cfg), latent_dim=_latent_dim(cfg), seed=cfg.seed, precision=cfg.precision)

    task = build_task(cfg, policy, tokenizer)
    results["task"] = {"name": cfg.task.name, "types": list(task.types)}
    write_jsonl(task.stage1_pairs, out_dir / "stage1_pairs.jsonl")
    log(f"stage 1 data: {len(task.stage1_pairs)} labelled pairs -> {out_dir / 'stage1_pairs.jsonl'}")
    t = time.perf_counter()
    selector, latents, evaluation = run_stage1(cfg, out_dir / "stage1_pairs.jsonl", task.types, log)
    timing["stage1_s"] = round(time.perf_counter() - t, 1)
    results["stage1"] = _stage1_summary(evaluation, latents, len(task.stage1_pairs))
    log(f"stage 1 ({cfg.stage1.method}): {json.dumps(results['stage1']['by_group'])} in {timing['stage1_s']} s")

    judges = build_judges(cfg, task, selector, latents)
    reward = judges.get("selector") or MarginJudge(SelectorMargins(selector, latents))
    labeler = reward if cfg.dpo.reward == "selector" else OracleJudge(task.oracle)
    contexts = {g: latents[g] for g in task.types}
    sampling, eval_seed = sampling_of(cfg), cfg.seed + 424242
    t = time.perf_counter()
    on_step = step_reporter(log, cfg.dpo.steps)
    history = train_dpo(policy, tokenizer, task.pool, contexts, labeler, dpo_settings(cfg), sampling, cfg.seed, on_step)
    timing["stage2_dpo_s"] = round(time.perf_counter() - t, 1)
    results["stage2"] = {"reward": cfg.dpo.reward, "training": summarize_history(history)}
    rates = win_rates(policy, tokenizer, task.eval_prompts, contexts, judges, sampling, eval_seed)
    results["stage2"]["win_rates"] = rates
    log(f"conditional DPO: {json.dumps(_headline(results['stage2']['win_rates']))} ({timing['stage2_dpo_s']} s)")

    if cfg.feddpo.enabled:
        t = time.perf_counter()
        results["feddpo"] = _feddpo(cfg, task, tokenizer, judges, sampling, eval_seed, log)
        timing["feddpo_s"] = round(time.perf_counter() - t, 1)
        log(f"FedDPO: {json.dumps(_headline(results['feddpo']['win_rates']))} ({timing['feddpo_s']} s)")
    timing["wall_s"] = round(time.perf_counter() - started, 1)
    results["timing"] = timing
    (out_dir / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    (out_dir / "table.md").write_text(results_markdown(results), encoding="utf-8")
    return results


def _feddpo(cfg: Stage2Config, task: Stage2Task, tokenizer, judges, sampling, eval_seed: int, log: Log) -> dict:
    """One global policy. With an oracle, each client labels on-policy pairs of its share of the prompts with
    its type's utility; without one (real data), each client runs offline DPO on its own Stage 1 pairs."""
    lm, _ = load_lm(cfg.policy_path, resolve_device(cfg.device))
    policy = ConditionalPolicy(lm, _lora(cfg), latent_dim=0, seed=cfg.seed, precision=cfg.precision)
    clients = _dpo_clients(cfg, task, tokenizer, sampling)
    f = cfg.feddpo
    fed = FedSettings(f.rounds, f.clients_per_round, f.local_steps)
    judge = OracleJudge(task.oracle) if task.oracle else None
    on_round = round_reporter(log, "FedDPO round", f.rounds)
    rounds = run_feddpo(policy, tokenizer, clients, judge, dpo_settings(cfg), fed, sampling, cfg.seed, on_round)
    contexts = {g: None for g in task.types}
    return {
        "rounds": rounds,
        "win_rates": win_rates(policy, tokenizer, task.eval_prompts, contexts, judges, sampling, eval_seed),
    }


def _dpo_clients(cfg: Stage2Config, task: Stage2Task, tokenizer, sampling: Sampling) -> dict[str, DPOClient]:
    types = task.client_types
    if task.oracle is None:
        own = {cid: [p for p in task.stage1_pairs if p.client == cid] for cid in types}
        cut = sampling.max_new_tokens  # logged responses as long as a sampled one at most
        tokens = {cid: tokenize_pairs(tokenizer, pairs, sampling, cut) for cid, pairs in own.items()}
        return {cid: DPOClient(cid, types[cid], pairs=tokens[cid]) for cid in types}
    shares = np.array_split(np.arange(len(task.pool)), len(types))
    return {cid: DPOClient(cid, types[cid], [task.pool[j] for j in share]) for cid, share in zip(types, shares)}


def _lora(cfg: Stage2Config):
    from fedpref.config import LoraConfig

    return LoraConfig(rank=cfg.lora.rank, alpha=cfg.lora.alpha, dropout=cfg.lora.dropout)


def _latent_dim(cfg: Stage2Config) -> int:
    return load_config(None, list(cfg.stage1.overrides)).variational.latent_dim


def _stage1_summary(evaluation: dict, latents: dict[str, torch.Tensor], pairs: int) -> dict:
    g1, g2 = latents.values()
    return {
        "pairs": pairs,
        "acc_mean": round(evaluation["acc_mean"], 2),
        "base_acc_mean": round(evaluation["base_acc_mean"], 2),
        "by_group": {g: {k: round(v, 2) for k, v in r.items()} for g, r in evaluation["by_group"].items()},
        "separation": evaluation["separation"],
        "type_latent_distance": round(float((g1 - g2).norm()), 4),
    }


NOT_JUDGES = ("examples", "distinct_2")  # win_rates entries that are not a judge's verdicts


def _headline(rates: dict) -> dict:
    return {j: {g: r["win_rate"] for g, r in by.items()} for j, by in rates.items() if j not in NOT_JUDGES}


def results_markdown(results: dict) -> str:
    """Win rate (%) vs the frozen base per method, judge and type, with n and the 95% Wilson interval."""
    lines = ["| method | judge | type | win rate (%) | n (W/T/L) | 95% CI |", "|---|---|---|---|---|---|"]
    for method, key in (("conditional DPO (Stage 2)", "stage2"), ("FedDPO", "feddpo")):
        rates = results.get(key, {}).get("win_rates", {})
        for judge, by_type in rates.items():
            if judge in NOT_JUDGES:
                continue
            for group, r in by_type.items():
                counts = f"{r['n']} ({r['wins']}/{r['ties']}/{r['losses']})"
                lines.append(f"| {method} | {judge} | {group} | {r['win_rate']} | {counts} | {r['ci95']} |")
    lines += [
        "",
        "Distinct-2 of the evaluation samples (unique word bigrams / all; the frozen base for reference):",
        "",
    ]
    types = results.get("task", {}).get("types", TYPES_ORDER)
    lines += ["| method | base | " + " | ".join(types) + " |", "|---|---|" + "---|" * len(types)]
    for method, key in (("conditional DPO (Stage 2)", "stage2"), ("FedDPO", "feddpo")):
        d2 = results.get(key, {}).get("win_rates", {}).get("distinct_2")
        if d2:
            lines.append(f"| {method} | {d2['base']} | " + " | ".join(str(d2.get(g, "-")) for g in types) + " |")
    return "\n".join(lines) + "\n"
