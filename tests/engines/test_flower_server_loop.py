"""The round loop over the Flower transport and a fake in-memory Grid: ordering, errors, timeouts (no Ray, no model)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("flwr")

from flwr.app import Error, Message  # noqa: E402

from fedpref.algorithms.fedavg import FedAvg  # noqa: E402
from fedpref.engines.flower import messages as m  # noqa: E402
from fedpref.engines.flower import server_app  # noqa: E402
from fedpref.engines.loop import finish_method, run_rounds  # noqa: E402
from fedpref.protocol import AFTER_THE_ROUNDS, PERSONALIZE, RESTORE_MEMORY, ClientInfo, Reply  # noqa: E402


@pytest.fixture(autouse=True)
def task_identity(monkeypatch):
    """What a ServerApp process has set when it creates messages: its run, task and node."""
    from flwr.supercore.task_identity import TaskIdentity

    for name, value in (("_run_id", 1), ("_task_id", 1), ("_node_id", 0)):
        monkeypatch.setattr(TaskIdentity, name, value)


INIT = {"lora.weight": torch.zeros(2, 2), "head.bias": torch.zeros(1)}


class FakeGrid:
    """Nodes answer at push time; a node in `silent` never answers, one in `failing` answers with an error."""

    def __init__(
        self,
        num: int,
        failing: set[int] = frozenset(),
        silent: set[int] = frozenset(),
        held_out: set[int] = frozenset(),
        nan: set[int] = frozenset(),
        local: bool = False,
    ):
        self.partition_of = {1000 + 7 * (num - p): p for p in range(num)}  # node ids unrelated to partitions
        self.num, self.failing, self.silent, self.held_out, self.nan = num, failing, silent, held_out, nan
        self.local = local  # nodes with their own data file: no partition ids
        self.replies: dict[str, Message] = {}

    def get_node_ids(self) -> list[int]:
        return list(self.partition_of)

    def push_messages(self, messages: list[Message]) -> list[str]:
        ids = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = msg.object_id
            ids.append(msg.object_id)
            partition = self.partition_of[msg.metadata.dst_node_id]
            if partition not in self.silent:
                self.replies[msg.object_id] = self.answer(msg, partition)
        return ids

    def pull_messages(self, ids: list[str]) -> list[Message]:
        return [self.replies.pop(i) for i in ids if i in self.replies]

    def send_and_receive(self, messages: list[Message], *, timeout: float | None = None) -> list[Message]:
        """As Flower's grids do: push, then pull until every reply is in or the timeout passes (nodes here
        answer at push time, so one pull gets every reply that will ever come)."""
        return self.pull_messages(self.push_messages(messages))

    def answer(self, msg: Message, partition: int) -> Message:
        kind = msg.metadata.message_type
        if partition in self.failing and kind != "query.partition":
            return Message(Error(code=1, reason="boom"), reply_to=msg)
        if kind == "query.partition":
            info = ClientInfo(f"c{partition}", 10 * (partition + 1))
            where = (-1, 0) if self.local else (partition, self.num)
            return Message(m.info_to_content(info, *where, partition in self.held_out), reply_to=msg)
        task, key = m.content_to_task(msg.content)
        if task.action == PERSONALIZE:
            reply = Reply(task.client_id, 10 * (partition + 1), metrics={"acc": [50.0, 75.0]})
            return Message(m.reply_to_content(reply, key.index), reply_to=msg)
        state = {k: v + partition + 1 for k, v in task.models[0].items()}
        if partition in self.nan:
            state = {k: v * float("nan") for k, v in state.items()}
        reply = Reply(task.client_id, 10 * (partition + 1), state, {"train_loss": 0.5}, task.tag)
        return Message(m.reply_to_content(reply, key.index), reply_to=msg)


def fedavg(peers: server_app.Peers, rounds: int = 1) -> FedAvg:
    return FedAvg(peers.infos, INIT, rounds, clients_per_round=len(peers.infos), local_steps=1, seed=0)


def test_discover_orders_clients_by_partition() -> None:
    peers = server_app.discover(FakeGrid(4), "digest", wait_s=1.0, timeout_s=1.0)
    assert [c.client_id for c in peers.infos] == ["c0", "c1", "c2", "c3"]
    assert [c.num_train for c in peers.infos] == [10, 20, 30, 40]


def test_held_out_nodes_are_known_but_never_trained() -> None:
    grid = FakeGrid(4, held_out={1, 3})
    peers = server_app.discover(grid, "digest", wait_s=1.0, timeout_s=1.0)
    assert peers.held_out == ["c1", "c3"] and [c.client_id for c in peers.trained()] == ["c0", "c2"]
    algorithm = FedAvg(peers.trained(), INIT, 2, clients_per_round=2, local_steps=1, seed=0)
    log = run_rounds(algorithm, server_app.GridTransport(grid, peers, timeout_s=0.3))
    assert [sorted(r["sampled"]) for r in log] == [["c0", "c2"], ["c0", "c2"]]


def test_failed_and_silent_nodes_are_left_out_and_logged() -> None:
    grid = FakeGrid(4, failing={1}, silent={3})
    peers = server_app.discover(FakeGrid(4), "digest", wait_s=1.0, timeout_s=1.0)
    algorithm = fedavg(peers)
    log = run_rounds(algorithm, server_app.GridTransport(grid, peers, timeout_s=0.3))
    assert sorted(log[0]["dropped"]) == ["c1", "c3"]
    expected = (10 * 1 + 30 * 3) / (10 + 30)  # size-weighted mean of c0 (+1) and c2 (+3)
    assert torch.allclose(algorithm.global_state["lora.weight"], torch.full((2, 2), expected))


def test_a_nan_update_is_dropped_and_named_as_in_process(caplog) -> None:
    grid = FakeGrid(4, nan={2})
    peers = server_app.discover(grid, "digest", wait_s=1.0, timeout_s=1.0)
    algorithm = fedavg(peers)
    log = run_rounds(algorithm, server_app.GridTransport(grid, peers, timeout_s=0.3))
    assert log[0]["dropped"] == ["c2"]
    expected = (10 * 1 + 20 * 2 + 40 * 4) / (10 + 20 + 40)  # size-weighted mean of c0, c1 and c3 only
    assert torch.allclose(algorithm.global_state["lora.weight"], torch.full((2, 2), expected))
    assert "c2" in caplog.text and "non-finite" in caplog.text


def test_a_stage_without_replies_keeps_the_previous_model() -> None:
    grid = FakeGrid(2, failing={0, 1})
    peers = server_app.discover(grid, "digest", wait_s=1.0, timeout_s=1.0)
    algorithm = fedavg(peers, rounds=2)
    log = run_rounds(algorithm, server_app.GridTransport(grid, peers, timeout_s=0.3))
    assert [sorted(r["dropped"]) for r in log] == [["c0", "c1"], ["c0", "c1"]]
    assert all(torch.equal(algorithm.global_state[k], INIT[k]) for k in INIT)


def test_personalization_reports_missing_clients() -> None:
    from fedpref.config import ExperimentConfig

    cfg = ExperimentConfig()
    cfg.personalization.steps = [0, 10]
    grid = FakeGrid(3, silent={2})
    peers = server_app.discover(FakeGrid(3), "digest", wait_s=1.0, timeout_s=1.0)
    transport = server_app.GridTransport(grid, peers, timeout_s=0.3)
    result, _ = finish_method(fedavg(peers), transport, peers.infos, cfg.personalization.steps)
    curves = result["personalization"]
    assert curves["missing"] == ["c2"]
    assert curves["acc_mean"] == [50.0, 75.0]


def test_nodes_with_their_own_files_are_ordered_by_client_and_counted_by_the_run_config() -> None:
    grid = FakeGrid(3, local=True)
    peers = server_app.discover(grid, "digest", wait_s=1.0, timeout_s=1.0, expected_clients=3)
    assert [c.client_id for c in peers.infos] == ["c0", "c1", "c2"]
    assert sorted(peers.node_of.values()) == sorted(grid.partition_of)
    with pytest.raises(RuntimeError, match="'clients'"):
        server_app.discover(FakeGrid(3, local=True), "digest", wait_s=1.0, timeout_s=1.0)


def test_discover_fails_clearly_when_a_partition_never_answers() -> None:
    class Partial(FakeGrid):
        def get_node_ids(self) -> list[int]:
            return list(self.partition_of)[:-1]

    with pytest.raises(RuntimeError, match="answered within"):
        server_app.discover(Partial(3), "digest", wait_s=0.5, timeout_s=0.3)


class Restarting(FakeGrid):
    """Partition 2's node is killed while round 1's tasks go out, and comes back as a new node (a new id)."""

    def __init__(self, num: int):
        super().__init__(num)
        self.dead: set[int] = set()
        self.restored: list[tuple[str, int]] = []

    def get_node_ids(self) -> list[int]:
        return [n for n in self.partition_of if n not in self.dead]

    def push_messages(self, messages: list[Message]) -> list[str]:
        if not self.dead and any(msg.metadata.group_id.startswith("FL/1/") for msg in messages):
            old = next(n for n, p in self.partition_of.items() if p == 2)
            self.dead.add(old)
            self.partition_of[old + 1] = 2
        live = [msg for msg in messages if msg.metadata.dst_node_id not in self.dead]
        return super().push_messages(live) + ["lost"] * (len(messages) - len(live))

    def answer(self, msg: Message, partition: int) -> Message:
        task, key = m.content_to_task(msg.content) if msg.metadata.message_type != "query.partition" else (None, None)
        if task is not None and task.action == RESTORE_MEMORY:
            self.restored.append((task.client_id, task.payload["before_round"]))
            reply = Reply(task.client_id, 0, metrics={"restored": 0.0})
            return Message(m.reply_to_content(reply, key.index), reply_to=msg)
        return super().answer(msg, partition)


def test_a_restarted_node_is_found_again_and_used_in_later_rounds(caplog) -> None:
    grid = Restarting(4)
    peers = server_app.discover(grid, "digest", wait_s=1.0, timeout_s=1.0)
    algorithm = fedavg(peers, rounds=3)
    log = run_rounds(algorithm, server_app.GridTransport(grid, peers, timeout_s=0.3, config_digest="digest"))
    assert [r["dropped"] for r in log] == [[], ["c2"], []]  # round 1 goes on without it, round 2 has it back
    assert peers.node_of["c2"] not in grid.dead and grid.restored == [("c2", 2)]  # it reloads its memory
    assert "client c2 is back" in caplog.text


def test_a_node_back_after_the_rounds_restores_its_last_snapshot() -> None:
    grid = Restarting(4)
    peers = server_app.discover(grid, "digest", wait_s=1.0, timeout_s=1.0)
    transport = server_app.GridTransport(grid, peers, timeout_s=0.3, config_digest="digest")
    grid.dead.add(peers.node_of["c1"])
    grid.partition_of[peers.node_of["c1"] + 1] = 1
    transport.rejoin(server_app.TaskKey("FedVPA-GP", "selector/seen"))
    assert grid.restored == [("c1", AFTER_THE_ROUNDS)]
