"""The run folder: resolved config, results.json, per-round log, tables and plots."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fedpref.config import ExperimentConfig
from fedpref.errors import FedprefError


def prepare_run_dir(path: Path, overwrite: bool) -> Path:
    """Create the output folder; refuse to write into a non-empty one without `overwrite`."""
    if path.exists() and any(path.iterdir()):
        if not overwrite:
            raise FedprefError(f"output folder {path} is not empty; pass --overwrite or choose --out")
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def to_toml(data: dict, prefix: str = "") -> str:
    """A minimal TOML writer for the config's plain values (scalars and lists)."""
    scalars = [(k, v) for k, v in data.items() if not isinstance(v, dict)]
    tables = [(k, v) for k, v in data.items() if isinstance(v, dict)]
    lines = [f"{k} = {json.dumps(v)}" for k, v in scalars]
    for k, v in tables:
        lines += ["", f"[{prefix}{k}]", to_toml(v, f"{prefix}{k}.").strip()]
    return "\n".join(lines) + "\n"


def write_config(cfg: ExperimentConfig, run_dir: Path) -> None:
    (run_dir / "config.toml").write_text(to_toml(cfg.to_dict()), encoding="utf-8")


def write_json(data: dict, path: Path) -> None:
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
