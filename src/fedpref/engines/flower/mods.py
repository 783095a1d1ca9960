"""Flower mods fedpref's ClientApps wrap their handlers in (light: flwr only, no torch)."""

from __future__ import annotations

from flwr.app import Context, Message
from flwr.client.mod import secaggplus_mod
from flwr.clientapp.typing import ClientAppCallable
from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS


def secure_when_asked(msg: Message, context: Context, call_next: ClientAppCallable) -> Message:
    """Flower's `secaggplus_mod` on the train messages of a SecAgg+ stage (they carry its configs); every other
    train message goes straight to the handler."""
    if RECORD_KEY_CONFIGS in msg.content.config_records:
        return secaggplus_mod(msg, context, call_next)
    return call_next(msg, context)
