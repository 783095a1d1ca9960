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
from fedpref.errors import FedprefError
from fedpref.experiments import outputs, plots, tables
from fedpref.experiments.runner import run_method
from fedpref.experiments.setup import build_setup


def run_experiment(cfg: ExperimentConfig, run_dir: Path, console: Console) -> dict:
    """Run every method of `cfg` and write config.toml, rounds.jsonl, results.json, table.md and the plot."""
    torch.set_num_threads(max(torch.get_num_threads(), 1))
    outputs.write_config(cfg, run_dir)
    started = time.perf_counter()
    results = {
        "fedpref_version": __version__,
        "config_hash": cfg.digest(),
        "seed": cfg.seed,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "methods": {},
    }
    with _progress(console) as progress:
        task = progress.add_task("preparing data and model", total=None)
        setup = build_setup(cfg)
        results["data"] = {
            "clients": len(setup.splits),
            "train_pairs": sum(len(s.train) for s in setup.splits),
            "val_pairs_per_client": cfg.data.val_pairs,
            "test_pairs_per_client": cfg.data.test_pairs,
        }
        progress.update(task, total=1, completed=1)
        tasks: dict[str, int] = {}

        def report(what: str, done: int, total: int) -> None:
            if what not in tasks:
                tasks[what] = progress.add_task(what, total=total)
            progress.update(tasks[what], completed=done)

        log = outputs.RoundLog(run_dir / "rounds.jsonl")
        for name in cfg.algorithm.methods:
            results["methods"][name], _ = run_method(name, cfg, setup, report, log, run_dir / "models")
            outputs.write_json(results, run_dir / "results.json")
    results["timing"] = {"wall_s": round(time.perf_counter() - started, 1)}
    outputs.write_json(results, run_dir / "results.json")
    (run_dir / "table.md").write_text(tables.results_markdown(results["methods"]), encoding="utf-8")
    plots.plot_group_curves(results["methods"], run_dir / "personalization.png")
    plots.plot_assignments(results["methods"], run_dir / "assignments.png")
    _print_tables(results, console)
    console.print(f"wrote {run_dir} in {results['timing']['wall_s']} s")
    return results


def diagnose_run(run_dir: Path, console: Console, overrides: list[str] | None = None) -> dict:
    """Compute the diagnostics for the saved initializations of a finished run; update its results and tables."""
    from fedpref.config import load_config
    from fedpref.experiments.runner import load_initializations, run_diagnostics

    results_path = run_dir / "results.json"
    if not results_path.is_file():
        raise FedprefError(f"{run_dir}: no results.json (not a finished fedpref run)")
    cfg = load_config(run_dir / "config.toml", overrides)
    results = json.loads(results_path.read_text(encoding="utf-8"))
    with _progress(console) as progress:
        progress.add_task("preparing data and model", total=None)
        setup = build_setup(cfg)
    for name in results["methods"]:
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
    for title, (header, rows) in shown:
        table = Table(title=title)
        for h in header:
            table.add_column(h, justify="left" if h == "method" else "right")
        for row in rows:
            table.add_row(*row)
        console.print(table)
