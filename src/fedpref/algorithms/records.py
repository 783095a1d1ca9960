"""Per-round history records shared by the multi-model algorithms."""

from __future__ import annotations


def log_round(history: list[dict], round_idx: int, **fields) -> None:
    """Merge `fields` into this round's record (one per round: the engine logs the round's last record)."""
    if not history or history[-1].get("round") != round_idx:
        history.append({"round": round_idx})
    history[-1].update(fields)
