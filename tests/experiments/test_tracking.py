"""Tracking: `--log` backends read back (TensorBoard events, CSV, a W&B offline run), line progress, eval_every."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from rich.console import Console

from fedpref.algorithms.base import Algorithm
from fedpref.config import load_config
from fedpref.engines.loop import MEASURED, run_rounds
from fedpref.experiments.tracking import CsvTracker, LineProgress, Tracking, WandbTracker, duration
from fedpref.protocol import EVALUATE, TRAIN, ClientInfo, Reply, Task, TaskKey

ROOT = Path(__file__).resolve().parents[2]
FL_TRAIN_LOSS = [0.6733368039131165, 0.6865076621373495]  # tests/test_pinned_numbers.py, PINNED["FL"]
ROUND_LINE = re.compile(r"^FL round (\d)/2 loss \d\.\d{4} val_loss \d\.\d{4} val_acc [\d.]+ elapsed \d+s( eta \d+s)?$")


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory) -> tuple[Path, str, bool]:
    """`fedpref run configs/quick/tiny.toml --log tensorboard,csv > log.txt` (FL, 2 rounds, evaluation every round) in a
    subprocess: (run folder, its stdout, whether a round line was in log.txt before the run had finished)."""
    pytest.importorskip("tensorboard", reason="--log tensorboard needs the `tracking` extra (requirements.txt)")
    tmp = tmp_path_factory.mktemp("logged_run")
    out, log_path = tmp / "run", tmp / "log.txt"
    sets = ["algorithm.methods=['FL']", "federation.rounds=2", "federation.eval_every=1", "personalization.steps=[0]"]
    argv = [sys.executable, "-m", "fedpref.cli", "run", "tiny", "--out", str(out)]
    argv += [arg for item in sets for arg in ("--set", item)] + ["--log", "tensorboard,csv"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    with log_path.open("w") as stdout:
        proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, env=env, text=True)
        seen_while_running = False
        while proc.poll() is None:  # the round lines must be in the file while the run goes on (flushed per round)
            text = log_path.read_text()
            seen_while_running |= "FL round 2/2" in text and "wrote " not in text
            time.sleep(0.02)
        stderr = proc.stderr.read()
    printed = log_path.read_text()
    assert proc.returncode == 0, stderr[-2000:] + printed[-2000:]
    return out, printed, seen_while_running


def test_line_per_round_while_running(logged_run):
    _, printed, seen_while_running = logged_run
    assert seen_while_running, printed
    rounds = [m.group(1) for line in printed.splitlines() if (m := ROUND_LINE.match(line))]
    assert rounds == ["1", "2"], printed
    assert "eta" in next(line for line in printed.splitlines() if line.startswith("FL round 1/2"))
    assert "preparing data and model done elapsed" in printed and "FL personalization 8/8 done elapsed" in printed
    assert "\x1b[" not in printed  # no terminal control codes in a log file


def test_eval_every_and_provenance(logged_run):
    out, _, _ = logged_run
    records = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert [r["train_loss"] for r in records] == pytest.approx(FL_TRAIN_LOSS, rel=1e-5)  # evaluation moves nothing
    for r in records:
        assert r["eval_clients"] == 3 and len(r["val_loss"]) == len(r["val_acc"]) == 1
        assert 0 < r["val_loss"][0] < 5 and 0 <= r["val_acc"][0] <= 100
    results = json.loads((out / "results.json").read_text())
    assert set(results["versions"]) == {"fedpref", "torch", "transformers", "peft", "flwr", "datasets"}
    assert results["versions"]["fedpref"] and results["versions"]["torch"]
    assert results["git_commit"] is None or re.fullmatch(r"[0-9a-f]{40}", results["git_commit"])
    config = (out / "config.toml").read_text()
    assert "[logging]" in config and "eval_every = 1" in config


def test_tensorboard_events(logged_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out, _, _ = logged_run
    records = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    scalars = events.Tags()["scalars"]
    assert {"FL/round/train_loss", "FL/round/wall_s", "FL/round/val_loss/0", "FL/personalization/acc_mean"} <= set(
        scalars
    )
    loss = events.Scalars("FL/round/train_loss")
    assert [e.step for e in loss] == [0, 1]
    assert [e.value for e in loss] == pytest.approx([r["train_loss"] for r in records], rel=1e-6)
    assert [e.value for e in events.Scalars("FL/round/val_acc/0")] == pytest.approx([r["val_acc"][0] for r in records])
    curves = json.loads((out / "results.json").read_text())["methods"]["FL"]["personalization"]
    assert [e.value for e in events.Scalars("FL/personalization/acc_mean")] == pytest.approx(curves["acc_mean"])
    assert {"config/text_summary", "tables/personalized_accuracy/text_summary"} <= set(events.Tags()["tensors"])


def test_csv_scalars_and_tables(logged_run):
    out, _, _ = logged_run
    with (out / "csv" / "scalars.csv").open() as f:
        rows = list(csv.DictReader(f))
    loss = [(int(r["step"]), float(r["value"])) for r in rows if r["tag"] == "FL/round/train_loss"]
    assert [s for s, _ in loss] == [0, 1] and [v for _, v in loss] == pytest.approx(FL_TRAIN_LOSS, rel=1e-5)
    assert {"FL/round/val_loss/0", "FL/personalization/acc_mean", "FL/timing/wall_s"} <= {r["tag"] for r in rows}
    table = list(csv.reader((out / "csv" / "personalized_accuracy.csv").open()))
    assert table[0][0] == "method" and table[1][0] == "FL"
    assert json.loads((out / "csv" / "config.json").read_text())["federation"]["rounds"] == 2


def read_wandb_records(path: Path) -> list:
    """The records of a W&B run file (a LevelDB-style log: 7-byte file header, 32 KiB blocks, chunk headers of
    CRC32 (4), length (2, little-endian) and type (1: full, 2: first, 3: middle, 4: last))."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, pos, pending, records = path.read_bytes(), 7, b"", []
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a header is padding
            pos += 32768 - pos % 32768
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        if kind == 0:
            break
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def test_wandb_offline_run_reads_back(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    for key in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    for key in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):  # nothing written to the home folder
        monkeypatch.setenv(key, str(tmp_path / key.lower()))
    tracker = Tracking([WandbTracker(tmp_path, "fedpref-test", "tiny")])
    tracker.log_config({"seed": 3, "federation": {"rounds": 2}})
    for r, loss in enumerate([0.7, 0.6]):
        tracker.log_round({"method": "FL", "round": r, "train_loss": loss, "wall_s": 0.5, "dropped": []})
    tracker.log_round({"method": "FedGD", "round": 0, "train_loss": 0.9, "wall_s": 0.5, "dropped": []})
    tracker.log_table("timing", ["method", "wall_s"], [["FL", "1.0"]])
    tracker.close()
    wandb.teardown()  # the W&B service writes the run file out when it stops (at the latest when the process ends)

    (run_file,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")  # offline: no API key, no WANDB_MODE
    records = read_wandb_records(run_file)
    config = {i.key: json.loads(i.value_json) for r in records if r.HasField("config") for i in r.config.update}
    assert config["seed"] == 3 and config["federation"] == {"rounds": 2}
    history = [
        {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}  # "a/b" may be nested
        for r in records
        if r.HasField("history")
    ]
    fl = [(h["FL/round/step"], h["FL/round/train_loss"]) for h in history if "FL/round/train_loss" in h]
    assert fl == [(0, 0.7), (1, 0.6)]
    assert any(h.get("FedGD/round/step") == 0 for h in history)  # its own step: not dropped after FL's rounds
    assert any(k.startswith("tables/timing") for h in history for k in h)


def test_line_progress_flushes_each_line(tmp_path):
    path = tmp_path / "log.txt"
    with path.open("w") as f:
        progress = LineProgress(Console(file=f, width=200))
        task = progress.add_task("preparing data and model", total=None)
        progress.update(task, total=1, completed=1)
        rounds = progress.add_task("FL: rounds", total=3)
        progress.update(rounds, completed=1)
        progress.log_round({"method": "FL", "round": 0, "train_loss": 0.64123, "wall_s": 1.0})
        assert path.read_text().splitlines()[-1].startswith("FL round 1/3 loss 0.6412 elapsed ")  # before close
        progress.update(rounds, completed=3)
        progress.log_round({"method": "FL", "round": 2, "train_loss": None, "wall_s": 1.0})
        progress.log_round({"method": "FL", "round": 3, "train_loss": None, "wall_s": 1.0})
        pers = progress.add_task("FL: personalization", total=2)
        progress.update(pers, completed=1)
        progress.update(pers, completed=2)
        lines = path.read_text().splitlines()
    assert lines[0] == "preparing data and model ..." and lines[1].startswith("preparing data and model done elapsed")
    assert " eta " in lines[2] and lines[3].startswith("FL round 3/3 loss - elapsed") and " eta " not in lines[3]
    assert lines[4].startswith("FL final stage loss -") and lines[5].startswith("FL personalization 2/2 done")
    assert len(lines) == 6
    assert [duration(s) for s in (14, 185, 7620)] == ["14s", "3m05s", "2h07m"]


def test_line_progress_counts_clients_of_a_long_phase(tmp_path):
    path = tmp_path / "log.txt"
    with path.open("w") as f:
        progress = LineProgress(Console(file=f, width=200), every_s=0.0)  # every client's line, not after 30 s
        pers = progress.add_task("FL: personalization", total=4)
        progress.update(pers, completed=1)
        progress.update(pers, completed=3)
        progress.update(pers, completed=4)
        lines = path.read_text().splitlines()
    assert lines[0].startswith("FL personalization 1/4 elapsed ") and lines[0].endswith(" eta 0s")
    assert lines[1].startswith("FL personalization 3/4 elapsed ")
    assert lines[2].startswith("FL personalization 4/4 done elapsed ") and len(lines) == 3


class _Toy(Algorithm):
    """Trains one client per round; holds two server models."""

    name = "toy"

    def next_tasks(self, round_idx: int) -> list[Task]:
        if round_idx >= self.num_rounds or any(h["round"] == round_idx for h in self.history):
            return []
        self.history.append({"round": round_idx})
        return [Task(self.clients[round_idx % 2].client_id, TRAIN, [self.init_state], steps=1)]

    def receive(self, round_idx: int, replies: list[Reply]) -> None:
        pass

    def server_models(self):
        return [self.init_state, self.init_state]


class _Recorder:
    def __init__(self):
        self.calls: list[tuple[list[Task], TaskKey]] = []

    def exchange(self, tasks: list[Task], key: TaskKey) -> list[Reply]:
        self.calls.append((tasks, key))
        if tasks[0].action == EVALUATE:
            return [Reply(t.client_id, 1, metrics={"val_loss": [0.5, 1.5], "val_acc": [50.0, 100.0]}) for t in tasks]
        return [Reply(t.client_id, 1, state=t.models[0], metrics={"train_loss": 0.7}) for t in tasks]


def test_run_rounds_evaluates_the_server_models_every_n_rounds():
    clients = [ClientInfo("a", 1), ClientInfo("b", 1)]
    state = {"w": torch.zeros(2)}
    plain = run_rounds(_Toy(clients, state, 4), _Recorder())
    transport = _Recorder()
    records = run_rounds(_Toy(clients, state, 4), transport, eval_every=2)
    evals = [(key, [t.client_id for t in tasks]) for tasks, key in transport.calls if tasks[0].action == EVALUATE]
    assert evals == [(TaskKey("toy", 1, 1), ["b"]), (TaskKey("toy", 3, 1), ["b"])]  # the round's participant
    assert [r.get("val_loss") for r in records] == [None, [0.5, 1.5], None, [0.5, 1.5]]
    assert records[1]["val_acc"] == [50.0, 100.0] and records[1]["eval_clients"] == 1
    # the evaluation's tasks and replies count in the round's numbers; the measured keys differ between two runs
    strip = ("val_loss", "val_acc", "eval_clients", "params_down", "params_up", *MEASURED)
    assert [{k: v for k, v in r.items() if k not in strip} for r in records] == [
        {k: v for k, v in r.items() if k not in strip} for r in plain
    ]


def test_logging_config_leaves_the_hash_alone():
    from fedpref.cli import log_overrides
    from fedpref.errors import ConfigError

    base = load_config("tiny")
    logged = load_config("tiny", log_overrides("tensorboard, csv"))
    assert logged.logging.backends == ["tensorboard", "csv"] and logged.digest() == base.digest()
    assert "logging" not in base.to_dict() and "eval_every" not in base.to_dict()["federation"]
    assert log_overrides(None) == []
    with pytest.raises(ConfigError, match="logging.backends"):
        load_config("tiny", log_overrides("mlflow"))
    with pytest.raises(ConfigError, match="federation.eval_every"):
        load_config("tiny", ["federation.eval_every=-1"])


def test_csv_tracker_gets_each_rounds_cost_and_the_methods_once(tmp_path):
    tracking = Tracking([CsvTracker(tmp_path)])
    record = {"method": "FL", "round": 0, "train_loss": 0.7, "wall_s": 1.0, "dropped": []}
    record |= {"client_s": 0.6, "server_s": 0.1, "transport_s": 0.3, "peak_memory_bytes": 2**20}
    record |= {"bytes_down": {"a": 100, "b": 100}, "bytes_up": {"a": 108, "b": 0}, "peak_memory_kind": "cpu_max_rss"}
    tracking.log_round(record)
    cost = {"trainable_params": 250, "params_down_per_client_round": 250.0, "peak_memory_bytes": 2**20}
    tracking.log_method("FL", {"timing": {"wall_s": 2.0}, "cost": cost | {"peak_memory_kind": "cpu_max_rss"}})
    tracking.close()
    with (tmp_path / "scalars.csv").open() as f:
        logged = {(r["tag"], int(r["step"])): float(r["value"]) for r in csv.DictReader(f)}
    round_cost = {k: v for (k, step), v in logged.items() if k.startswith("FL/round/") and step == 0}
    assert round_cost == {
        "FL/round/wall_s": 1.0,
        "FL/round/dropped": 0.0,
        "FL/round/client_s": 0.6,
        "FL/round/server_s": 0.1,
        "FL/round/transport_s": 0.3,
        "FL/round/bytes_down": 200.0,  # summed over the round's clients
        "FL/round/bytes_up": 108.0,
        "FL/round/train_loss": 0.7,
    }
    assert {k: v for (k, _), v in logged.items() if k.startswith("FL/cost/")} == {
        "FL/cost/trainable_params": 250.0,
        "FL/cost/params_down_per_client_round": 250.0,
        "FL/cost/peak_memory_bytes": float(2**20),
    }
