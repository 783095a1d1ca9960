"""Message content to bytes and back, as Flower serializes it (flwr only, no torch: the light ClientApp uses it)."""

from __future__ import annotations

from flwr.app import RecordDict
from flwr.common.serde import recorddict_from_proto, recorddict_to_proto
from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict


def content_to_bytes(content: RecordDict) -> bytes:
    return recorddict_to_proto(content).SerializeToString()


def content_from_bytes(blob: bytes) -> RecordDict:
    proto = ProtoRecordDict()
    proto.ParseFromString(blob)
    return recorddict_from_proto(proto)
