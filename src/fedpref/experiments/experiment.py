"""One experiment end to end: set up once, run each method, write the run folder."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from fedpref import __version__
from fedpref.config import ExperimentConfig
from fedpref.engines.checkpoint import CheckpointStore
from fedpref.errors import FedprefError
from fedpref.experiments import outputs, plots, tables
from fedpref.experiments.methods import build_algorithm
from fedpref.experiments.runner import finish_method, run_global
from fedpref.experiments.setup import build_setup


def run_experiment(
    cfg: ExperimentConfig, run_dir: Path, console: Console, resume: bool = False, engine: str = "inprocess"
) -> dict:
    """Run every method of `cfg` and write config.toml, rounds.jsonl, results.json, table.md and the plots.

    Checkpoints go to `run_dir/checkpoints`; with `resume`, the run continues from the last complete one
    and ends with the same results as an uninterrupted run.
    """
    store = CheckpointStore(run_dir / "checkpoints")
    saved = load_resume_state(store, cfg) if resume else None
    if saved is None:
        outputs.write_config(cfg, run_dir)
    results = saved["results"] if saved else new_results(cfg)
    log = outputs.RoundLog(run_dir / "rounds.jsonl", saved["rounds"] if saved else [])
    started = time.perf_counter()
    with _progress(console) as progress:
        task = progress.add_task("preparing data and model", total=None)
        setup = build_setup(cfg)
        results["data"] = data_summary(cfg, setup)
        progress.update(task, total=1, completed=1)
        report = _reporter(progress)
        pending = [name for name in cfg.algorithm.methods if name not in results["methods"]]
        if engine == "flower":  # the Flower Simulation Engine, without checkpoints (docs/flower.md)
            from fedpref.engines.flower.run import run_flower_experiment

            results["methods"] |= run_flower_experiment(pending, cfg, setup, report, log, run_dir / "models")
            pending = []
        for name in pending:
            current = saved["current"] if saved and saved["current"] and saved["current"]["name"] == name else None
            results["methods"][name] = run_checkpointed(name, cfg, setup, store, results, log, current, report, run_dir)
            store.save(checkpoint_payload(cfg, results, log.records, None))
            outputs.write_json(results, run_dir / "results.json")
    results["timing"] = {"wall_s": round(time.perf_counter() - started, 1)}
    outputs.write_json(results, run_dir / "results.json")
    (run_dir / "table.md").write_text(tables.results_markdown(results["methods"]), encoding="utf-8")
    plots.plot_group_curves(results["methods"], run_dir / "personalization.png")
    plots.plot_assignments(results["methods"], run_dir / "assignments.png")
    plots.plot_latents(results["methods"], run_dir / "latents.png")
    _print_tables(results, console)
    console.print(f"wrote {run_dir} in {results['timing']['wall_s']} s")
    return results


def new_results(cfg: ExperimentConfig) -> dict:
    return {
        "fedpref_version": __version__,
        "config_hash": cfg.digest(),
        "seed": cfg.seed,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "methods": {},
    }


def data_summary(cfg: ExperimentConfig, setup) -> dict:
    return {
        "clients": len(setup.splits),
        "train_pairs": sum(len(s.train) for s in setup.splits),
        "val_pairs_per_client": cfg.data.val_pairs,
        "test_pairs_per_client": cfg.data.test_pairs,
        "unseen_clients": list(setup.unseen),
    }


def run_checkpointed(name, cfg, setup, store, results, log, current, report, run_dir) -> dict:
    """One method's global phase with checkpoints (restored from `current` when resuming), then personalization."""
    started = time.perf_counter()
    algorithm = build_algorithm(name, cfg, setup.infos, setup.init_state, setup.model, setup.unseen)
    start_round = 0
    clear_memories(setup.clients)  # a client's private state belongs to one method's run
    if current is not None:
        vars(algorithm).update(current["algorithm"])
        restore_memories(setup.clients, current.get("client_memory", {}))
        start_round = current["next_round"]

    def on_round(record: dict) -> None:
        log(record)
        if should_checkpoint(algorithm, record["round"], cfg.federation.checkpoint_every):
            state = {
                "name": name,
                "next_round": record["round"] + 1,
                "algorithm": vars(algorithm),
                "client_memory": client_memories(setup.clients),
            }
            store.save(checkpoint_payload(cfg, results, log.records, state))

    records = run_global(algorithm, cfg, setup, report, on_round, start_round)
    result = finish_method(algorithm, cfg, setup, report, run_dir / "models")
    result["timing"] = {
        "wall_s": round(time.perf_counter() - started, 2),
        "global_s": sum(r["wall_s"] for r in records),
    }
    return result


def client_memories(clients) -> dict[str, dict]:
    """Each client's private state (e.g. FedVPA-GP's Gumbel logits): a simulation checkpoint holds it for them."""
    memories = getattr(clients, "memories", None)  # OnDemandClients keeps memories apart from encodings
    if memories is None:
        memories = {cid: c.memory for cid, c in clients.items()}
    return {cid: m for cid, m in memories.items() if m}


def restore_memories(clients, saved: dict[str, dict]) -> None:
    stored = getattr(clients, "memories", None)
    for cid, memory in saved.items():
        target = stored.setdefault(cid, {}) if stored is not None else clients[cid].memory
        target.clear()
        target.update(memory)


def clear_memories(clients) -> None:
    for memory in client_memories(clients).values():
        memory.clear()


def should_checkpoint(algorithm, round_idx: int, every: int) -> bool:
    """Every `every` rounds, at the end of each phase of the algorithm, and at the end of the global phase."""
    done = round_idx + 1
    phase_ends = set(getattr(algorithm, "phase_end_rounds", ())) | {algorithm.num_rounds, algorithm.num_rounds + 1}
    return done in phase_ends or (every > 0 and done % every == 0)


def checkpoint_payload(cfg: ExperimentConfig, results: dict, rounds: list[dict], current: dict | None) -> dict:
    return {"config_hash": cfg.digest(), "results": results, "rounds": list(rounds), "current": current}


def load_resume_state(store: CheckpointStore, cfg: ExperimentConfig) -> dict | None:
    """The last complete checkpoint, checked against the config being resumed (None: nothing to resume)."""
    saved = store.load()
    if saved is not None and saved["config_hash"] != cfg.digest():
        raise FedprefError(
            f"{store.folder}: the checkpoint belongs to a different config (hash {saved['config_hash']}, "
            f"this config {cfg.digest()}); resume with the run's own config.toml"
        )
    return saved


def _reporter(progress: Progress):
    tasks: dict[str, int] = {}

    def report(what: str, done: int, total: int) -> None:
        if what not in tasks:
            tasks[what] = progress.add_task(what, total=total)
        progress.update(tasks[what], completed=done)

    return report


def diagnose_run(
    run_dir: Path, console: Console, overrides: list[str] | None = None, methods: list[str] | None = None
) -> dict:
    """Compute the diagnostics for the saved initializations of a finished run (or of `methods` of it);
    update its results and tables."""
    from fedpref.config import load_config
    from fedpref.experiments.runner import load_initializations, run_diagnostics

    results_path = run_dir / "results.json"
    if not results_path.is_file():
        raise FedprefError(f"{run_dir}: no results.json (not a finished fedpref run)")
    cfg = load_config(run_dir / "config.toml", overrides)
    results = json.loads(results_path.read_text(encoding="utf-8"))
    unknown = sorted(set(methods or []) - set(results["methods"]))
    if unknown:
        raise FedprefError(f"{run_dir}: no method {', '.join(unknown)} in this run ({', '.join(results['methods'])})")
    with _progress(console) as progress:
        progress.add_task("preparing data and model", total=None)
        setup = build_setup(cfg)
    for name in methods or list(results["methods"]):
        path = run_dir / "models" / f"{name}.pt"
        if not path.is_file():
            raise FedprefError(f"{path}: missing; re-run the experiment to save its initializations")
        console.print(f"diagnosing {name} ...")
        results["methods"][name]["diagnostics"] = run_diagnostics(name, load_initializations(path), cfg, setup)
        outputs.write_json(results, results_path)
    (run_dir / "table.md").write_text(tables.results_markdown(results["methods"]), encoding="utf-8")
    _print_tables(results, console)
    return results


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    )


def _print_tables(results: dict, console: Console) -> None:
    methods = results["methods"]
    shown = [("Personalized accuracy (mean ± std over clients)", tables.headline_rows(methods))]
    if any(r["personalization"]["by_group"] for r in methods.values()):
        shown.append(("Per-group accuracy at step 0", tables.group_rows(methods, 0)))
    diagnostics = {name: r["diagnostics"] for name, r in methods.items() if r.get("diagnostics")}
    if diagnostics:
        from fedpref.diagnostics.report import table_rows

        shown.append(("Diagnostics (Tables 1 and 2 of the FedGD paper)", table_rows(diagnostics)))
    if any(r.get("selector") for r in methods.values()):
        shown.append(("Latent-conditioned selectors (FedVPA-GP paper, Tables 1-2)", tables.selector_rows(methods)))
    for title, (header, rows) in shown:
        table = Table(title=title)
        for h in header:
            table.add_column(h, justify="left" if h == "method" else "right")
        for row in rows:
            table.add_row(*row)
        console.print(table)
