"""Task/Reply <-> RecordDict conversions round-trip exactly, also through Flower's wire serialization."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

pytest.importorskip("flwr")

from flwr.app import RecordDict  # noqa: E402
from flwr.common.serde import recorddict_to_proto  # noqa: E402
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects  # noqa: E402
from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents  # noqa: E402

from fedpref.config import load_config  # noqa: E402
from fedpref.data.load import load_pairs  # noqa: E402
from fedpref.engines.flower import messages as m  # noqa: E402
from fedpref.protocol import EVALUATE, PERSONALIZE, RESTORE_MEMORY, TRAIN, ClientInfo, Reply, Task  # noqa: E402

TINY = Path(__file__).resolve().parents[2] / "src/fedpref/configs/quick/tiny.toml"


def wire(content: RecordDict) -> RecordDict:
    """What the other side gets: every nested object deflated to bytes and inflated again."""
    contents = {oid: obj.deflate() for oid, obj in get_all_nested_objects(content).items()}
    return inflate_object_from_contents(content.object_id, contents)


def state(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "base.layer.5.lora_A.weight": torch.randn(4, 16, generator=g),
        "base.layer.5.lora_B.weight": torch.randn(16, 4, generator=g, dtype=torch.float64),
        "head.bias": torch.randn(1, generator=g),
        "head.weight": torch.randn(1, 16, generator=g).half(),
    }


def assert_states_equal(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
        assert torch.equal(a[k], b[k])


@pytest.mark.parametrize("through_wire", [False, True])
@pytest.mark.parametrize(
    "task",
    [
        Task("c03", TRAIN, [state(0)], steps=7, tag=2),
        Task("c11", EVALUATE, [state(1), state(2), state(3)], tag="reassign"),
        Task("c00", TRAIN, [state(4)], steps=1, tag=None),
    ],
)
def test_task_round_trip(task: Task, through_wire: bool) -> None:
    key = m.TaskKey("FedGD", 3, 1, 4)
    content = m.task_to_content(task, key)
    back, back_key = m.content_to_task(wire(content) if through_wire else content)
    assert back_key == key
    assert (back.client_id, back.action, back.steps, back.tag) == (task.client_id, task.action, task.steps, task.tag)
    assert len(back.models) == len(task.models)
    for a, b in zip(task.models, back.models):
        assert_states_equal(a, b)


@pytest.mark.parametrize("through_wire", [False, True])
@pytest.mark.parametrize(
    "reply",
    [
        Reply("c03", 120, state=state(5), metrics={"train_loss": 0.6931471805599453}, tag=1),
        Reply("c07", 88, metrics={"val_loss": [0.1, 1 / 3, float("inf")], "val_acc": [50.0, 75.5, 0.0]}, tag="freeze"),
        Reply("c01", 5, metrics={"count": 3, "flag": True, "note": "x", "empty": [], "nested": {"a": [1]}}),
    ],
)
def test_reply_round_trip(reply: Reply, through_wire: bool) -> None:
    content = m.reply_to_content(reply, index=6)
    back, index = m.content_to_reply(wire(content) if through_wire else content)
    assert index == 6
    assert (back.client_id, back.num_examples, back.tag) == (reply.client_id, reply.num_examples, reply.tag)
    assert back.metrics == reply.metrics and list(back.metrics) == list(reply.metrics)
    assert {k: type(v) for k, v in back.metrics.items()} == {k: type(v) for k, v in reply.metrics.items()}
    assert (back.state is None) == (reply.state is None)
    if reply.state is not None:
        assert_states_equal(reply.state, back.state)


def test_node_info_round_trip() -> None:
    info = ClientInfo("c02", 37, "G3")
    assert m.content_to_info(wire(m.info_to_content(info, 2, 8))) == (info, 2, 8)
    assert m.content_to_info(wire(m.info_to_content(ClientInfo("c0", 1), 0, 1)))[0].true_group is None
    assert not m.content_held_out(wire(m.info_to_content(info, 2, 8)))
    assert m.content_held_out(wire(m.info_to_content(info, 2, 8, held_out=True)))


def test_personalization_task_and_curve_round_trip() -> None:
    task = Task("c02", PERSONALIZE, [state(9)], steps=10, payload={"checkpoints": [0, 5, 10]})
    back, key = m.content_to_task(wire(m.task_to_content(task, m.TaskKey("FL", PERSONALIZE, 0, 3))))
    assert key == m.TaskKey("FL", "personalize", 0, 3) and back.payload == {"checkpoints": [0, 5, 10]}
    assert_states_equal(back.models[0], state(9))
    reply, index = m.content_to_reply(wire(m.reply_to_content(Reply("c02", 12, metrics={"acc": [50.0, 62.5]}), 3)))
    assert (reply.client_id, reply.metrics, index) == ("c02", {"acc": [50.0, 62.5]}, 3)


def test_only_adapter_arrays_and_scalars_travel() -> None:
    content = m.task_to_content(Task("c0", TRAIN, [state(0)], steps=2), m.TaskKey("FL", 0, 0, 0))
    assert set(content.array_records) == {"model.0"}
    assert all(isinstance(v, int | float | str) for v in content.config_records[m.TASK].values())


def test_message_types_are_valid_flower_categories() -> None:
    assert m.message_type(TRAIN) == "train" and m.message_type(EVALUATE) == "evaluate"
    assert m.message_type("train_variational") == "train"
    assert m.message_type(PERSONALIZE) == "query.personalize"
    assert m.message_type(RESTORE_MEMORY) == "query.restore_memory"


@pytest.mark.skipif("payload" not in Task.__dataclass_fields__, reason="Task has no payload field yet")
@pytest.mark.parametrize("through_wire", [False, True])
def test_task_payload_round_trip(through_wire: bool) -> None:
    payload = {
        "spec": {"dim": 8, "kind": "gauss"},
        "prior": {"ids": ["c1", "c2"], "mu": [[0.1, -2.5], [1 / 3, 0.0]], "var": [[1.0, 2.0], [0.5, 0.25]]},
        "prototype": None,
        "centroids": torch.randn(3, 4, generator=torch.Generator().manual_seed(0)),
    }
    task = Task("c1", "train_variational", [state(0)], 3, None, payload)
    back, _ = m.content_to_task(wire_or_not(m.task_to_content(task, m.TaskKey("FedVPA-GP", 0, 0, 0)), through_wire))
    assert list(back.payload) == list(payload)
    assert {k: v for k, v in back.payload.items() if k != "centroids"} == {
        k: v for k, v in payload.items() if k != "centroids"
    }
    assert torch.equal(back.payload["centroids"], payload["centroids"])
    assert back.action == "train_variational"


def wire_or_not(content: RecordDict, through_wire: bool) -> RecordDict:
    return wire(content) if through_wire else content


def test_client_memory_round_trip() -> None:
    memory = {"gumbel_logits": {"c1": -0.25, "c7": 1.5}}
    assert m.record_to_memory(wire(RecordDict({m.MEMORY: m.memory_to_record(memory)}))[m.MEMORY]) == memory


@pytest.mark.flower
def test_no_client_text_in_any_message_of_a_simulation(tiny_flower) -> None:
    """Every message of the shared Flower run (every federated method; tests/conftest.py records them as
    protobuf bytes, as they would go over the wire) is free of every prompt, chosen and rejected text."""
    blobs = [p.read_bytes() for p in sorted((tiny_flower.parent / "messages").glob("*.pb"))]
    kinds = {b"train", b"evaluate", b"query.personalize"}
    assert len(blobs) > 100 and all(any(k in b for b in blobs) for k in kinds)
    texts = {t for p in load_pairs(load_config(TINY)) for t in (p.prompt, p.chosen, p.rejected)}
    # every sentence on its own too (a text cut short would still leak); the ASCII ones, which a leak would
    # leave as one printable run of bytes (2 of the 576 texts have an accented letter, their other sentences count)
    texts |= {s.strip() for t in list(texts) for s in t.split(".") if len(s.strip()) >= 20}
    texts = {t for t in texts if t.isascii()}
    assert len(texts) > 1000
    runs = {r for b in blobs for r in printable_runs(b)}
    leaks = [t for t in texts for r in runs if t in r]
    assert not leaks, leaks[:3]
    # the check can fail: a task whose payload carried a text would be caught
    text = max(texts, key=len)
    content = m.task_to_content(Task("c0", TRAIN, [state(0)], payload={"note": text}), m.TaskKey("FL", 0, 0, 0))
    assert any(text in r for r in printable_runs(recorddict_to_proto(content).SerializeToString()))


def printable_runs(blob: bytes) -> list[str]:
    """The runs of 20 or more printable ASCII bytes: where an ASCII text would sit, apart from tensor bytes."""
    return [r.decode() for r in re.findall(rb"[\x20-\x7e]{20,}", blob)]
