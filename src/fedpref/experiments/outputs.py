"""The run folder: resolved config, results (fedpref.results), per-round log, tables and plots."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fedpref.config import ExperimentConfig, written_config
from fedpref.errors import FedprefError
from fedpref.results import ResultsError, has_results, load_results


def run_state(path: Path) -> str:
    """What an output folder holds: 'empty' (or missing), 'unstarted' (a run that stopped before any progress:
    no round logged, no checkpoint or model saved), 'unfinished' (a run `--resume` continues), 'finished' (its
    results say so) or 'other' (not a fedpref run)."""
    if not path.is_dir() or not any(path.iterdir()):
        return "empty"
    if not (path / "config.toml").is_file():
        return "other"
    if has_results(path):
        try:
            results = load_results(path)
        except ResultsError:
            return "unfinished"
        if results.finished:
            return "finished"
        if results.methods:
            return "unfinished"
        # the results are written from the start: without a method done, rounds and checkpoints tell
    rounds, checkpoints = path / "rounds.jsonl", path / "checkpoints"
    nothing_saved = not any(p.is_file() for p in checkpoints.rglob("*")) and not (path / "models").exists()
    no_rounds = not rounds.exists() or rounds.stat().st_size == 0
    if nothing_saved and no_rounds:
        return "unstarted"
    return "unfinished"


def prepare_run_dir(path: Path, overwrite: bool, resumable: bool = True, words: dict | None = None) -> Path:
    """Create the output folder; refuse to write into a non-empty one without `overwrite`.

    A run that failed before any progress (bad data, a model that does not load) is simply started again in
    place (its config.toml and rounds.jsonl are rewritten, nothing is deleted), so fixing the mistake and
    repeating the command works; a partial run of a `resumable` kind is pointed at
    `--resume`, which continues it, rather than at `--overwrite`, which would throw its rounds away. `words`
    names those options in the refusals (default: the command line's flags; the Python API passes its own).
    """
    w = words or {"resume": "--resume", "overwrite": "--overwrite", "out": "--out"}
    state = run_state(path)
    if overwrite and state != "empty":
        shutil.rmtree(path)
    if state == "empty" or overwrite or (resumable and state == "unstarted"):
        path.mkdir(parents=True, exist_ok=True)
        return path
    if resumable and state == "unfinished":
        raise FedprefError(
            f"output folder {path} holds an unfinished run; pass {w['resume']} to continue it, "
            f"{w['overwrite']} to start it again, or choose another {w['out']}"
        )
    raise FedprefError(f"output folder {path} is not empty; pass {w['overwrite']} or choose another {w['out']}")


def to_toml(data: dict, prefix: str = "") -> str:
    """A minimal TOML writer for the config's plain values (scalars and lists)."""
    scalars = [(k, v) for k, v in data.items() if not isinstance(v, dict)]
    tables = [(k, v) for k, v in data.items() if isinstance(v, dict)]
    lines = [f"{k} = {json.dumps(v)}" for k, v in scalars]
    for k, v in tables:
        lines += ["", f"[{prefix}{k}]", to_toml(v, f"{prefix}{k}.").strip()]
    return "\n".join(lines) + "\n"


def write_config(cfg: ExperimentConfig, run_dir: Path) -> None:
    (run_dir / "config.toml").write_text(to_toml(written_config(cfg)), encoding="utf-8")


def write_json(data: dict, path: Path) -> None:
    """Any JSON file atomically (the sweep's index); a run's results go through fedpref.results' writer."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    tmp.replace(path)


class RoundLog:
    """One JSON line per round in rounds.jsonl; starts from `records` (rewritten) when resuming."""

    def __init__(self, path: Path, records: list[dict]):
        self.path, self.records = path, list(records)
        path.write_text("".join(json.dumps(r) + "\n" for r in self.records), encoding="utf-8")

    def __call__(self, record: dict) -> None:
        self.records.append(record)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
