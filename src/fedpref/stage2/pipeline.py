"""Stage 1 -> Stage 2 -> win rates end to end on the story task or HH-RLHF (paper 001, Algorithm 1), plus FedDPO."""

from __future__ import annotations

import functools
import json
import statistics
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from fedpref.config import load_config
from fedpref.data.pairs import PreferencePair, write_jsonl
from fedpref.errors import FedprefError
from fedpref.experiments.orchestrator import open_run_dir
from fedpref.experiments.sweep import Cell, SweepKind
from fedpref.models.factory import resolve_device
from fedpref.reports.plots import plot_win_rates
from fedpref.results import NOT_JUDGES, ResultsError, ResultsWriter, has_results, load_results, stage2_results
from fedpref.stage2.checkpoints import Stage2Checkpoints, generator_state
from fedpref.stage2.config import HELD_OUT_JUDGES, Stage2Config, load_stage2_config
from fedpref.stage2.dpo import DPOSettings, tokenize_pairs, train_dpo
from fedpref.stage2.evaluate import win_rates
from fedpref.stage2.feddpo import DPOClient, FedSettings, run_feddpo
from fedpref.stage2.generation import Sampling, sample
from fedpref.stage2.held_out_judges import agreement, judge_model_config, lm_judge, reward_judge, train_reward_judges
from fedpref.stage2.hh_task import hh_task
from fedpref.stage2.judges import PAPER_QUALITY, ChatJudge, Judge, MarginJudge, OracleJudge, focused_template
from fedpref.stage2.policy import ConditionalPolicy, load_lm
from fedpref.stage2.progress import Log, client_reporter, round_reporter, step_reporter
from fedpref.stage2.selector import SelectorMargins
from fedpref.stage2.stage1 import Stage1Result, run_stage1, stage1_train_pairs, type_of
from fedpref.stage2.task import TYPES, Stage2Task, oracle_scores, story_prompts

TYPES_ORDER = tuple(TYPES)  # the story task's preference types


def client_types(cfg: Stage2Config) -> dict[str, str]:
    """The story task's client id -> type: c00.. for G1 first, then G2."""
    n = cfg.task.clients_per_type
    return {f"c{i:02d}": group for i, group in enumerate(g for g in TYPES for _ in range(n))}


def sampling_of(cfg: Stage2Config) -> Sampling:
    g = cfg.generation
    return Sampling(
        g.temperature, g.top_p, g.num_samples, g.max_new_tokens, g.eos_token_id, g.max_prompt_tokens, g.chat_template
    )


def build_task(cfg: Stage2Config, policy: ConditionalPolicy, tokenizer) -> Stage2Task:
    """The configured task; the story task's Stage 1 data are the base policy's own samples."""
    t = cfg.task
    if t.name == "hh":
        e = cfg.eval
        sizes = (e.judge_train_pairs, e.judge_test_pairs) if set(e.judges) & set(HELD_OUT_JUDGES) else (0, 0)
        return hh_task(t.data_path, t.clients_per_type, t.prompts_per_client, t.eval_prompts, cfg.seed, sizes)
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


def build_judges(
    cfg: Stage2Config,
    task: Stage2Task,
    stage1: Stage1Result,
    log: Log = lambda line: None,
    saved: dict | None = None,
) -> tuple[dict[str, Judge], dict]:
    """The configured judges, each answering for every context key (a type, or its unseen clients) as for its
    type; the selector judge reads the key's own z. Also each held-out judge's measured agreement with the
    human labels of the task's held-out test pairs ({judge: {type: summary}}). `saved` (`judges_state`'s):
    the reward models' trained states and the agreements, so nothing is trained or measured again."""
    keys, judges, agreements, e = list(stage1.latents), {}, {}, cfg.eval
    states, measured = restored_judges(saved)
    restored = set(measured)  # agreements measured by an earlier process: not logged again
    focus = task.chat_focus if e.chat_focus == "per_type" else {}
    templates = {key: focused_template(focus[type_of(key)]) for key in keys if type_of(key) in focus}
    tests = {group: test for group, (_, test) in task.judge_pairs.items()}
    for name in e.judges:
        if name == "oracle":
            judges[name] = OracleJudge({key: task.oracle[type_of(key)] for key in keys})
        elif name == "selector":
            judges[name] = MarginJudge(SelectorMargins(stage1.selector, stage1.latents))
        elif name == "chat":
            judges[name] = ChatJudge(e.chat_url, e.chat_model, api_key_env=e.chat_key_env, templates=templates)
        elif name == "reward_model":
            device = resolve_device(cfg.device)
            model_cfg = judge_model_config(
                e.reward_model_backbone,
                e.reward_model_head,
                e.reward_model_max_length,
                e.reward_model_steps,
                device,
                cfg.seed,
            )
            if states is not None:
                judges[name] = reward_judge(model_cfg, states)
            else:
                judges[name], measured[name] = train_reward_judges(model_cfg, task.judge_pairs)
        else:
            by_type = {t: focused_template(focus.get(t, PAPER_QUALITY)) for t in task.types}
            judges[name] = lm_judge(e.lm_model, by_type, e.lm_orders, e.lm_max_tokens, resolve_device(cfg.device))
        if name in HELD_OUT_JUDGES:
            agreements[name] = measured[name] if name in measured else agreement(judges[name], tests)
        if name in agreements and name not in restored:
            shown = {g: f"{r['win_rate']}% {r['ci95']}" for g, r in agreements[name].items()}
            log(f"judge {name}: agreement with held-out human labels {shown}")
    return judges, agreements


def judges_state(judges: dict[str, Judge], agreements: dict) -> dict:
    """What `build_judges(saved=...)` needs: the agreements and the trained reward models' states."""
    trained = judges.get("reward_model")
    return {"agreements": agreements, "reward_model_states": trained.margins.states if trained else None}


def restored_judges(saved: dict | None) -> tuple[dict | None, dict]:
    """A judges checkpoint's (reward models' states or None, agreements by judge). A checkpoint written before
    the two had keys of their own holds the states under "reward_model", which overwrote that judge's agreement:
    it is left out here, so `build_judges` measures it again (the same trained judge on the same held-out pairs)."""
    if not saved:
        return None, {}
    if "agreements" in saved:
        return saved["reward_model_states"], dict(saved["agreements"])
    return saved.get("reward_model"), {k: v for k, v in saved.items() if k not in ("reward_model", "torch_rng")}


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


def run_pipeline(cfg: Stage2Config, out_dir: Path, log: Log = print, resume: bool = False) -> dict:
    """Stage 1 data and selector, conditional DPO, FedDPO, win rates vs the frozen base; writes the results.

    Every phase saves its state in `out_dir/checkpoints` as it goes (each Stage 1 and FedDPO round, each DPO
    step, each finished phase); with `resume` the run continues from there and skips what is done."""
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    results = {"config": cfg.to_dict()}
    checkpoints = Stage2Checkpoints(out_dir / "checkpoints", results["config"], resume)
    writer = ResultsWriter(out_dir)
    writer.start(stage2_results(results))  # status running until the end (`fedpref stage2` marks a failure)
    lm, tokenizer = load_lm(cfg.policy_path, resolve_device(cfg.device))
    policy = ConditionalPolicy(lm, _lora(cfg), latent_dim=_latent_dim(cfg), seed=cfg.seed, precision=cfg.precision)

    task = build_task(cfg, policy, tokenizer)
    results["task"] = {"name": cfg.task.name, "types": list(task.types)}
    write_jsonl(task.stage1_pairs, out_dir / "stage1_pairs.jsonl")
    log(f"stage 1 data: {len(task.stage1_pairs)} labelled pairs -> {out_dir / 'stage1_pairs.jsonl'}")
    checkpoints.begin("stage1")
    if saved := checkpoints.saved("stage1"):
        log("stage 1: done (resumed)" if checkpoints.done("stage1") else f"stage 1: from round {saved['next_round']}")
    stage1 = run_stage1(cfg, out_dir / "stage1_pairs.jsonl", task.types, log, saved, saver(checkpoints, "stage1"))
    timing = {"stage1_s": checkpoints.took_s("stage1")}
    results["stage1"] = _stage1_summary(stage1, task.types, len(task.stage1_pairs))
    results["task"]["contexts"] = list(stage1.latents)
    log(f"stage 1 ({cfg.stage1.method}): {json.dumps(results['stage1']['by_group'])} in {timing['stage1_s']} s")
    if "unseen" in results["stage1"]:
        log(f"stage 1 on unseen clients (z inferred): {json.dumps(results['stage1']['unseen']['by_group'])}")

    checkpoints.begin("judges")
    saved = checkpoints.saved("judges")
    judges, agreements = build_judges(cfg, task, stage1, log, saved)
    if saved:
        torch.set_rng_state(saved["torch_rng"])
    else:
        checkpoints.save("judges", judges_state(judges, agreements) | generator_state(), done=True)
    timing["judges_s"] = checkpoints.took_s("judges")
    if agreements:
        results["judges"] = {"agreement": agreements}
    reward = judges.get("selector") or MarginJudge(SelectorMargins(stage1.selector, stage1.latents))
    labeler = reward if cfg.dpo.reward == "selector" else OracleJudge(task.oracle)
    contexts = {g: stage1.latents[g] for g in task.types}  # DPO trains on the seen clients' z only
    sampling, eval_seed = sampling_of(cfg), cfg.seed + 424242
    checkpoints.begin("dpo")
    if saved := checkpoints.saved("dpo"):
        log(f"conditional DPO: from step {saved['next_step']} of {cfg.dpo.steps} (resumed)")
    settings, on_step = dpo_settings(cfg), step_reporter(log, cfg.dpo.steps)

    def save_step(state: dict) -> None:
        checkpoints.save("dpo", state, done=state["next_step"] == settings.steps)

    history = train_dpo(
        policy, tokenizer, task.pool, contexts, labeler, settings, sampling, cfg.seed, on_step, saved, save_step
    )
    timing["stage2_dpo_s"] = checkpoints.took_s("dpo")
    results["stage2"] = {"reward": cfg.dpo.reward, "training": summarize_history(history)}
    checkpoints.begin("stage2")
    if saved := checkpoints.saved("stage2"):
        torch.set_rng_state(saved["torch_rng"])
        rates = saved["win_rates"]
    else:
        rates = win_rates(policy, tokenizer, task.eval_prompts, stage1.latents, judges, sampling, eval_seed)
        checkpoints.save("stage2", {"win_rates": rates} | generator_state(), done=True)
    results["stage2"]["win_rates"] = rates
    log(f"conditional DPO: {json.dumps(_headline(results['stage2']['win_rates']))} ({timing['stage2_dpo_s']} s)")

    if cfg.feddpo.enabled:
        seen_task = replace(task, client_types={c: g for c, g in task.client_types.items() if c not in stage1.unseen})
        trains = stage1_train_pairs(cfg, out_dir / "stage1_pairs.jsonl") if task.oracle is None else {}
        keys = list(stage1.latents)
        results["feddpo"] = _feddpo(
            cfg, seen_task, trains, keys, tokenizer, judges, sampling, eval_seed, log, checkpoints
        )
        timing["feddpo_s"] = checkpoints.took_s("feddpo")
        log(f"FedDPO: {json.dumps(_headline(results['feddpo']['win_rates']))} ({timing['feddpo_s']} s)")
    timing["wall_s"] = round(checkpoints.elapsed_s(), 1)
    results["timing"] = timing
    writer.finish(stage2_results(results))
    (out_dir / "table.md").write_text(results_markdown(results), encoding="utf-8")
    plot_win_rates(results, out_dir / "win_rates.png")
    return results


def saver(checkpoints: Stage2Checkpoints, phase: str):
    """A phase's `save(state, done)` callback into `checkpoints`."""
    return lambda state, done: checkpoints.save(phase, state, done)


def run_stage2(cfg: Stage2Config, run_dir: Path, overwrite: bool, log: Log = print, resume: bool = False) -> dict:
    """`fedpref stage2`: the run folder made (a non-empty one only with `overwrite`; an unfinished one is
    continued with `resume`), the pipeline run, and a failure recorded in its results (they are written from the
    start: not left 'running')."""
    open_stage2_dir(run_dir, overwrite, resume)
    try:
        return run_pipeline(cfg, run_dir, log, resume)
    except BaseException as e:
        ResultsWriter(run_dir).fail_existing(e)
        raise


CHECKPOINT_GLOB = "checkpoints/*.ckpt"  # a Stage 2 run's checkpoint, relative to its folder


def open_stage2_dir(run_dir: Path, overwrite: bool, resume: bool) -> None:
    """The run folder's rules (orchestrator.open_run_dir) for Stage 2, whose folders hold no config.toml:
    `resume` needs a checkpoint, and a partial run is pointed at --resume."""
    if not (resume or overwrite) and has_checkpoint(run_dir) and stage2_run_state(run_dir) != "finished":
        raise FedprefError(
            f"output folder {run_dir} holds an unfinished Stage 2 run; pass --resume to continue it, "
            "--overwrite to start it again, or choose another --out"
        )
    open_run_dir(run_dir, overwrite, resume, resumable=False, resume_needs=CHECKPOINT_GLOB)


def has_checkpoint(run_dir: Path) -> bool:
    return any(p.is_file() for p in run_dir.glob(CHECKPOINT_GLOB))


def stage2_run_state(folder: Path) -> str:
    """A Stage 2 run folder: finished (its results say so), interrupted (anything else in it: resumed when it
    holds a checkpoint, started again when not) or new."""
    if not folder.is_dir() or not any(folder.iterdir()):
        return "new"
    try:
        return "finished" if has_results(folder) and load_results(folder).finished else "interrupted"
    except ResultsError:
        return "interrupted"


def stage2_cell_state(cell: Cell) -> str:
    """A Stage 2 sweep cell's state (`stage2_run_state`)."""
    return stage2_run_state(cell.folder)


def _run_stage2_cell(cell: Cell, console, engine: str) -> None:
    """An interrupted cell continues from its checkpoint; one without any starts again."""

    def log(line: str) -> None:
        console.print(line, highlight=False)

    resume = has_checkpoint(cell.folder)
    run_stage2(cell.cfg, cell.folder, overwrite=not resume, log=log, resume=resume)


# `fedpref sweep` over a Stage 2 config: one run folder per seed (and grid cell), finished ones skipped
STAGE2_SWEEP = SweepKind(
    lambda path, overrides: load_stage2_config(path, overrides), stage2_cell_state, _run_stage2_cell
)


def _feddpo(
    cfg: Stage2Config,
    task: Stage2Task,
    trains: dict[str, list[PreferencePair]],
    keys: list[str],
    tokenizer,
    judges,
    sampling,
    eval_seed: int,
    log: Log,
    checkpoints: Stage2Checkpoints,
) -> dict:
    """One global policy. With an oracle, each client labels on-policy pairs of its share of the prompts with
    its type's utility; without one (real data), each client runs offline DPO on its own Stage 1 training split
    (`trains`: client -> pairs). Saved in `checkpoints` after every round and when its win rates are in."""
    checkpoints.begin("feddpo")
    saved = checkpoints.saved("feddpo")
    if saved and checkpoints.done("feddpo"):
        torch.set_rng_state(saved["torch_rng"])
        return saved["results"]
    if saved:
        log(f"FedDPO: from round {saved['next_round']} of {cfg.feddpo.rounds} (resumed)")
    lm, _ = load_lm(cfg.policy_path, resolve_device(cfg.device))
    policy = ConditionalPolicy(lm, _lora(cfg), latent_dim=0, seed=cfg.seed, precision=cfg.precision)
    clients = dpo_clients(task, trains, tokenizer, sampling)
    f = cfg.feddpo
    fed = FedSettings(f.rounds, f.clients_per_round, f.local_steps)
    judge = OracleJudge(task.oracle) if task.oracle else None
    on_round = round_reporter(log, "FedDPO round", f.rounds)
    save_round = functools.partial(checkpoints.save, "feddpo")
    args = (dpo_settings(cfg), fed, sampling, cfg.seed, on_round, saved, save_round)
    rounds = run_feddpo(policy, tokenizer, clients, judge, *args, client_reporter(log, "FedDPO round", f.rounds))
    contexts = {key: None for key in keys}  # one policy for every type, seen or not
    results = {
        "rounds": rounds,
        "win_rates": win_rates(policy, tokenizer, task.eval_prompts, contexts, judges, sampling, eval_seed),
    }
    checkpoints.save("feddpo", {"results": results} | generator_state(), done=True)
    return results


def dpo_clients(
    task: Stage2Task, trains: dict[str, list[PreferencePair]], tokenizer, sampling: Sampling
) -> dict[str, DPOClient]:
    """FedDPO's clients: with an oracle, a share of the prompt pool each; without, their `trains` pairs."""
    types = task.client_types
    if task.oracle is None:
        cut = sampling.max_new_tokens  # logged responses as long as a sampled one at most
        tokens = {cid: tokenize_pairs(tokenizer, trains[cid], sampling, cut) for cid in types}
        return {cid: DPOClient(cid, types[cid], pairs=tokens[cid]) for cid in types}
    shares = np.array_split(np.arange(len(task.pool)), len(types))
    return {cid: DPOClient(cid, types[cid], [task.pool[j] for j in share]) for cid, share in zip(types, shares)}


def _lora(cfg: Stage2Config):
    from fedpref.config import LoraConfig

    return LoraConfig(rank=cfg.lora.rank, alpha=cfg.lora.alpha, dropout=cfg.lora.dropout)


def _latent_dim(cfg: Stage2Config) -> int:
    return load_config(None, list(cfg.stage1.overrides)).variational.latent_dim


def _stage1_summary(stage1: Stage1Result, types: tuple[str, ...], pairs: int) -> dict:
    evaluation, (g1, g2) = stage1.evaluation, (stage1.latents[t] for t in types)
    summary = {
        "pairs": pairs,
        "acc_mean": round(evaluation["acc_mean"], 2),
        "base_acc_mean": round(evaluation["base_acc_mean"], 2),
        "by_group": _by_group(evaluation),
        "separation": evaluation["separation"],
        "type_latent_distance": round(float((g1 - g2).norm()), 4),
    }
    if stage1.unseen_evaluation:
        summary["unseen"] = {"clients": stage1.unseen, "by_group": _by_group(stage1.unseen_evaluation)}
    return summary


def _by_group(evaluation: dict) -> dict:
    return {g: {k: round(v, 2) for k, v in r.items()} for g, r in evaluation["by_group"].items()}


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
    types = results.get("task", {}).get("contexts", TYPES_ORDER)
    lines += ["| method | base | " + " | ".join(types) + " |", "|---|---|" + "---|" * len(types)]
    for method, key in (("conditional DPO (Stage 2)", "stage2"), ("FedDPO", "feddpo")):
        d2 = results.get(key, {}).get("win_rates", {}).get("distinct_2")
        if d2:
            lines.append(f"| {method} | {d2['base']} | " + " | ".join(str(d2.get(g, "-")) for g in types) + " |")
    return "\n".join(lines) + "\n"
