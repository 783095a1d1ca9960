"""The Flower transport: tasks carried to SuperNodes as Messages over a Grid; finding the nodes first."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from flwr.app import Context, Message
from flwr.serverapp import Grid, ServerApp

from fedpref.config import SecureAggregationConfig
from fedpref.engines.flower import messages as m
from fedpref.engines.loop import task_keys
from fedpref.engines.traffic import Traffic
from fedpref.protocol import AFTER_THE_ROUNDS, RESTORE_MEMORY, Aggregate, ClientInfo, Reply, Task, TaskKey

LOG = logging.getLogger("flwr").getChild("fedpref")
LOCAL = -1  # the partition id of a node with its own data file (client_app.LOCAL)


@dataclass
class Peers:
    """The clients found on the grid, in partition order (= the in-process client order), and their nodes."""

    infos: list[ClientInfo]
    node_of: dict[str, int]
    held_out: list[str] = field(default_factory=list)  # unseen clients: never trained, still evaluated
    asked: set[int] = field(default_factory=set)  # every node id already asked for its client

    def trained(self) -> list[ClientInfo]:
        return [info for info in self.infos if info.client_id not in self.held_out]


def usable(reply: Message | None, what: str) -> bool:
    """A reply counts unless it is missing (timeout) or an error; both are logged and the run goes on."""
    if reply is None:
        LOG.warning("fedpref: no reply in time for %s; left out", what)
        return False
    if reply.has_error():
        LOG.warning("fedpref: %s failed on node %s: %s", what, reply.metadata.src_node_id, reply.error.reason)
        return False
    return True


def ask_nodes(grid: Grid, nodes: list[int], config_digest: str, timeout_s: float) -> dict[int, tuple]:
    """node -> (client info, partition id, number of partitions, held out) of each of `nodes` that answered
    the partition query; a node that fails it (or runs another config) is logged and left out."""
    msgs = [Message(m.partition_query(config_digest), n, "query.partition", group_id="discover") for n in nodes]
    replies = {r.metadata.src_node_id: r for r in grid.send_and_receive(msgs, timeout=timeout_s)}
    answers = {}
    for node in nodes:
        if usable(replies.get(node), f"the partition query to node {node}"):
            info, partition, partitions = m.content_to_info(replies[node].content)
            answers[node] = (info, partition, partitions, m.content_held_out(replies[node].content))
    return answers


def discover(grid: Grid, config_digest: str, wait_s: float, timeout_s: float, expected_clients: int = 0) -> Peers:
    """Ask each connected node once for its client; wait until every one has answered.

    Nodes holding a partition of a pooled file say how many partitions there are and come in partition order
    (the in-process order); nodes holding their own file (partition LOCAL) come in client-id order, and the
    server waits for `expected_clients` of them.
    """
    found: dict[int | str, tuple[ClientInfo, int, bool]] = {}
    asked: set[int] = set()
    expected, deadline = expected_clients or None, time.monotonic() + wait_s
    while expected is None or len(found) < expected:
        new = sorted(set(grid.get_node_ids()) - asked)
        if not new and time.monotonic() >= deadline:
            raise RuntimeError(f"only {sorted(found)} of {expected or '?'} clients answered within {wait_s} s")
        if not new:
            time.sleep(1.0)
            continue
        asked.update(new)  # a node that fails the query is not asked again
        for node, (info, partition, partitions, held) in ask_nodes(grid, new, config_digest, timeout_s).items():
            key = info.client_id if partition == LOCAL else partition
            if key in found:
                raise RuntimeError(f"two nodes claim {'client' if partition == LOCAL else 'partition'} {key}")
            found[key] = (info, node, held)
            expected = expected_clients or partitions or None
            if partition == LOCAL and not expected_clients:
                raise RuntimeError("nodes with their own data file: set the run config's 'clients' (how many)")
    kinds = {isinstance(key, str) for key in found}
    if len(kinds) > 1:
        raise RuntimeError("some nodes hold a partition of a pooled file and others their own file; use one way")
    ordered = [found[key] for key in sorted(found)]
    held_out = [info.client_id for info, _, held in ordered if held]
    node_of = {info.client_id: node for info, node, _ in ordered}
    return Peers([info for info, _, _ in ordered], node_of, held_out, asked)


class GridTransport:
    """The Flower transport: one Message per task to its client's node over the Grid (`send_and_receive`).

    A task that fails on its node, or whose reply does not come within `timeout_s`, is left out (and
    logged); clients keep their private memory themselves (in Context.state, and snapshots on their own disk).
    With `config_digest`, each exchange first asks nodes that joined since for their client: a known client
    on a new node (a restarted SuperNode) takes its place again, and restores its memory snapshot.
    """

    concurrent_clients = True  # every node gets its message at once: a stage waits on its slowest client

    def __init__(
        self,
        grid: Grid,
        peers: Peers,
        timeout_s: float,
        config_digest: str | None = None,
        secure: SecureAggregationConfig | None = None,
    ):
        self.grid, self.peers, self.timeout_s, self.config_digest = grid, peers, timeout_s, config_digest
        self.secure = secure or SecureAggregationConfig()  # SecAgg+'s settings (its shares, threshold, quantization)
        self.traffic = Traffic()  # the bytes of each plain message's content (SecAgg+ stages are not counted)

    def exchange(self, tasks: list[Task], key: TaskKey) -> list[Reply]:
        if self.config_digest is not None:
            self.rejoin(key)
        return self._exchange(tasks, key)

    def aggregate(self, tasks: list[Task], key: TaskKey) -> Aggregate:
        """The stage under SecAgg+ (`secure_aggregation.secure_aggregate`): the server never holds one state."""
        from fedpref.engines.flower.secure_aggregation import secure_aggregate  # Flower's legacy server stack

        if self.config_digest is not None:
            self.rejoin(key)
        return secure_aggregate(self.grid, self.peers.node_of, tasks, key, self.secure, self.timeout_s)

    def rejoin(self, key: TaskKey) -> None:
        """Nodes new on the grid: each known client among them is routed to its new node (its old one is gone);
        from round 1 on it reloads its own memory snapshot (Context.state starts empty on a new node): the last
        one from before this round, or its last one in the stages after the rounds (personalization, selector)."""
        new = sorted(set(self.grid.get_node_ids()) - self.peers.asked)
        if not new:
            return
        self.peers.asked.update(new)
        back = []
        for node, (info, *_) in ask_nodes(self.grid, new, self.config_digest, self.timeout_s).items():
            if info.client_id not in self.peers.node_of:
                LOG.warning("fedpref: node %s holds client %s, unknown to this run; not used", node, info.client_id)
                continue
            LOG.warning("fedpref: client %s is back, on node %s", info.client_id, node)
            self.peers.node_of[info.client_id] = node
            back.append(info.client_id)
        before = key.round if isinstance(key.round, int) else AFTER_THE_ROUNDS
        if back and before > 0:
            restore = [Task(c, RESTORE_MEMORY, [], payload={"before_round": before}) for c in back]
            self._exchange(restore, TaskKey(key.method, RESTORE_MEMORY))

    def _exchange(self, tasks: list[Task], key: TaskKey) -> list[Reply]:
        group = f"{key.method}/{key.round}/{key.stage}"
        msgs = [
            Message(m.task_to_content(t, k), self.peers.node_of[t.client_id], m.message_type(t.action), group_id=group)
            for t, k in zip(tasks, task_keys(tasks, key))
        ]
        for task, msg in zip(tasks, msgs):
            if task.action != RESTORE_MEMORY:
                self.traffic.sent(task.client_id, m.content_bytes(msg.content))
        by_index = {}
        for msg in self.grid.send_and_receive(msgs, timeout=self.timeout_s):
            if usable(msg, f"a task of {group}"):
                reply, index = m.content_to_reply(msg.content)
                if 0 <= index < len(tasks) and reply.client_id == tasks[index].client_id:
                    by_index[index] = reply
                    self.traffic.received(reply.client_id, m.content_bytes(msg.content))
                else:
                    LOG.warning(
                        "fedpref: %s answered task %d of %s, not its own; left out", reply.client_id, index, group
                    )
        for i, task in enumerate(tasks):
            if i not in by_index:
                LOG.warning(
                    "fedpref: no usable reply to %s task %d of %s (%s); left out", task.action, i, group, task.client_id
                )
        return [by_index[i] for i in sorted(by_index)]

    def begin_method(self, method: str, next_round: int = 0, saved_memories: dict[str, dict] | None = None) -> None:
        """A node's memory is per method already; resuming, each node restores its own snapshot."""
        if next_round > 0:
            tasks = [
                Task(c.client_id, RESTORE_MEMORY, [], payload={"before_round": next_round}) for c in self.peers.infos
            ]
            self._exchange(tasks, TaskKey(method, RESTORE_MEMORY))

    def memories(self) -> dict[str, dict]:
        return {}


def make_server_app(body: Callable[[Grid], None]) -> ServerApp:
    """A ServerApp whose main runs `body` on the grid (the Simulation Engine runs it in this process)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        body(grid)

    return app
