"""Sweeps: one run folder per seed and grid combination, resumable, indexed in sweep.json."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from fedpref.config import ExperimentConfig, load_config
from fedpref.errors import ConfigError, FedprefError
from fedpref.results import ResultsError, has_results, load_results


@dataclass
class Cell:
    """One run of a sweep: `seed` and one value per grid key (as written on the command line)."""

    seed: int
    values: dict[str, str]
    folder: Path
    cfg: Any  # an ExperimentConfig, or the config of another kind of run (SweepKind)
    state: str = "new"  # new | interrupted (folder with a partial run) | finished

    @property
    def label(self) -> str:
        return cell_label(self.seed, self.values)


@dataclass(frozen=True)
class SweepKind:
    """What a sweep's cells are: how a cell's config loads ((path, overrides) -> config, with `digest()`), what
    its folder holds (new, interrupted or finished) and how it runs or continues (returns nothing)."""

    load: Callable[[Path, list[str]], Any]
    state: Callable[[Cell], str]
    run: Callable[[Cell, Console, str], None]


def cell_label(seed: int, values: dict[str, str]) -> str:
    return " ".join([f"seed={seed}", *(f"{k}={v}" for k, v in values.items())])


def parse_seeds(text: str) -> list[int]:
    """'0,1,2' -> [0, 1, 2]."""
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        seeds = []
    if not seeds or len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds {text!r}: expected distinct integers separated by commas, e.g. --seeds 0,1,2")
    return seeds


def parse_grid(items: Sequence[str]) -> dict[str, list[str]]:
    """['train.lr=1e-3,3e-4'] -> {'train.lr': ['1e-3', '3e-4']}; values stay text, parsed later like --set."""
    grid: dict[str, list[str]] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        values = [v.strip() for v in text.split(",")]
        if not sep or not key or not all(values):
            raise ConfigError(f"--grid {item}: expected KEY=V1,V2,..., e.g. --grid train.lr=1e-3,3e-4")
        if any(v[0] in "[{" for v in values):
            # a list or table value would itself contain commas: give it with --set, one sweep per value
            raise ConfigError(f"--grid {item}: only scalar values can be swept (numbers, strings, booleans)")
        if key == "seed":
            raise ConfigError("--grid seed=...: give the seeds with --seeds")
        if key in grid or len(set(values)) != len(values):
            raise ConfigError(f"--grid {item}: a key or value appears twice")
        grid[key] = values
    return grid


def folder_part(key: str, value: str) -> str:
    """'train.lr', '1e-3' -> 'train.lr=1e-3'; anything but letters, digits and ._+=- becomes '_'."""
    return re.sub(r"[^A-Za-z0-9._+=-]", "_", f"{key}={value}")


def plan_cells(
    config: Path,
    seeds: Sequence[int] | None,
    grid: dict[str, list[str]],
    overrides: Sequence[str],
    out: Path,
    kind: SweepKind | None = None,
) -> list[Cell]:
    """Every cell with its validated config (seeds outer, grid inner): OUT/<key=value>/.../seed=<seed>.

    Raises before anything runs when a config is invalid or a folder holds a run of another config. `kind`:
    experiments (the default) or another kind of run (Stage 2).
    """
    kind = kind or EXPERIMENTS
    if any(o.partition("=")[0].strip() == "seed" for o in overrides):
        raise ConfigError("--set seed=...: give the seeds with --seeds")
    base = kind.load(config, list(overrides))
    cells = []
    for seed in seeds if seeds is not None else [base.seed]:
        for combo in itertools.product(*grid.values()):
            values = dict(zip(grid, combo))
            cell_overrides = [*overrides, *(f"{k}={v}" for k, v in values.items()), f"seed={seed}"]
            folder = out.joinpath(*(folder_part(k, v) for k, v in values.items()), f"seed={seed}")
            try:
                cfg = kind.load(config, cell_overrides)
            except ConfigError as e:
                raise ConfigError(f"sweep cell {cell_label(seed, values)}: {e}") from None
            cells.append(Cell(seed, values, folder, cfg))
    check_distinct(cells)
    for cell in cells:
        cell.state = kind.state(cell)
    return cells


def check_distinct(cells: Sequence[Cell]) -> None:
    """Two cells must not share a folder (values equal after cleaning) or a config (e.g. 1e-3 and 0.001)."""
    for attr, what in ((lambda c: c.folder, "folder"), (lambda c: c.cfg.digest(), "config")):
        seen: dict = {}
        for cell in cells:
            other = seen.setdefault(attr(cell), cell)
            if other is not cell:
                raise ConfigError(f"sweep cells '{other.label}' and '{cell.label}' have the same {what}")


def cell_state(cell: Cell) -> str:
    """finished (complete results of this config), interrupted (a partial run of it) or new (no run yet)."""
    config_path = cell.folder / "config.toml"
    if not cell.folder.is_dir() or not any(cell.folder.iterdir()):
        return "new"
    if not config_path.is_file():
        raise FedprefError(f"{cell.folder}: not empty and not a fedpref run (no config.toml); choose another --out")
    try:
        digest = load_config(config_path).digest()
    except ConfigError as e:
        raise FedprefError(f"{cell.folder}: its config.toml does not load ({e})") from None
    if digest != cell.cfg.digest():
        raise FedprefError(
            f"{cell.folder}: holds a run of another config (hash {digest}, this cell {cell.cfg.digest()}); "
            "choose another --out"
        )
    return "finished" if results_complete(cell.folder, cell.cfg) else "interrupted"


def results_complete(run_dir: Path, cfg: ExperimentConfig) -> bool:
    """The run's status is finished (written after its last method) and it holds every method of `cfg`."""
    if not has_results(run_dir):
        return False
    try:
        results = load_results(run_dir)
    except ResultsError:
        return False
    return results.finished and set(cfg.algorithm.methods) <= set(results.methods)


def sweep_index(cells: Sequence[Cell], out: Path, spec: dict) -> dict:
    status = {"new": "pending", "interrupted": "interrupted", "finished": "skipped"}
    return {
        **spec,
        "cells": [
            {
                "folder": cell.folder.relative_to(out).as_posix(),
                "seed": cell.seed,
                "overrides": cell.values,
                "config_hash": cell.cfg.digest(),
                "status": status[cell.state],
            }
            for cell in cells
        ],
    }


def write_index(index: dict, out: Path) -> None:
    """Write `index` to OUT/sweep.json, keeping the cells other sweeps into OUT listed there (two `fedpref sweep
    --seeds` at once into one folder); the top-level keys are those of the command writing now."""
    from fedpref.experiments.outputs import write_json

    out.mkdir(parents=True, exist_ok=True)
    path = out / "sweep.json"
    with index_lock(out):
        ours = {cell["folder"]: cell for cell in index["cells"]}
        try:
            listed = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        except (FileNotFoundError, json.JSONDecodeError):
            listed = []
        # the listed order, this sweep's entries in place of their old ones, then this sweep's new cells
        folders = [cell["folder"] for cell in listed]
        cells = [ours.get(cell["folder"], stale_as_interrupted(cell)) for cell in listed]
        cells += [cell for folder, cell in ours.items() if folder not in folders]
        write_json(index | {"cells": cells}, path)


def running_entry() -> dict:
    """A running cell's status with the process that runs it, so that a later writer can tell a killed one."""
    return {"status": "running", "pid": os.getpid(), "host": socket.gethostname()}


def stale_as_interrupted(entry: dict) -> dict:
    """A cell listed as running by a process of this host that no longer exists (SIGKILL, out of memory, a lost
    session: no handler ran) is interrupted; one of another host, or without a pid, stays as listed."""
    if entry.get("status") != "running" or entry.get("host") != socket.gethostname() or "pid" not in entry:
        return entry
    if process_alive(int(entry["pid"])):
        return entry
    entry = dict(entry)
    settle(entry, "interrupted")
    return entry


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only checks that the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


@contextlib.contextmanager
def index_lock(out: Path) -> Iterator[None]:
    """An exclusive lock on OUT/.sweep.lock (POSIX; without fcntl the index is written unlocked)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(out / ".sweep.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def run_sweep(
    cells: Sequence[Cell],
    out: Path,
    console: Console,
    spec: dict,
    engine: str = "inprocess",
    say: Callable[[str], None] | None = None,
    kind: SweepKind | None = None,
) -> dict:
    """Run the cells in turn: skip finished ones, resume interrupted ones (`fedpref run --resume`), run the rest.

    `sweep.json` in `out` is rewritten after every cell; statuses: pending, running, done, resumed, skipped
    (finished before), interrupted (partial, not yet resumed, or stopped by Ctrl-C or SIGTERM) and failed (with
    the error; the sweep stops). A running cell names its process (pid, host): a sweep killed without a word
    (SIGKILL) leaves it running, and the next sweep into `out` on that host lists it as interrupted.
    """
    say = say or (lambda line: print(line, flush=True))
    kind = kind or EXPERIMENTS
    index = sweep_index(cells, out, spec)
    write_index(index, out)
    for i, (cell, entry) in enumerate(zip(cells, index["cells"]), start=1):
        prefix = f"[{i}/{len(cells)}] {cell.label}"
        if cell.state == "finished":
            say(f"{prefix}: skipped (finished)")
            continue
        say(f"{prefix}: {'resuming' if cell.state == 'interrupted' else 'running'} in {cell.folder}")
        entry |= running_entry()
        write_index(index, out)
        try:
            started = time.perf_counter()
            kind.run(cell, console, engine)
            wall_s = time.perf_counter() - started
        except (KeyboardInterrupt, SystemExit):  # sweep.json must not claim the cell is still running
            settle(entry, "interrupted")
            write_index(index, out)
            say(f"{prefix}: interrupted (the same command continues it)")
            raise
        except BaseException as e:
            settle(entry, "failed", error=str(e) or type(e).__name__)
            write_index(index, out)
            say(f"{prefix}: failed ({entry['error']})")
            raise
        settle(entry, "resumed" if cell.state == "interrupted" else "done", wall_s=round(wall_s, 1))
        write_index(index, out)
        say(f"{prefix}: {'resumed, ' if cell.state == 'interrupted' else ''}done in {wall_s:.0f} s")
    return index


def settle(entry: dict, status: str, **fields: object) -> None:
    """A cell that no process runs any more: its status and fields, without the running process's pid and host."""
    entry.pop("pid", None)
    entry.pop("host", None)
    entry |= {"status": status, **fields}


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM (`kill`, a batch scheduler's stop) raises KeyboardInterrupt, as Ctrl-C does, so
    the running cell is recorded as interrupted; Python's default would end the process without a word."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_cell(cell: Cell, console: Console, engine: str) -> None:
    """Run (or continue) one cell through the orchestrator, as `fedpref run [--resume]` does."""
    from fedpref.experiments.experiment import run_experiment
    from fedpref.experiments.orchestrator import open_run_dir

    resume = cell.state == "interrupted"
    open_run_dir(cell.folder, resume=resume)
    run_experiment(cell.cfg, cell.folder, console, resume=resume, engine=engine)


def _load_experiment(path: Path, overrides: list[str]) -> ExperimentConfig:
    return load_config(path, overrides)


def _run_experiment_cell(cell: Cell, console: Console, engine: str) -> None:
    run_cell(cell, console, engine)  # looked up when called, so that a test can stand in for run_cell


EXPERIMENTS = SweepKind(_load_experiment, cell_state, _run_experiment_cell)  # `fedpref run`'s experiments
