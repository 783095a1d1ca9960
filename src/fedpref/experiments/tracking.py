"""Experiment tracking (TensorBoard, W&B, CSV) behind one small interface, line progress, and run provenance."""

from __future__ import annotations

import csv
import importlib.metadata
import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console

from fedpref.config import ExperimentConfig
from fedpref.errors import FedprefError
from fedpref.experiments.outputs import to_toml
from fedpref.reports import tables
from fedpref.results import Curves, MethodResult, RunResults, as_curves, as_methods

PROVENANCE_PACKAGES = ("fedpref", "torch", "transformers", "peft", "flwr", "datasets")
INSTALL_HINT = "pip install 'fedpref[tracking]' (or -r requirements.txt)"


class Tracker(Protocol):
    """Where a run's numbers go besides the run folder; each backend implements these four calls."""

    def log_config(self, config: dict) -> None:
        """The resolved experiment config (nested sections as dicts)."""
        ...

    def log_scalars(self, step: int, values: Mapping[str, float], prefix: str) -> None:
        """`values` at `step` of the series `prefix` (e.g. "FL/round": tag "FL/round/train_loss")."""
        ...

    def log_table(self, name: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        """A small table of strings (the final result tables)."""
        ...

    def close(self) -> None:
        """Flush and release the backend."""
        ...


class CsvTracker:
    """RUN/csv: scalars.csv (tag, step, value: one row per logged number), config.json and one CSV per table."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        path = folder / "scalars.csv"
        fresh = not path.is_file() or path.stat().st_size == 0
        self.file = path.open("a", encoding="utf-8", newline="")  # a resumed run appends its new rounds
        self.writer = csv.writer(self.file)
        if fresh:
            self.writer.writerow(["tag", "step", "value"])

    def log_config(self, config: dict) -> None:
        (self.folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")

    def log_scalars(self, step: int, values: Mapping[str, float], prefix: str) -> None:
        self.writer.writerows([f"{prefix}/{key}", step, value] for key, value in values.items())
        self.file.flush()  # readable while the run goes on

    def log_table(self, name: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        with (self.folder / f"{name}.csv").open("w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows([list(header), *map(list, rows)])

    def close(self) -> None:
        self.file.close()


class TensorBoardTracker:
    """RUN/tensorboard: one event file per run; scalars by tag, the config and tables as text."""

    def __init__(self, folder: Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            raise FedprefError(f"logging backend 'tensorboard' needs the tensorboard package: {INSTALL_HINT}") from e
        self.writer = SummaryWriter(log_dir=str(folder))

    def log_config(self, config: dict) -> None:
        self.writer.add_text("config", _as_code(to_toml(config)))
        self.writer.flush()

    def log_scalars(self, step: int, values: Mapping[str, float], prefix: str) -> None:
        for key, value in values.items():
            self.writer.add_scalar(f"{prefix}/{key}", float(value), step)
        self.writer.flush()  # the writer's own flush is every 2 minutes: too late to watch a short run

    def log_table(self, name: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        self.writer.add_text(f"tables/{name}", "\n".join(lines))
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbTracker:
    """A W&B run in RUN/wandb: offline (synced later with `wandb sync`) unless WANDB_MODE or WANDB_API_KEY is set,
    so a run never reaches the network by default."""

    def __init__(self, run_dir: Path, project: str, name: str):
        try:
            import wandb
        except ImportError as e:
            raise FedprefError(f"logging backend 'wandb' needs the wandb package: {INSTALL_HINT}") from e
        mode = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
        # console capture and system metrics off: the run's own output and timing stay as without W&B
        settings = wandb.Settings(console="off", silent=True, x_disable_stats=True)
        self.wandb = wandb
        self.run = wandb.init(project=project, name=name, dir=str(run_dir), mode=mode, settings=settings)
        self.series: set[str] = set()

    def log_config(self, config: dict) -> None:
        self.run.config.update(config, allow_val_change=True)

    def log_scalars(self, step: int, values: Mapping[str, float], prefix: str) -> None:
        # W&B's own step only grows, but each method's rounds start at 0: every series gets its own step metric
        if prefix not in self.series:
            self.series.add(prefix)
            self.run.define_metric(f"{prefix}/step", hidden=True)
            self.run.define_metric(f"{prefix}/*", step_metric=f"{prefix}/step")
        self.run.log({f"{prefix}/step": step, **{f"{prefix}/{k}": float(v) for k, v in values.items()}})

    def log_table(self, name: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        table = self.wandb.Table(columns=list(header), data=[list(row) for row in rows])
        self.run.log({f"tables/{name}": table})

    def close(self) -> None:
        self.run.finish()


class Tracking:
    """Fans every call out to the configured trackers (none: every call is a no-op) and turns fedpref's round
    records, method results and final results into scalars and tables."""

    def __init__(self, trackers: Sequence[Tracker] = ()):
        self.trackers = list(trackers)

    def log_config(self, config: dict) -> None:
        for t in self.trackers:
            t.log_config(config)

    def log_scalars(self, step: int, values: Mapping[str, float], prefix: str) -> None:
        if values:
            for t in self.trackers:
                t.log_scalars(step, values, prefix)

    def log_table(self, name: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        for t in self.trackers:
            t.log_table(name, header, rows)

    def close(self) -> None:
        for t in self.trackers:
            t.close()

    def log_round(self, record: dict) -> None:
        """One round record: its training loss, timing, dropped clients and periodic evaluation."""
        self.log_scalars(record["round"], round_scalars(record), f"{record['method']}/round")

    def log_method(self, name: str, result: MethodResult | dict) -> None:
        """A finished method: its personalization curve (step = personalization steps), timing and cost
        (parameter counts, peak memory, the time split per round)."""
        result = as_methods({name: result})[name]
        for step, values in curve_points(result.curves):
            self.log_scalars(step, values, f"{name}/personalization")
        timing = result.timing or {}
        self.log_scalars(0, numbers(timing), f"{name}/timing")
        self.log_scalars(0, numbers(result.cost.to_dict() if result.cost else {}), f"{name}/cost")

    def finish(self, results: RunResults | dict) -> None:
        """The final tables (as printed at the end of the run), then close every tracker."""
        for name, (header, rows) in result_tables(results).items():
            self.log_table(name, header, rows)
        self.close()


def open_tracking(cfg: ExperimentConfig, run_dir: Path) -> Tracking:
    """The trackers of `cfg.logging.backends`, writing below `run_dir`."""
    makers: dict[str, Callable[[], Tracker]] = {
        "csv": lambda: CsvTracker(run_dir / "csv"),
        "tensorboard": lambda: TensorBoardTracker(run_dir / "tensorboard"),
        "wandb": lambda: WandbTracker(run_dir, cfg.logging.wandb_project, f"{cfg.name}-seed{cfg.seed}"),
    }
    return Tracking([makers[name]() for name in cfg.logging.backends])


def numbers(values: Mapping[str, Any]) -> dict[str, float]:
    """The numeric entries of `values` (not bools, text or nested records)."""
    return {k: v for k, v in values.items() if isinstance(v, int | float) and not isinstance(v, bool)}


ROUND_COST = ("client_s", "server_s", "transport_s")


def round_scalars(record: dict) -> dict[str, float]:
    """The numbers of a round record: train_loss (when clients trained), wall_s and its split into client_s,
    server_s and transport_s, dropped clients, the bytes down and up summed over the round's clients and, on
    evaluation rounds, val_loss/k and val_acc/k of each server model k."""
    values: dict[str, float] = {"wall_s": record["wall_s"], "dropped": len(record.get("dropped", []))}
    values.update({k: record[k] for k in ROUND_COST if k in record})
    for key in ("bytes_down", "bytes_up"):
        if key in record:
            values[key] = sum(record[key].values())
    if record.get("train_loss") is not None:
        values["train_loss"] = record["train_loss"]
    for metric in ("val_loss", "val_acc"):
        values.update({f"{metric}/{k}": v for k, v in enumerate(record.get(metric, []))})
    if "eval_s" in record:
        values["eval_s"] = record["eval_s"]
    return values


def curve_points(curves: Curves | dict) -> list[tuple[int, dict[str, float]]]:
    """(personalization step, {acc_mean, acc_std, acc/GROUP}) per checkpoint of a method's curves."""
    curves, points = as_curves(curves), []
    for i, step in enumerate(curves.steps):
        values = {"acc_mean": curves.acc_mean[i], "acc_std": curves.acc_std[i]}
        values.update({f"acc/{g}": accs[i] for g, accs in curves.by_group.items()})
        points.append((step, values))
    return points


def result_tables(results: RunResults | dict) -> dict[str, tuple[list[str], list[list[str]]]]:
    """The end-of-run tables by name: headline accuracies, per-group accuracy at step 0, selectors, timing."""
    methods = results.methods if isinstance(results, RunResults) else as_methods(results["methods"])
    out = {"personalized_accuracy": tables.headline_rows(methods)}
    if any(r.curves.by_group for r in methods.values()):
        out["group_accuracy_step0"] = tables.group_rows(methods, 0)
    if any(r.selector for r in methods.values()):
        out["selectors"] = tables.selector_rows(methods)
    if any(r.privacy for r in methods.values()):
        out["privacy"] = tables.privacy_rows(methods)
    timing = [[name, str((r.timing or {}).get("wall_s", ""))] for name, r in methods.items()]
    out["timing"] = (["method", "wall_s"], timing)
    return {name: (list(header), [list(map(str, row)) for row in rows]) for name, (header, rows) in out.items()}


class TrackedLog:
    """A round log (outputs.RoundLog) that also hands each record to the trackers and the line progress."""

    def __init__(self, log: Any, *listeners: Callable[[dict], None] | None):
        self.log, self.listeners = log, [f for f in listeners if f is not None]

    @property
    def records(self) -> list[dict]:
        return self.log.records

    def __call__(self, record: dict) -> None:
        self.log(record)
        for listener in self.listeners:
            listener(record)


ROUNDS = ": rounds"  # the suffix of the runner's per-round progress reports


class LineProgress:
    """Progress for a stdout that is not a terminal (a log file, CI): one flushed line per round and per phase,
    e.g. `FL round 3/12 loss 0.6412 elapsed 14s eta 42s`, where rich's bars would not render. It takes the part
    of rich's Progress interface that the experiment uses (add_task, update, a context manager)."""

    def __init__(self, console: Console, every_s: float = 30.0):
        self.console = console
        self.every_s = every_s  # a phase counted in clients prints its count when this long has passed in silence
        self.tasks: list[dict] = []
        self.rounds: dict[str, int] = {}  # method -> its number of rounds (from the runner's reports)
        self.method_start: dict[str, tuple[float, int]] = {}  # method -> (when its first round began, rounds seen)
        self.last = time.perf_counter()  # when the last line was printed: where the next phase starts

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: float | None = None, **_: Any) -> int:
        counted = total is not None
        self.tasks.append({"what": description, "total": total, "done": 0, "start": self.last, "counted": counted})
        if total is None and not description.endswith(ROUNDS):
            self._line(f"{description} ...")
        return len(self.tasks) - 1

    def update(self, task_id: int, total: float | None = None, completed: float | None = None, **_: Any) -> None:
        task = self.tasks[task_id]
        task["total"] = task["total"] if total is None else total
        task["done"] = task["done"] if completed is None else completed
        if task["what"].endswith(ROUNDS):  # the round line comes with the round's record (log_round)
            self.rounds[task["what"][: -len(ROUNDS)]] = int(task["total"] or 0)
        elif task["total"] is not None and task["done"] >= task["total"] and not task.get("ended"):
            task["ended"] = True
            what = task["what"].replace(": ", " ")
            count = f" {int(task['done'])}/{int(task['total'])}" if task["counted"] else ""
            self._line(f"{what}{count} done elapsed {duration(time.perf_counter() - task['start'])}")
        elif task["counted"] and task["done"] and time.perf_counter() - self.last >= self.every_s:
            self._line(self._count_line(task))

    @staticmethod
    def _count_line(task: dict) -> str:
        """`FL personalization 3/16 elapsed 1m10s eta 4m40s`, for a long phase that reports each client."""
        done, total = int(task["done"]), int(task["total"])
        elapsed = time.perf_counter() - task["start"]
        what = task["what"].replace(": ", " ")
        return f"{what} {done}/{total} elapsed {duration(elapsed)} eta {duration(elapsed / done * (total - done))}"

    def log_round(self, record: dict) -> None:
        method, r = record["method"], record["round"]
        start, seen = self.method_start.get(method, (self.last, 0))
        self.method_start[method] = (start, seen + 1)
        total = self.rounds.get(method)
        elapsed = time.perf_counter() - start
        loss = record.get("train_loss")
        parts = [method, "final stage" if total and r >= total else f"round {r + 1}/{total or '?'}"]
        parts.append(f"loss {loss:.4f}" if loss is not None else "loss -")
        for metric, digits in (("val_loss", 4), ("val_acc", 2)):
            if record.get(metric):
                parts.append(f"{metric} " + "/".join(f"{v:.{digits}f}" for v in record[metric]))
        parts.append(f"elapsed {duration(elapsed)}")
        if total and r + 1 < total:
            parts.append(f"eta {duration(elapsed / (seen + 1) * (total - r - 1))}")
        self._line(" ".join(parts))

    def _line(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False, soft_wrap=True)
        self.console.file.flush()  # one line per event, visible in the log while the run goes on
        self.last = time.perf_counter()


def duration(seconds: float) -> str:
    """14s, 3m05s, 2h07m."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def package_versions() -> dict[str, str | None]:
    """Installed versions of fedpref and the libraries its numbers depend on (None: not installed)."""
    versions: dict[str, str | None] = {}
    for name in PROVENANCE_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit() -> str | None:
    """HEAD of the git checkout fedpref runs from; None when there is none (an installed copy, no git)."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parents[1],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None


def _as_code(text: str) -> str:
    """Markdown code (TensorBoard renders its text as Markdown): the TOML stays as written."""
    return "\n".join("    " + line for line in text.splitlines())
