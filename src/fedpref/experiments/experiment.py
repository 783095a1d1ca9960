"""One experiment end to end: set up once, run each method, write the run folder."""

from __future__ import annotations

import platform
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from fedpref import __version__
from fedpref.config import ExperimentConfig
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
            results["methods"][name], _ = run_method(name, cfg, setup, report, log)
            outputs.write_json(results, run_dir / "results.json")
    results["timing"] = {"wall_s": round(time.perf_counter() - started, 1)}
    outputs.write_json(results, run_dir / "results.json")
    (run_dir / "table.md").write_text(tables.results_markdown(results["methods"]), encoding="utf-8")
    plots.plot_group_curves(results["methods"], run_dir / "personalization.png")
    plots.plot_assignments(results["methods"], run_dir / "assignments.png")
    _print_tables(results, console)
    console.print(f"wrote {run_dir} in {results['timing']['wall_s']} s")
    return results


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    )


def _print_tables(results: dict, console: Console) -> None:
    methods = results["methods"]
    for title, (header, rows) in [("Personalized accuracy (mean ± std over clients)", tables.headline_rows(methods))]:
        table = Table(title=title)
        for h in header:
            table.add_column(h, justify="right" if h != "method" else "left")
        for row in rows:
            table.add_row(*row)
        console.print(table)
    if any(r["personalization"]["by_group"] for r in methods.values()):
        header, rows = tables.group_rows(methods, 0)
        table = Table(title="Per-group accuracy at step 0")
        for h in header:
            table.add_column(h)
        for row in rows:
            table.add_row(*row)
        console.print(table)
