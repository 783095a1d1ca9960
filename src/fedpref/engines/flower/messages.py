"""Pure conversions between the engine contract (Task, Reply) and Flower RecordDicts."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict
from flwr.common import Code, FitIns, FitRes, Parameters, Status, ndarrays_to_parameters
from flwr.compat.common import recorddict_compat as compat

from fedpref.engines.flower.wire import content_from_bytes, content_to_bytes
from fedpref.engines.traffic import NUMBER_BYTES
from fedpref.models.adapters import State
from fedpref.protocol import EVALUATE, EVALUATE_SELECTOR, PERSONALIZE, RESTORE_MEMORY, ClientInfo, Reply, Task, TaskKey

TASK, REPLY, METRICS, STATE, MODEL = "fedpref.task", "fedpref.reply", "fedpref.metrics", "fedpref.state", "model."
PAYLOAD, MEMORY = "fedpref.payload", "fedpref.memory"
FITINS_CONFIG = "fitins.config"  # where a SecAgg+ stage's train message carries its FitIns config (Flower's compat)
STATE_KEYS = "fedpref.state_keys"


def state_to_record(state: State) -> ArrayRecord:
    """Adapter/head tensors as an ArrayRecord (same keys, order, dtypes and values)."""
    record = ArrayRecord()
    for name, tensor in state.items():
        record[name] = Array(tensor.detach().cpu().contiguous().numpy())
    return record


def content_bytes(content: RecordDict) -> int:
    """The data a message carries, as the in-process count has it (fedpref.engines.traffic): each array's
    elements at its dtype's size, 8 bytes per number of its MetricRecords (config and JSON fields not counted)."""
    arrays = sum(
        int(np.prod(a.shape, dtype=np.int64)) * np.dtype(a.dtype).itemsize
        for record in content.array_records.values()
        for a in record.values()
    )
    numbers = sum(
        len(v) if isinstance(v, list) else 1 for record in content.metric_records.values() for v in record.values()
    )
    return arrays + NUMBER_BYTES * numbers


def record_to_state(record: ArrayRecord) -> State:
    return {name: torch.from_numpy(array.numpy().copy()) for name, array in record.items()}


def _dump(value: Any) -> str:
    return json.dumps(value, default=lambda o: o.item() if hasattr(o, "item") else repr(o))


def _is_metric(value: Any) -> bool:
    """Whether a MetricRecord holds `value` exactly: a number or a non-empty list of one number type."""
    if isinstance(value, list):
        return bool(value) and len({type(v) for v in value}) == 1 and _is_number(value[0])
    return _is_number(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def message_type(action: str) -> str:
    """The Flower message type of a task: "evaluate" for evaluation, a query for the local phase and for a
    memory restore, "train" for every kind of training."""
    if action in (PERSONALIZE, RESTORE_MEMORY):
        return f"query.{action}"
    return "evaluate" if action in (EVALUATE, EVALUATE_SELECTOR) else "train"


def _split_payload(payload: dict[str, Any]) -> tuple[ArrayRecord, str]:
    """Top-level tensors as arrays (exact); everything else as JSON (numbers, strings, lists, dicts, None)."""
    tensors = {k: v for k, v in payload.items() if isinstance(v, torch.Tensor)}
    rest = {k: v for k, v in payload.items() if k not in tensors}
    return state_to_record(tensors), json.dumps({"order": list(payload), "values": rest})


def _join_payload(arrays: ArrayRecord | None, text: str) -> dict[str, Any]:
    parsed = json.loads(text)
    values = {**parsed["values"], **(record_to_state(arrays) if arrays is not None else {})}
    return {k: values[k] for k in parsed["order"]}


def task_to_content(task: Task, key: TaskKey) -> RecordDict:
    """A task as message content: its fields and key in a ConfigRecord, each model in an ArrayRecord."""
    config = ConfigRecord(
        {
            "client_id": task.client_id,
            "action": task.action,
            "steps": task.steps,
            "tag": _dump(task.tag),
            "num_models": len(task.models),
            "method": key.method,
            "round": _dump(key.round),  # a number, or "personalize"
            "stage": key.stage,
            "index": key.index,
        }
    )
    content = RecordDict({TASK: config})
    for k, model in enumerate(task.models):
        content[f"{MODEL}{k}"] = state_to_record(model)
    if payload := task.payload:
        arrays, config["payload"] = _split_payload(payload)
        content[PAYLOAD] = arrays
    return content


def content_to_task(content: RecordDict) -> tuple[Task, TaskKey]:
    c = content.config_records[TASK]
    models = [record_to_state(content.array_records[f"{MODEL}{k}"]) for k in range(int(c["num_models"]))]
    extra = {"payload": _join_payload(content.array_records.get(PAYLOAD), str(c["payload"]))} if "payload" in c else {}
    task = Task(str(c["client_id"]), str(c["action"]), models, int(c["steps"]), json.loads(str(c["tag"])), **extra)
    key = TaskKey(str(c["method"]), json.loads(str(c["round"])), int(c["stage"]), int(c["index"]))
    return task, key


def reply_to_content(reply: Reply, index: int) -> RecordDict:
    """A reply as message content; numeric metrics go in a MetricRecord, any others as JSON."""
    numeric = {k: v for k, v in reply.metrics.items() if _is_metric(v)}
    other = {k: v for k, v in reply.metrics.items() if k not in numeric}
    config = ConfigRecord(
        {
            "client_id": reply.client_id,
            "num_examples": reply.num_examples,
            "tag": _dump(reply.tag),
            "index": index,
            "other_metrics": _dump(other),
            "metric_order": _dump(list(reply.metrics)),
        }
    )
    content = RecordDict({REPLY: config, METRICS: MetricRecord(numeric)})
    if reply.state is not None:
        content[STATE] = state_to_record(reply.state)
    return content


def content_to_reply(content: RecordDict) -> tuple[Reply, int]:
    """The reply and the index of the task it answers."""
    c = content.config_records[REPLY]
    merged = {**dict(content.metric_records[METRICS]), **json.loads(str(c["other_metrics"]))}
    metrics = {k: merged[k] for k in json.loads(str(c["metric_order"]))}
    state = record_to_state(content.array_records[STATE]) if STATE in content.array_records else None
    reply = Reply(str(c["client_id"]), int(c["num_examples"]), state, metrics, json.loads(str(c["tag"])))
    return reply, int(c["index"])


def partition_query(config_digest: str) -> RecordDict:
    """The server's first question to a node; the digest makes a node with a different config refuse."""
    return RecordDict({TASK: ConfigRecord({"config_digest": config_digest})})


def query_digest(content: RecordDict) -> str:
    return str(content.config_records[TASK]["config_digest"])


def info_to_content(info: ClientInfo, partition_id: int, num_partitions: int, held_out: bool = False) -> RecordDict:
    """A node's answer to the partition query: who it is, how much it holds (never its data), and whether
    it is held out of the global phase (data.unseen_clients)."""
    config = {"client_id": info.client_id, "num_train": info.num_train, "partition_id": partition_id}
    config |= {"num_partitions": num_partitions, "group": _dump(info.true_group), "held_out": held_out}
    return RecordDict({REPLY: ConfigRecord(config)})


def content_to_info(content: RecordDict) -> tuple[ClientInfo, int, int]:
    """(client info, partition id, number of partitions)."""
    c = content.config_records[REPLY]
    info = ClientInfo(str(c["client_id"]), int(c["num_train"]), json.loads(str(c["group"])))
    return info, int(c["partition_id"]), int(c["num_partitions"])


def content_held_out(content: RecordDict) -> bool:
    """Whether the answering node's client is held out of the global phase (an unseen client)."""
    return bool(content.config_records[REPLY].get("held_out", False))


def memory_to_record(memory: dict[str, Any]) -> ConfigRecord:
    """A client's private memory (kept in the node's Context.state across messages; never sent)."""
    return ConfigRecord({"json": json.dumps(memory)})


def record_to_memory(record: ConfigRecord) -> dict[str, Any]:
    return json.loads(str(record["json"]))


# A SecAgg+ stage speaks Flower's legacy FitIns / FitRes, as SecAggPlusWorkflow and secaggplus_mod do: the task goes
# as bytes in the FitIns config; the reply's state as the FitRes parameters (masked by the mod before it leaves
# the node), its weight as num_examples and the rest of the reply as bytes in the FitRes metrics.


def task_to_fitins(task: Task, key: TaskKey) -> FitIns:
    """A secure stage's task as the FitIns SecAggPlusWorkflow sends to its node."""
    return FitIns(
        Parameters(tensors=[], tensor_type="numpy.ndarray"), {TASK: content_to_bytes(task_to_content(task, key))}
    )


def is_fitins(content: RecordDict) -> bool:
    """Whether a train message comes from a SecAgg+ stage (a FitIns), not as a plain task."""
    return FITINS_CONFIG in content.config_records


def fitins_content_to_task(content: RecordDict) -> tuple[Task, TaskKey]:
    return content_to_task(content_from_bytes(bytes(content.config_records[FITINS_CONFIG][TASK])))


def reply_to_fitres_content(reply: Reply, index: int, weight: int) -> RecordDict:
    """A trained reply as the FitRes secaggplus_mod masks: the state's arrays in key order, the weight as
    num_examples, the reply without its state (and the state's keys) as bytes in the metrics."""
    assert reply.state is not None, "a secure stage's reply carries a trained state"
    keys = list(reply.state)
    arrays = [reply.state[k].detach().cpu().numpy() for k in keys]
    rest = content_to_bytes(reply_to_content(replace(reply, state=None), index))
    fitres = FitRes(
        Status(Code.OK, ""), ndarrays_to_parameters(arrays), int(weight), {REPLY: rest, STATE_KEYS: json.dumps(keys)}
    )
    return compat.fitres_to_recorddict(fitres, keep_input=False)


def fitres_to_reply(fitres: FitRes) -> tuple[Reply, int, list[str]]:
    """(the reply without its state, the index of its task, the keys of the state's arrays)."""
    reply, index = content_to_reply(content_from_bytes(bytes(fitres.metrics[REPLY])))
    return reply, index, json.loads(str(fitres.metrics[STATE_KEYS]))


def arrays_to_state(arrays: list[np.ndarray], keys: list[str], like: State) -> State:
    """Aggregated arrays back into a state keyed and typed like `like` (the model the tasks carried)."""
    return {k: torch.from_numpy(np.asarray(a)).to(like[k].dtype).reshape(like[k].shape) for k, a in zip(keys, arrays)}
