"""SecAgg+ over a fake in-memory grid whose nodes run Flower's real secaggplus_mod (no Ray, no model): the server
gets the clear weighted mean within quantization, never one client's state, and a dropout below the threshold
is reported, not averaged."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("flwr")

from flwr.app import Context, Error, Message, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.common.serde import message_from_proto, message_to_proto  # noqa: E402
from test_flower_server_loop import FakeGrid  # noqa: E402

from fedpref.algorithms.aggregation import clear_aggregate  # noqa: E402
from fedpref.algorithms.fedavg import FedAvg  # noqa: E402
from fedpref.config import SecureAggregationConfig  # noqa: E402
from fedpref.engines.flower import messages as m  # noqa: E402
from fedpref.engines.flower import server_app  # noqa: E402
from fedpref.engines.flower.mods import secure_when_asked  # noqa: E402
from fedpref.engines.loop import run_rounds  # noqa: E402
from fedpref.protocol import Reply  # noqa: E402

SIZE = (3, 5)
INIT = {"lora.weight": torch.linspace(-0.5, 0.5, 15).reshape(SIZE), "head.bias": torch.tensor([0.25])}


@pytest.fixture(autouse=True)
def task_identity(monkeypatch):
    """What a ServerApp process has set when it creates messages: its run, task and node."""
    from flwr.supercore.task_identity import TaskIdentity

    for name, value in (("_run_id", 1), ("_task_id", 1), ("_node_id", 0)):
        monkeypatch.setattr(TaskIdentity, name, value)


def trained(model: dict, partition: int) -> dict:
    """A client's stand-in training: a distinct, recognizable state per client."""
    return {k: v + 0.1 * (partition + 1) + 0.01 * torch.arange(v.numel()).reshape(v.shape) for k, v in model.items()}


def client_app(partition: int) -> ClientApp:
    """A node's app as fedpref's: train messages through `secure_when_asked`, replies built as fedpref's are."""
    app = ClientApp()

    @app.train(mods=[secure_when_asked])
    def train(msg: Message, context: Context) -> Message:
        if m.is_fitins(msg.content):
            task, key = m.fitins_content_to_task(msg.content)
            reply = Reply(task.client_id, 10 * (partition + 1), trained(task.models[0], partition), {"train_loss": 0.5})
            return Message(m.reply_to_fitres_content(reply, key.index, task.payload["secure_weight"]), reply_to=msg)
        task, key = m.content_to_task(msg.content)
        reply = Reply(task.client_id, 10 * (partition + 1), trained(task.models[0], partition), {"train_loss": 0.5})
        return Message(m.reply_to_content(reply, key.index), reply_to=msg)

    return app


class SecureGrid(FakeGrid):
    """Every node runs `client_app` with its own Context (as a SuperNode keeps it); a node in `failing` answers its
    SecAgg+ collect message (the one carrying the task) with an error. Keeps every pulled message's bytes."""

    def __init__(self, num: int, failing: set[int] = frozenset()):
        super().__init__(num)
        self.apps = {node: client_app(p) for node, p in self.partition_of.items()}
        self.contexts = {node: Context(1, node, {}, RecordDict(), {}) for node in self.partition_of}
        self.secure_failing, self.pulled = failing, []

    def answer(self, msg: Message, partition: int) -> Message:
        node = msg.metadata.dst_node_id
        if msg.metadata.message_type == "query.partition":
            return super().answer(msg, partition)
        if partition in self.secure_failing and m.is_fitins(msg.content):
            return Message(Error(code=1, reason="node lost"), reply_to=msg)
        # a copy, as off the wire: the workflow sends one content object to every node
        return self.apps[node](message_from_proto(message_to_proto(msg)), self.contexts[node])

    def pull_messages(self, ids: list[str]) -> list[Message]:
        out = super().pull_messages(ids)
        self.pulled += [message_to_proto(x).SerializeToString() for x in out]
        return out


def secure_round(grid: SecureGrid, settings: SecureAggregationConfig | None = None):
    """One FedAvg round with every client, securely aggregated: (algorithm, round log, the clear reference)."""
    peers = server_app.discover(grid, "digest", wait_s=1.0, timeout_s=1.0)
    algorithm = FedAvg(peers.infos, INIT, 1, len(peers.infos), local_steps=1, seed=0, secure=True)
    tasks = FedAvg(peers.infos, INIT, 1, len(peers.infos), local_steps=1, seed=0, secure=True).next_tasks(0)
    answered = [p for p in range(len(peers.infos)) if p not in grid.secure_failing]
    replies = [Reply(f"c{p}", 10 * (p + 1), trained(INIT, p)) for p in answered]
    log = run_rounds(algorithm, server_app.GridTransport(grid, peers, timeout_s=5.0, secure=settings))
    return algorithm, log, clear_aggregate(tasks, replies)


def assert_close_to_quantization(a: dict, b: dict) -> None:
    for key in b:  # 2^22 levels over [-8, 8]: a step of 3.8e-6 per weighted value
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-4, msg=key)


def test_the_server_gets_the_weighted_mean_within_quantization() -> None:
    algorithm, log, clear = secure_round(SecureGrid(4))
    assert clear.weight == 10 + 20 + 30 + 40
    assert_close_to_quantization(algorithm.global_state, clear.state)
    assert not torch.equal(algorithm.global_state["lora.weight"], INIT["lora.weight"])
    assert log[0]["dropped"] == [] and "secure_aggregation_failed" not in log[0]
    assert log[0]["train_loss"] == 0.5  # plain metrics still travel


def test_no_message_the_server_receives_holds_a_client_state() -> None:
    grid = SecureGrid(4)
    secure_round(grid)
    states = [trained(INIT, p)["lora.weight"].numpy().tobytes() for p in range(4)]
    for state in states:
        assert not any(state[:32] in blob for blob in grid.pulled)  # the first 8 values of each client's matrix
    # positive control: the same search finds a state in a reply sent in the clear
    plain = m.reply_to_content(Reply("c0", 10, trained(INIT, 0)), 0)
    assert states[0][:32] in message_to_proto(Message(plain, dst_node_id=100, message_type="train")).SerializeToString()


def test_a_dropout_above_the_threshold_is_recovered() -> None:
    """4 shares, threshold 0.5 -> 2: one lost node's masks are rebuilt from its neighbours' shares."""
    settings = SecureAggregationConfig(enabled=True, reconstruction_threshold=0.5)
    algorithm, log, clear = secure_round(SecureGrid(4, failing={2}), settings)
    assert_close_to_quantization(algorithm.global_state, clear.state)  # the mean of c0, c1, c3 only
    assert log[0]["dropped"] == ["c2"]


def test_a_dropout_below_the_threshold_is_reported_not_averaged() -> None:
    """Threshold 3 of 4 shares: two lost nodes leave too few to unmask (with 2 they would be recovered)."""
    settings = SecureAggregationConfig(enabled=True, reconstruction_threshold=3)
    algorithm, log, _ = secure_round(SecureGrid(4, failing={1, 2}), settings)
    assert log[0]["secure_aggregation_failed"] and "halted" in log[0]["secure_aggregation_failed"][0]
    assert sorted(log[0]["dropped"]) == ["c0", "c1", "c2", "c3"]
    for key in INIT:  # the round kept the previous model
        assert torch.equal(algorithm.global_state[key], INIT[key])
