"""The deployed ClientApp's light front and its node worker, without a SuperNode: one worker answers every message
of a node (the same process each time), gives the replies the heavy ClientApp gives, carries Context.state both
ways, and ends with the process it serves."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

pytest.importorskip("flwr")

from flwr.app import ConfigRecord, Context, Message, RecordDict  # noqa: E402

from fedpref.cli import main  # noqa: E402
from fedpref.engines.flower import messages as m  # noqa: E402
from fedpref.engines.flower import node_app  # noqa: E402
from fedpref.engines.flower.client_app import answer_message, run_config_source  # noqa: E402
from fedpref.models.adapters import trainable_state  # noqa: E402
from fedpref.models.factory import build_reward_model  # noqa: E402
from fedpref.protocol import COST, TRAIN, TaskKey  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DATA = ["data.group_sizes=[1, 1, 0, 0]", "data.pairs_per_axis=6", "data.val_pairs=2", "data.test_pairs=2"]
DATA += ["federation.clients_per_round=2"]


@pytest.fixture(autouse=True)
def task_identity(monkeypatch):
    from flwr.supercore.task_identity import TaskIdentity

    for name, value in (("_run_id", 1), ("_task_id", 1), ("_node_id", 0)):
        monkeypatch.setattr(TaskIdentity, name, value)


@pytest.fixture(scope="module")
def own_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("node")
    sets = [arg for item in DATA for arg in ("--set", item)]
    assert main(["data", "export", "tiny", *sets, "--out", str(folder / "pooled.jsonl")]) == 0
    assert (
        main(["data", "split-clients", str(folder / "pooled.jsonl"), "--out", str(folder), "--user-key", "client"]) == 0
    )
    return folder / "c000.jsonl"


def context(own_file: Path, tmp_path: Path) -> Context:
    overrides = "; ".join([*DATA, "data.source='jsonl'", f"data.path='{own_file}'"])
    run_config = {"config-path": str(ROOT / "src/fedpref/configs/quick/tiny.toml"), "overrides": overrides}
    node_config = {"data-path": str(own_file), "worker-dir": str(tmp_path / "w")}
    return Context(1, 7, node_config, RecordDict(), run_config)


def message(content: RecordDict, message_type: str) -> Message:
    msg = Message(content, dst_node_id=7, message_type=message_type)
    msg.metadata.__dict__["_message_id"] = msg.object_id
    return msg


def worker_pids(folder: Path) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"node_worker" in cmdline.read_bytes() and str(folder).encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            pass
    return found


def test_one_worker_answers_every_message_as_the_client_app_would(own_file: Path, tmp_path: Path) -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # stands in for the SuperNode
    try:
        ctx = context(own_file, tmp_path)
        cfg = run_config_source(ctx)
        query = message(m.partition_query(cfg.digest()), "query.partition")
        info, partition, _ = m.content_to_info(
            node_app.ask_worker(node_app.connect(ctx, owner.pid), query, ctx).content
        )
        assert info.client_id == "c000" and partition == -1
        first = worker_pids(tmp_path / "w")

        ctx.state["kept"] = ConfigRecord({"x": 1})  # e.g. SecAgg+'s state: must come back untouched
        init = trainable_state(build_reward_model(cfg))
        task = m.task_to_content(m.Task("c000", TRAIN, [init], steps=1), TaskKey("FL", 0, 0, 0))
        reply = node_app.ask_worker(node_app.connect(ctx, owner.pid), message(task, "train"), ctx)
        local = answer_message(task, "train", run_config_source, context(own_file, tmp_path))
        via_worker, _ = m.content_to_reply(reply.content)
        direct, _ = m.content_to_reply(local)
        for key in direct.state:
            assert torch.equal(via_worker.state[key], direct.state[key]), key
        measured = via_worker.metrics.pop(COST), direct.metrics.pop(COST)  # this machine's seconds and memory
        assert via_worker.metrics == direct.metrics and measured[0].keys() == measured[1].keys()
        assert dict(ctx.state["kept"]) == {"x": 1}
        assert worker_pids(tmp_path / "w") == first and len(first) == 1  # the same worker both times
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 10
    while worker_pids(tmp_path / "w") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert worker_pids(tmp_path / "w") == []  # it ended with the process it served
