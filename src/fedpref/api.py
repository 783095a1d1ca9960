"""The Python API: `fedpref.run(config, data=...)` runs an experiment and returns its results (docs/api.md)."""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from fedpref.config import ExperimentConfig, config_from_dict, read_toml
from fedpref.errors import ConfigError, FedprefError
from fedpref.experiments.experiment import execute
from fedpref.experiments.orchestrator import API_WORDS, check_config, open_run_dir
from fedpref.experiments.runner import INPROCESS
from fedpref.results import RESULTS_FILE, RunResults

if TYPE_CHECKING:
    import pandas as pd

ConfigLike = str | Path | Mapping[str, Any] | ExperimentConfig
DATA_FILE = "pairs.jsonl"  # where `data` is written inside the run folder
PATHS = {"config": "config.toml", "results": RESULTS_FILE, "rounds": "rounds.jsonl", "table": "table.md"}
PATHS |= {"plot": "personalization.png", "data": DATA_FILE}


@dataclass
class RunResult:
    """What `run` returns: the curves and per-group accuracies of every method, the results and the files."""

    curves: dict[str, dict[str, list]]
    """Per method: `steps` (personalization steps) and, at each, `acc_mean` and `acc_std` (test accuracy in %,
    over clients)."""
    groups: pd.DataFrame
    """One row per (method, group, step): columns method, group, step, acc (mean test accuracy of the group's
    clients, %); empty when the data has no group labels."""
    results: dict
    """The run folder's results as written (per-client curves, diagnostics, selectors, ...; `typed` reads them
    through the schema, fedpref.results)."""
    paths: dict[str, Path]
    """`run_dir` and the files written in it: config, results, rounds, table, plot (and data, if given)."""
    config: ExperimentConfig
    """The resolved config that ran."""
    _tmp: tempfile.TemporaryDirectory | None = field(default=None, repr=False, compare=False)
    # out=None: the temporary run folder lives as long as this result (then it is deleted)

    @property
    def typed(self) -> RunResults:
        """`results` as the schema's dataclasses (status, provenance, methods, ...)."""
        return RunResults.from_dict(self.results)


def run(
    config: ConfigLike,
    data: Any = None,
    engine: str = INPROCESS,
    out: str | Path | None = None,
    *,
    overwrite: bool = False,
    resume: bool = False,
    verbose: bool = False,
) -> RunResult:
    """Run every method of `config` (a TOML path, a dict shaped like the TOML, or an ExperimentConfig), as
    `fedpref run` does, and return its results.

    `data`: preference pairs as a list of dicts, a `datasets.Dataset` or a pandas DataFrame, one row per pair,
    keys as `data.pairwise` names them (prompt, chosen, rejected, user_id, optionally a group key); they are
    written to `pairs.jsonl` in the run folder and read as `data.source = 'pairwise_jsonl'`. `out`: the run
    folder (None: a temporary one that lasts as long as the result); `overwrite` and `resume` as on the command
    line. Quiet unless `verbose`.
    """
    rows = _rows(data) if data is not None else None
    cfg, where = _config(config, rows is not None)
    if rows is not None:
        _check_keys(rows, cfg)
    plan = check_config(cfg, where, engine)  # before a folder is made or a weight loaded
    tmp = tempfile.TemporaryDirectory(prefix="fedpref-") if out is None else None
    run_dir = Path(tmp.name) / "run" if tmp else Path(out)
    open_run_dir(run_dir, overwrite, resume, words=API_WORDS)
    if rows is not None:
        data_path = run_dir / DATA_FILE
        if not resume:  # resuming reads the very file the run started with (the config hash names its path)
            _write_jsonl(rows, data_path)
        cfg.data.source, cfg.data.path = "pairwise_jsonl", str(data_path)
    console = Console(stderr=True) if verbose else Console(quiet=True)
    results = execute(plan, run_dir, console, resume=resume)
    paths = {"run_dir": run_dir} | {k: run_dir / name for k, name in PATHS.items() if (run_dir / name).is_file()}
    typed = RunResults.from_dict(results)
    return RunResult(_curves(typed), _group_table(typed), results, paths, cfg, tmp)


def _config(config: ConfigLike, with_data: bool) -> tuple[ExperimentConfig, str]:
    """(copy of the config, its name for messages); with data, its source is the data's file (check_config
    validates it)."""
    if isinstance(config, ExperimentConfig):
        cfg, where = copy.deepcopy(config), "<ExperimentConfig>"
        if with_data:
            cfg.data.source, cfg.data.path = "pairwise_jsonl", f"<data: {DATA_FILE} in the run folder>"
        return cfg, where
    if isinstance(config, Mapping):
        where, raw = "<dict>", copy.deepcopy(dict(config))
    elif isinstance(config, str | Path):
        where, raw = read_toml(config, None)
    else:
        raise ConfigError(f"config: expected a TOML path, a dict or an ExperimentConfig, got {type(config).__name__}")
    if with_data:  # set before validation: the synthetic source's checks must not apply to the user's data
        data = raw.setdefault("data", {})
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: 'data' must be a section/table")
        data |= {"source": "pairwise_jsonl", "path": f"<data: {DATA_FILE} in the run folder>"}
    return config_from_dict(raw, where), where


def _rows(data: Any) -> list[dict]:
    """Rows of a list of dicts, a datasets.Dataset or a pandas DataFrame (recognized by their methods, so that
    neither library is imported here)."""
    if hasattr(data, "to_pandas") and hasattr(data, "features"):  # datasets.Dataset
        rows = data.to_list()
    elif hasattr(data, "to_dict") and hasattr(data, "columns"):  # pandas.DataFrame
        rows = data.to_dict(orient="records")
    elif isinstance(data, list | tuple):
        rows = list(data)
    else:
        raise FedprefError(f"data: expected a list of dicts, a datasets.Dataset or a DataFrame, got {type(data)}")
    bad = next((i for i, row in enumerate(rows) if not isinstance(row, Mapping)), None)
    if bad is not None:
        raise FedprefError(f"data: row {bad} is a {type(rows[bad]).__name__}, not a dict")
    if not rows:
        raise FedprefError("data: no preference pairs")
    return rows


def _check_keys(rows: list[dict], cfg: ExperimentConfig) -> None:
    """The first row has every key data.pairwise names: a message naming the option beats a loader error."""
    p = cfg.data.pairwise
    wanted = {"prompt_key": p.prompt_key, "chosen_key": p.chosen_key, "rejected_key": p.rejected_key}
    wanted |= {"user_key": p.user_key} | ({"group_key": p.group_key} if p.group_key else {})
    missing = [f"'{key}' (data.pairwise.{option})" for option, key in wanted.items() if key not in rows[0]]
    if missing:
        raise ConfigError(
            f"data: row 0 has no {', '.join(missing)}; its keys: {', '.join(map(str, rows[0]))} "
            "(set data.pairwise.* in the config to map them)"
        )


def _write_jsonl(rows: list[dict], path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(dict(row), default=_plain) + "\n")


def _plain(value: Any) -> Any:
    """numpy scalars (DataFrame cells) as Python numbers; anything else JSON lacks as its text."""
    return value.item() if hasattr(value, "item") else str(value)


def _curves(results: RunResults) -> dict[str, dict[str, list]]:
    keys = ("steps", "acc_mean", "acc_std")
    return {name: {k: list(getattr(r.curves, k)) for k in keys} for name, r in results.methods.items()}


def _group_table(results: RunResults) -> pd.DataFrame:
    import pandas as pd  # only here: `import fedpref.api` should not pay for pandas

    rows = [
        {"method": name, "group": group, "step": step, "acc": acc}
        for name, r in results.methods.items()
        for group, accs in r.curves.by_group.items()
        for step, acc in zip(r.curves.steps, accs)
    ]
    return pd.DataFrame(rows, columns=["method", "group", "step", "acc"])
