"""A node's private memory: from Context.state, else (a SuperNode restarted on the same node id) from its newest
snapshot on disk from an earlier round."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("flwr")

from flwr.app import Context, RecordDict  # noqa: E402

from fedpref.engines.flower import messages as m  # noqa: E402
from fedpref.engines.flower.client_app import restore_memory, snapshot_path  # noqa: E402
from fedpref.protocol import TaskKey  # noqa: E402


def snapshots(folder: Path, rounds: dict[int, dict]) -> Path:
    for r, memory in rounds.items():
        path = snapshot_path(folder, "c1", "FedVPA-GP", r)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(memory))
    return folder


@pytest.mark.parametrize("round_idx, newest", [(3, 1.0), (1, 0.0), ("personalize", 3.0)])
def test_an_empty_context_state_takes_the_newest_earlier_snapshot(tmp_path: Path, round_idx, newest) -> None:
    folder = snapshots(tmp_path, {0: {"logits": [0.0]}, 2: {"logits": [1.0]}, 3: {"logits": [3.0]}})
    client = SimpleNamespace(client_id="c1", memory={"stale": True})
    restore_memory(client, Context(1, 1, {}, RecordDict(), {}), TaskKey("FedVPA-GP", round_idx), folder)
    assert client.memory == {"logits": [newest]}  # before round 3: round 2's; after the rounds: the last


def test_context_state_wins_over_the_disk(tmp_path: Path) -> None:
    folder = snapshots(tmp_path, {0: {"logits": [0.0]}})
    state = RecordDict({f"{m.MEMORY}.FedVPA-GP": m.memory_to_record({"logits": [9.0]})})
    client = SimpleNamespace(client_id="c1", memory={})
    restore_memory(client, Context(1, 1, {}, state, {}), TaskKey("FedVPA-GP", 5), folder)
    assert client.memory == {"logits": [9.0]}
    restore_memory(client, Context(1, 1, {}, RecordDict(), {}), TaskKey("FedVPA-GP", 5), None)
    assert client.memory == {}  # no snapshots kept: an empty memory, as before
