"""One experiment end to end: set up once, run each method, write the run folder."""

from __future__ import annotations

import platform
import shutil
import time
from dataclasses import replace
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from fedpref import __version__
from fedpref.algorithms.registry import method_spec
from fedpref.config import ExperimentConfig
from fedpref.engines.checkpoint import CheckpointStore
from fedpref.errors import FedprefError
from fedpref.experiments import outputs, tracking
from fedpref.experiments.orchestrator import (
    FLOWER,
    Plan,
    check_config,
    checkpoint_saver,
    load_resume_state,
    open_run_dir,
    run_methods,
)
from fedpref.experiments.runner import INPROCESS, Federation, inprocess_federation
from fedpref.experiments.setup import Setup, build_setup
from fedpref.reports import plots, tables
from fedpref.results import RESULTS_FILE, Curves, Provenance, ResultsWriter, RunResults, load_results


def pools_raw_data(name: str) -> bool:
    """A centralized reference (CL, Multi-CL): it has no federated form, so it always runs in-process."""
    return method_spec(name).centralized


def run_experiment(
    cfg: ExperimentConfig,
    run_dir: Path,
    console: Console,
    resume: bool = False,
    engine: str = INPROCESS,
    figure_format: str = "png",
) -> dict:
    """Check `cfg` (orchestrator.check_config) and run its plan into `run_dir` (execute); the run folder must be
    ready (orchestrator.open_run_dir). Returns the results as written."""
    return execute(check_config(cfg, engine=engine), run_dir, console, resume, figure_format)


def execute(plan: Plan, run_dir: Path, console: Console, resume: bool = False, figure_format: str = "png") -> dict:
    """Run every method of the plan and write config.toml, rounds.jsonl, the results, table.md and the plots
    (as `figure_format`: png, pdf or svg); return the results as written.

    Federated methods run on the plan's engine ("inprocess" or "flower", the Simulation Engine); the centralized
    references pool raw data, so they always run in-process. Checkpoints go to `run_dir/checkpoints` on both
    engines; with `resume`, the run continues from the last complete one and ends with the same results as
    an uninterrupted run.
    """
    cfg = plan.cfg
    store = CheckpointStore(run_dir / "checkpoints")
    saved = load_resume_state(store, cfg) if resume else None
    if saved is None:
        outputs.write_config(cfg, run_dir)
    results = RunResults.from_dict(saved["results"]) if saved else new_results(cfg)
    writer = ResultsWriter(run_dir)
    writer.start(results)
    try:
        _run_methods(plan, run_dir, console, results, writer, store, saved, figure_format)
    except BaseException as e:  # Ctrl-C included: the file says the run stopped, and why
        writer.fail(results, e)
        raise
    return results.to_dict()


def _run_methods(plan: Plan, run_dir, console, results: RunResults, writer, store, saved, figure_format) -> None:
    cfg = plan.cfg
    log = outputs.RoundLog(run_dir / "rounds.jsonl", saved["rounds"] if saved else [])
    tracker = tracking.open_tracking(cfg, run_dir)
    tracker.log_config(cfg.to_dict())
    started = time.perf_counter()
    with _progress(console) as progress:
        log = tracking.TrackedLog(log, tracker.log_round, getattr(progress, "log_round", None))
        setup = _prepared(cfg, progress)
        results.data = data_summary(cfg, setup)
        report = _reporter(progress)
        local = inprocess_federation(cfg, setup, report)
        pending = [name for name in plan.methods if name not in results.methods]
        save = checkpoint_saver(store, cfg, results, log.records)

        def on_method(name: str, result: dict) -> None:
            tracker.log_method(name, result)
            writer.write(results)

        def run_pending(federation: Federation) -> None:
            run_methods(
                plan,
                pending,
                federation,
                results,
                save,
                saved,
                local=local,
                setup=setup,
                progress=report,
                on_round=log,
                models_dir=run_dir / "models",
                on_method=on_method,
            )

        if plan.engine == FLOWER and not all(pools_raw_data(name) for name in pending):
            from fedpref.engines.flower.run import run_simulated

            memory_dir = run_dir / "checkpoints" / "clients"  # each client's own memory snapshots (for resuming)
            run_simulated(cfg, lambda transport: run_pending(flower_federation(transport)), memory_dir=memory_dir)
        else:
            run_pending(local)
    results.timing = {"wall_s": round(time.perf_counter() - started, 1)}
    writer.finish(results)
    _write_tables_and_figures(results, run_dir, setup, figure_format)
    _print_tables(results, console)
    tracker.finish(results)
    console.print(f"wrote {run_dir} in {results.timing['wall_s']} s")


def flower_federation(transport) -> Federation:
    """The clients the Flower transport found on the grid (in split order), reached through it."""
    return Federation(transport, transport.peers.infos, list(transport.peers.held_out), FLOWER)


def new_results(cfg: ExperimentConfig) -> RunResults:
    provenance = Provenance(
        fedpref_version=__version__,
        config_hash=cfg.digest(),
        python=platform.python_version(),
        torch=torch.__version__,
        versions=tracking.package_versions(),
        git_commit=tracking.git_commit(),
    )
    return RunResults(seed=cfg.seed, provenance=provenance)


def data_summary(cfg: ExperimentConfig, setup) -> dict:
    return {
        "clients": len(setup.splits),
        "train_pairs": sum(len(s.train) for s in setup.splits),
        "val_pairs_per_client": cfg.data.val_pairs,
        "test_pairs_per_client": cfg.data.test_pairs,
        "unseen_clients": list(setup.unseen),
    }


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

    results, names = _finished_run(run_dir, methods)
    writer = ResultsWriter(run_dir)
    cfg = load_config(run_dir / "config.toml", overrides)
    with _progress(console) as progress:
        setup = _prepared(cfg, progress)
    for name in names:
        path = run_dir / "models" / f"{name}.pt"
        with _progress(console) as progress:
            report = _reporter(progress)
            diagnostics = run_diagnostics(name, load_initializations(path), cfg, setup, report)
        results.methods[name].diagnostics = diagnostics
        writer.write(results)  # the status stays what it was: diagnosing does not finish or fail the run
    (run_dir / "table.md").write_text(tables.results_markdown(results.methods), encoding="utf-8")
    _print_tables(results, console)
    return results.to_dict()


def personalize_run(
    run_dir: Path,
    out: Path,
    steps: list[int],
    console: Console,
    overrides: list[str] | None = None,
    methods: list[str] | None = None,
    overwrite: bool = False,
    figure_format: str = "png",
) -> dict:
    """Personalize a finished run's saved initializations again at `steps` (and other `personalization.*`
    settings), without repeating its global phase; write the result to `out` as a run folder of its own (its
    config says the new settings, its results keep the run's partitions, and its diagnostics where only the
    steps changed). Steps the run measured give its numbers again: the clients draw the same batches. Refuses a
    non-empty `out` unless `overwrite`."""
    from fedpref.config import load_config

    results, names = _finished_run(run_dir, methods)
    if bad := [o for o in overrides or [] if not o.startswith("personalization.")]:
        raise FedprefError(f"only personalization.* settings can change after training; not {', '.join(bad)}")
    original = load_config(run_dir / "config.toml")
    cfg = load_config(run_dir / "config.toml", [*(overrides or []), f"personalization.steps={list(steps)}"])
    check_config(cfg, str(run_dir / "config.toml"))
    keeps_diagnostics = cfg.personalization == replace(original.personalization, steps=cfg.personalization.steps)
    if out.resolve() == run_dir.resolve():
        raise FedprefError(f"{out}: the output must be a new folder, not the run itself")
    open_run_dir(out, overwrite, resumable=False)
    outputs.write_config(cfg, out)
    started = time.perf_counter()
    with _progress(console) as progress:
        setup = _prepared(cfg, progress)
    again = replace(results, provenance=replace(results.provenance, config_hash=cfg.digest()), methods={})
    again.personalized_from = {"run": str(run_dir), "config_hash": results.provenance.config_hash}
    again.timing = None  # the source run's; this run's own comes at its end
    writer = ResultsWriter(out)
    writer.start(again)
    try:
        _personalize_methods(run_dir, out, names, cfg, setup, results, again, keeps_diagnostics, writer, console)
    except BaseException as e:
        writer.fail(again, e)
        raise
    again.timing = {"wall_s": round(time.perf_counter() - started, 1)}
    writer.finish(again)
    _write_tables_and_figures(again, out, setup, figure_format)
    _print_tables(again, console)
    console.print(f"wrote {out} in {again.timing['wall_s']} s")
    return again.to_dict()


def _personalize_methods(run_dir, out, names, cfg, setup, results, again, keeps_diagnostics, writer, console) -> None:
    from fedpref.experiments.runner import load_initializations, personalize_saved

    for name in names:
        (out / "models").mkdir(exist_ok=True)
        saved = shutil.copy2(run_dir / "models" / f"{name}.pt", out / "models" / f"{name}.pt")
        with _progress(console) as progress:
            curves = personalize_saved(name, load_initializations(saved), cfg, setup, _reporter(progress))
        entry = replace(results.methods[name], personalization=Curves.from_dict(curves))
        if not keeps_diagnostics:
            entry.diagnostics = {}
        again.methods[name] = entry
        writer.write(again)


def _finished_run(run_dir: Path, methods: list[str] | None) -> tuple[RunResults, list[str]]:
    """A run's results and the methods asked for (every one by default), each with its saved model."""
    if not (run_dir / RESULTS_FILE).is_file():
        raise FedprefError(f"{run_dir}: no {RESULTS_FILE} (not a finished fedpref run)")
    results = load_results(run_dir)
    unknown = sorted(set(methods or []) - set(results.methods))
    if unknown:
        raise FedprefError(f"{run_dir}: no method {', '.join(unknown)} in this run ({', '.join(results.methods)})")
    names = methods or list(results.methods)
    for name in names:
        if not (path := run_dir / "models" / f"{name}.pt").is_file():
            raise FedprefError(f"{path}: missing; re-run the experiment to save its initializations")
    return results, names


def _write_tables_and_figures(results: RunResults, run_dir: Path, setup, figure_format: str) -> None:
    (run_dir / "table.md").write_text(tables.results_markdown(results.methods), encoding="utf-8")
    truth = {s.client_id: s.group for s in setup.splits}  # rows and bands by true group in the figures
    plots.plot_group_curves(results.methods, run_dir / "personalization.png", truth, figure_format)
    plots.plot_assignments(results.methods, run_dir / "assignments.png", truth, figure_format)
    plots.plot_latents(results.methods, run_dir / "latents.png", figure_format)


def _prepared(cfg: ExperimentConfig, progress: Progress | tracking.LineProgress) -> Setup:
    """The data and model of `cfg`, with a progress line while they load."""
    task = progress.add_task("preparing data and model", total=None)
    setup = build_setup(cfg)
    progress.update(task, total=1, completed=1)
    return setup


def _progress(console: Console) -> Progress | tracking.LineProgress:
    if not console.is_terminal:  # a log file: plain flushed lines instead of bars that only render at the end
        return tracking.LineProgress(console)
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    )


def _print_tables(results: RunResults, console: Console) -> None:
    methods = results.methods
    shown = [("Personalized accuracy (mean ± std over clients)", tables.headline_rows(methods))]
    if any(r.curves.by_group for r in methods.values()):
        shown.append(("Per-group accuracy at step 0", tables.group_rows(methods, 0)))
    diagnostics = {name: r.diagnostics for name, r in methods.items() if r.diagnostics}
    if diagnostics:
        from fedpref.diagnostics.report import table_rows

        shown.append(("Diagnostics (Tables 1 and 2 of the FedGD paper)", table_rows(diagnostics)))
    if any(r.selector for r in methods.values()):
        shown.append(("Latent-conditioned selectors (FedVPA-GP paper, Tables 1-2)", tables.selector_rows(methods)))
    if any(r.privacy for r in methods.values()):
        shown.append(("Client-level differential privacy", tables.privacy_rows(methods)))
    for title, (header, rows) in shown:
        table = Table(title=title)
        for h in header:
            table.add_column(h, justify="left" if h == "method" else "right")
        for row in rows:
            table.add_row(*row)
        console.print(table)
