"""The in-process transport: every client lives in this process and runs its tasks one after another."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fedpref.algorithms.aggregation import clear_aggregate
from fedpref.client.worker import Trainers, answer
from fedpref.engines.loop import task_keys
from fedpref.engines.traffic import Traffic
from fedpref.protocol import PERSONALIZE, Aggregate, Reply, Task, TaskKey

Progress = Callable[[str, int, int], None]  # (what, done, total)
Handler = Callable[[Task, TaskKey, Any], Reply]  # (task, its key, the client's own object) -> reply


class InProcessTransport:
    """Calls the client handler directly (`fedpref.client.worker.answer` with `trainers`, or any `handler`);
    a checkpoint holds the clients' private memories for them."""

    concurrent_clients = False  # one client after another: a stage's client time is the sum of its clients'

    def __init__(
        self,
        clients: Mapping[str, Any],
        trainers: Trainers | None = None,
        progress: Progress | None = None,
        handler: Handler | None = None,
    ):
        self.clients = clients
        self.handler = handler or (lambda task, key, client: answer(task, key, client, trainers))
        self.progress = progress  # told of each client's personalization as it ends (they take long)
        self.traffic = Traffic()  # the bytes of the tensors and numeric metrics each task and reply carries

    def exchange(self, tasks: list[Task], key: TaskKey) -> list[Reply]:
        replies = []
        self.traffic.count_tasks(tasks)
        for i, (task, task_key) in enumerate(zip(tasks, task_keys(tasks, key))):
            replies.append(self.handler(task, task_key, self.clients[task.client_id]))
            if self.progress and key.round == PERSONALIZE:
                self.progress(f"{key.method}: personalization", i + 1, len(tasks))
        self.traffic.count_replies(replies)
        return replies

    def aggregate(self, tasks: list[Task], key: TaskKey) -> Aggregate:
        """Secure aggregation's result, computed in the clear: in one process there is nobody to hide it from,
        and this is the reference the Flower engine's SecAgg+ sum is tested against."""
        return clear_aggregate(tasks, self.exchange(tasks, key))

    def begin_method(self, method: str, next_round: int = 0, saved_memories: dict[str, dict] | None = None) -> None:
        """Each client's private memory belongs to one method's run: empty, or as saved by a checkpoint."""
        for memory in self.memories().values():
            memory.clear()
        for cid, saved in (saved_memories or {}).items():
            memory = self._memory_of(cid)
            memory.clear()
            memory.update(saved)

    def memories(self) -> dict[str, dict]:
        """The clients' non-empty private memories (e.g. FedVPA-GP's Gumbel logits), for a checkpoint."""
        stored = getattr(self.clients, "memories", None)  # OnDemandClients keeps memories apart from encodings
        if stored is None:
            stored = {cid: getattr(c, "memory", {}) for cid, c in self.clients.items()}
        return {cid: m for cid, m in stored.items() if m}

    def _memory_of(self, client_id: str) -> dict:
        stored = getattr(self.clients, "memories", None)
        return stored.setdefault(client_id, {}) if stored is not None else self.clients[client_id].memory
