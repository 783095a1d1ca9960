"""Clients' encoded data, either all resident or encoded on demand with only the most recent few kept."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping

from fedpref.client.worker import EncodedClient
from fedpref.data.splits import ClientSplits

Encoder = Callable[[ClientSplits], EncodedClient]


class OnDemandClients(Mapping[str, EncodedClient]):
    """A read-only mapping client id -> EncodedClient that encodes a client when it is first asked for.

    At most `resident` encoded clients stay in memory (least recently used are dropped and re-encoded
    when needed again), so memory does not grow with the number of clients that are not training. A
    client's private `memory` (state that persists across rounds, e.g. Gumbel logits) is kept apart and
    survives eviction. Re-encoding repeats the tokenization and the frozen-prefix forward: the price of
    constant memory.
    """

    def __init__(self, splits: list[ClientSplits], encode: Encoder, resident: int):
        if resident < 1:
            raise ValueError(f"resident must be >= 1, got {resident}")
        self.splits = {s.client_id: s for s in splits}
        self.encode, self.resident = encode, resident
        self.cache: OrderedDict[str, EncodedClient] = OrderedDict()
        self.memories: dict[str, dict] = {}
        self.encodings = 0  # how many times a client was encoded (for tests and benchmarks)

    def __getitem__(self, client_id: str) -> EncodedClient:
        if client_id in self.cache:
            self.cache.move_to_end(client_id)
            return self.cache[client_id]
        client = self.encode(self.splits[client_id])
        self.encodings += 1
        client.memory = self.memories.setdefault(client_id, client.memory)
        self.cache[client_id] = client
        while len(self.cache) > self.resident:
            self.cache.popitem(last=False)
        return client

    def __iter__(self) -> Iterator[str]:
        return iter(self.splits)

    def __len__(self) -> int:
        return len(self.splits)
