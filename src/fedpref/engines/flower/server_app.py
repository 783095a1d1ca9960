"""The Flower transport: tasks carried to SuperNodes as Messages over a Grid; finding the nodes first."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from flwr.app import Context, Message
from flwr.serverapp import Grid, ServerApp

from fedpref.engines.flower import messages as m
from fedpref.engines.loop import task_keys
from fedpref.protocol import RESTORE_MEMORY, ClientInfo, Reply, Task, TaskKey

LOG = logging.getLogger("flwr").getChild("fedpref")
LOCAL = -1  # the partition id of a node with its own data file (client_app.LOCAL)


@dataclass
class Peers:
    """The clients found on the grid, in partition order (= the in-process client order), and their nodes."""

    infos: list[ClientInfo]
    node_of: dict[str, int]
    held_out: list[str] = field(default_factory=list)  # unseen clients: never trained, still evaluated

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
        asked.update(new)
        msgs = [Message(m.partition_query(config_digest), n, "query.partition", group_id="discover") for n in new]
        replies = {r.metadata.src_node_id: r for r in grid.send_and_receive(msgs, timeout=timeout_s)}
        for node in new:  # a node that fails the query is not asked again
            if usable(replies.get(node), f"the partition query to node {node}"):
                info, partition, partitions = m.content_to_info(replies[node].content)
                key = info.client_id if partition == LOCAL else partition
                if key in found:
                    raise RuntimeError(f"two nodes claim {'client' if partition == LOCAL else 'partition'} {key}")
                found[key] = (info, node, m.content_held_out(replies[node].content))
                expected = expected_clients or partitions or None
                if partition == LOCAL and not expected_clients:
                    raise RuntimeError("nodes with their own data file: set the run config's 'clients' (how many)")
    kinds = {isinstance(key, str) for key in found}
    if len(kinds) > 1:
        raise RuntimeError("some nodes hold a partition of a pooled file and others their own file; use one way")
    ordered = [found[key] for key in sorted(found)]
    held_out = [info.client_id for info, _, held in ordered if held]
    return Peers([info for info, _, _ in ordered], {info.client_id: node for info, node, _ in ordered}, held_out)


class GridTransport:
    """The Flower transport: one Message per task to its client's node over the Grid (`send_and_receive`).

    A task that fails on its node, or whose reply does not come within `timeout_s`, is left out (and
    logged); clients keep their private memory themselves (in Context.state, and snapshots on their own disk).
    """

    def __init__(self, grid: Grid, peers: Peers, timeout_s: float):
        self.grid, self.peers, self.timeout_s = grid, peers, timeout_s

    def exchange(self, tasks: list[Task], key: TaskKey) -> list[Reply]:
        group = f"{key.method}/{key.round}/{key.stage}"
        msgs = [
            Message(m.task_to_content(t, k), self.peers.node_of[t.client_id], m.message_type(t.action), group_id=group)
            for t, k in zip(tasks, task_keys(tasks, key))
        ]
        by_index = {}
        for msg in self.grid.send_and_receive(msgs, timeout=self.timeout_s):
            if usable(msg, f"a task of {group}"):
                reply, index = m.content_to_reply(msg.content)
                if 0 <= index < len(tasks) and reply.client_id == tasks[index].client_id:
                    by_index[index] = reply
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
            self.exchange(tasks, TaskKey(method, RESTORE_MEMORY))

    def memories(self) -> dict[str, dict]:
        return {}


def make_server_app(body: Callable[[Grid], None]) -> ServerApp:
    """A ServerApp whose main runs `body` on the grid (the Simulation Engine runs it in this process)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        body(grid)

    return app
