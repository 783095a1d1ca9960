"""Stage 1 inside the Stage 2 pipeline (Algorithm 1 lines 1-18): FedVPA-GP on the task's pairs, the frozen
selector, and each type's z from its seen clients and, held out of training, from its unseen clients (Table 2)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from fedpref.algorithms.registry import build_algorithm
from fedpref.client.variational import latent_center
from fedpref.config import ExperimentConfig, config_from_dict
from fedpref.data.load import load_pairs
from fedpref.data.pairs import PreferencePair
from fedpref.data.splits import split_clients
from fedpref.engines.loop import ask_selector, run_rounds
from fedpref.experiments.orchestrator import check_config
from fedpref.experiments.runner import inprocess_federation
from fedpref.experiments.setup import build_setup
from fedpref.models.adapters import load_trainable_state
from fedpref.models.variational import VariationalSelector, variational_model
from fedpref.stage2.checkpoints import generator_state
from fedpref.stage2.config import Stage2Config
from fedpref.stage2.progress import Log, round_reporter

UNSEEN = " (unseen)"  # a context key's suffix: the type's z inferred for clients held out of Stage 1


def type_of(key: str) -> str:
    """The preference type of a context key ('harmless (unseen)' -> 'harmless')."""
    return key.removesuffix(UNSEEN)


@dataclass
class Stage1Result:
    selector: VariationalSelector
    latents: dict[str, torch.Tensor]  # context key -> z as the selector reads it; unseen keys after the seen ones
    evaluation: dict  # the selector on the seen clients (`ask_selector`'s summary)
    unseen_evaluation: dict | None  # ... on the unseen clients, under their inferred z (no update)
    unseen: list[str]  # the clients held out of Stage 1 (task.unseen_per_type of each type)


def stage1_raw(cfg: Stage2Config, pairs_path: Path) -> dict:
    """Stage 1's experiment config on the pairs file, as data shaped like the TOML (no value is quoted into a
    string, so any path works); `stage1.overrides` apply on top of it (stage1_config)."""
    s = cfg.stage1
    data = {
        "source": "jsonl",
        "path": str(pairs_path),
        "cache_dir": "",  # Stage 2 encodes fresh generations: no disk cache
        "val_pairs": s.val_pairs,
        "test_pairs": s.test_pairs,
    }
    if cfg.task.unseen_per_type:
        data["unseen_clients"] = 2 * cfg.task.unseen_per_type
    return {
        "seed": cfg.seed,
        "device": cfg.device,
        "data": data,
        "algorithm": {"methods": [s.method]},
        "federation": {"rounds": s.rounds, "clients_per_round": s.clients_per_round},
        "train": {"local_steps": s.local_steps, "batch_size": s.batch_size, "lr": s.lr},
    }


def stage1_config(cfg: Stage2Config, pairs_path: Path) -> ExperimentConfig:
    """Stage 1's experiment config, checked once (orchestrator.check_config); `stage1.overrides` win."""
    ecfg = config_from_dict(stage1_raw(cfg, pairs_path), "<stage 1 of the Stage 2 config>", list(cfg.stage1.overrides))
    return check_config(ecfg, "<stage 1 of the Stage 2 config>").cfg


def stage1_train_pairs(cfg: Stage2Config, pairs_path: Path) -> dict[str, list[PreferencePair]]:
    """Each client's Stage 1 training split, the very draw Stage 1 trains on: its validation and test pairs
    stay out of anything else a client trains (FedDPO's offline DPO)."""
    ecfg = stage1_config(cfg, pairs_path)
    splits = split_clients(load_pairs(ecfg), ecfg.data.val_pairs, ecfg.data.test_pairs, ecfg.seed)
    return {s.client_id: s.train for s in splits}


def run_stage1(
    cfg: Stage2Config,
    pairs_path: Path,
    types: tuple[str, ...],
    log: Log = lambda line: None,
    saved: dict | None = None,
    save: Callable[[dict, bool], None] | None = None,
) -> Stage1Result:
    """FedVPA-GP (or a variant) over the pairs file with fedpref.experiments; each type's mean client latent (z
    from the client's own training pairs, no label leakage), for the seen and the unseen clients apart.

    `save(state, done)` after every round and at the end; `saved` (such a state) continues from it: the rounds
    left, then the evaluation (a finished state holds it, so nothing is run again)."""
    ecfg = stage1_config(cfg, pairs_path)
    setup = build_setup(ecfg)
    federation = inprocess_federation(ecfg, setup)
    method, transport, saved = cfg.stage1.method, federation.transport, saved or {}
    algorithm = build_algorithm(method, ecfg, federation.trained(), setup.init_state, setup.model, setup.unseen)
    if saved:
        vars(algorithm).update(saved["algorithm"])
        torch.set_rng_state(saved["torch_rng"])  # as it was when the state was saved, the rebuild's draws undone
    start = saved.get("next_round", 0)
    transport.begin_method(method, start, saved.get("client_memory"))

    def checkpoint(next_round: int) -> None:
        state = {"next_round": next_round, "algorithm": vars(algorithm), "client_memory": transport.memories()}
        save(state | generator_state(), False)

    reporter = round_reporter(log, f"stage 1 ({method}) round", cfg.stage1.rounds)
    if "evaluation" not in saved:
        run_rounds(algorithm, transport, reporter, start, checkpoint if save else None, checkpoint_every=1)
    seen = [cid for cid in setup.clients if cid not in set(setup.unseen)]
    evaluation = saved.get("evaluation") or ask_selector(algorithm, transport, seen, "selector")
    unseen = saved.get("unseen_evaluation")
    if unseen is None and setup.unseen:
        unseen = ask_selector(algorithm, transport, setup.unseen, "selector/unseen")
    if save and "evaluation" not in saved:
        save(
            {"algorithm": vars(algorithm), "evaluation": evaluation, "unseen_evaluation": unseen} | generator_state(),
            True,
        )
    selector = variational_model(setup.model, algorithm.spec)
    load_trainable_state(selector, algorithm.global_state)
    center = latent_center(algorithm.center_payload(), next(selector.parameters()).device)
    latents = type_latents(selector, evaluation, types, center)
    if unseen:
        latents |= type_latents(selector, unseen, types, center, UNSEEN)
    return Stage1Result(selector, latents, evaluation, unseen, list(setup.unseen))


def type_latents(selector, evaluation: dict, types: tuple[str, ...], center: tuple, suffix: str = "") -> dict:
    """type + suffix -> the mean latent of the evaluated clients of that type, as the selector reads it."""
    device = next(selector.parameters()).device
    latents = {}
    for group in types:
        means = [r["latent_mean"] for r in evaluation["per_client"].values() if r["group"] == group]
        with torch.no_grad():  # z as the selector reads it (centred, scaled, in its basis)
            latents[group + suffix] = selector.selector_input(torch.tensor(means, device=device).mean(0), *center)
    return latents
