"""The Flower ClientApp: a node builds its own client (its partition's data, the model) and answers each task."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_STATE
from torch import nn

from fedpref.client.trainer import LocalTrainer, optim_configs
from fedpref.client.worker import EncodedClient, Trainers, answer
from fedpref.config import ExperimentConfig
from fedpref.data.load import load_pairs
from fedpref.data.splits import ClientSplits, pick_unseen, split_clients
from fedpref.engines.flower import messages as m
from fedpref.engines.flower.appconfig import experiment_config
from fedpref.engines.flower.mods import secure_when_asked
from fedpref.models.factory import build_reward_model
from fedpref.protocol import AFTER_THE_ROUNDS, RESTORE_MEMORY, SECURE_WEIGHT, ClientInfo, Reply, State, Task, TaskKey

ConfigSource = Callable[[Context], ExperimentConfig]
LOCAL_SOURCES = ("jsonl", "pairwise_jsonl")  # formats a node's own file may have (split-clients keeps the rows)


@dataclass
class Node:
    """What one node holds: its own client's encoded data, and trainers over the shared frozen model."""

    client: EncodedClient
    info: ClientInfo
    held_out: bool  # an unseen client: evaluated, never trained (data.unseen_clients)
    trainers: Trainers


# Per process: a simulation worker serves many partitions and keeps them; a deployed node starts afresh.
_MODELS: dict[str, nn.Module] = {}
_NODES: dict[tuple[str, int], Node] = {}


LOCAL = -1  # the partition id a node with its own data file reports: it is no slice of a pooled file


def partition_of(context: Context) -> tuple[int, int]:
    """(partition id, number of partitions) from the node config (set by the simulation or --node-config)."""
    config = context.node_config
    if "partition-id" not in config or "num-partitions" not in config:
        raise ValueError(
            "this node needs --node-config 'data-path=\"<its own file>\"' or 'partition-id=<i> num-partitions=<N>'"
        )
    return int(config["partition-id"]), int(config["num-partitions"])


def node_for(cfg: ExperimentConfig, context: Context) -> Node:
    """This node's client, built once per process: from its own file (`data-path`) or its partition."""
    own = context.node_config.get("data-path")
    where = ("file", str(own)) if own else ("partition", *partition_of(context))
    key = (cfg.digest(), where)
    if key not in _NODES:
        if own:
            _NODES[key] = build_local_node(cfg, Path(str(own)).expanduser(), bool(context.node_config.get("held-out")))
        else:
            _NODES[key] = build_node(cfg, *partition_of(context))
    return _NODES[key]


def build_node(cfg: ExperimentConfig, partition_id: int, num_partitions: int) -> Node:
    """Load the pooled data, keep only this partition's client (index into the split order) and encode it."""
    splits = split_clients(load_pairs(cfg), cfg.data.val_pairs, cfg.data.test_pairs, cfg.seed)
    if num_partitions != len(splits) or not 0 <= partition_id < len(splits):
        raise ValueError(f"partition {partition_id} of {num_partitions}, but the config makes {len(splits)} clients")
    unseen = pick_unseen(splits, cfg.data.unseen_clients, cfg.seed) if cfg.data.unseen_clients else []
    return encoded_node(cfg, splits[partition_id], splits[partition_id].client_id in unseen)


def build_local_node(cfg: ExperimentConfig, path: Path, held_out: bool = False) -> Node:
    """A node of a real federation: it reads only its own file (the config's format and keys, this path),
    which must hold one client's pairs, and splits them with the same seeded rule as a pooled run."""
    if cfg.data.source not in LOCAL_SOURCES:
        raise ValueError(f"a node's own file needs data.source in {LOCAL_SOURCES}, not '{cfg.data.source}'")
    pairs = load_pairs(replace(cfg, data=replace(cfg.data, path=str(path))))
    users = sorted({p.client for p in pairs})
    if len(users) != 1:
        raise ValueError(
            f"{path}: a node holds one client's pairs, found {len(users)} users ({', '.join(users[:5])}); "
            "split a pooled file with `fedpref data split-clients`"
        )
    (own,) = split_clients(pairs, cfg.data.val_pairs, cfg.data.test_pairs, cfg.seed)
    return encoded_node(cfg, own, held_out)


def encoded_node(cfg: ExperimentConfig, s: ClientSplits, held_out: bool) -> Node:
    """The node's client encoded by the (per-process) shared frozen model, and its trainers."""
    if cfg.digest() not in _MODELS:
        _MODELS[cfg.digest()] = build_reward_model(cfg)
    model = _MODELS[cfg.digest()]
    client = EncodedClient(s.client_id, s.group, model.encode(s.train), model.encode(s.val), model.encode(s.test))
    train_opt, pers_opt = optim_configs(cfg)
    trainers = Trainers(LocalTrainer(model, train_opt), LocalTrainer(model, pers_opt), cfg.seed)
    return Node(client, ClientInfo(s.client_id, len(s.train), s.group), held_out, trainers)


def answer_partition(content: RecordDict, cfg: ExperimentConfig, context: Context) -> RecordDict:
    """Who this node's client is and how much it holds (never its data); LOCAL when it has its own file."""
    if m.query_digest(content) != cfg.digest():
        raise ValueError(f"config mismatch: server {m.query_digest(content)}, this node {cfg.digest()}")
    node = node_for(cfg, context)
    partition = (LOCAL, 0) if context.node_config.get("data-path") else partition_of(context)
    return m.info_to_content(node.info, *partition, node.held_out)


def answer_task(
    content: RecordDict, message_type: str, node: Node, context: Context, memory_dir: Path | None
) -> RecordDict:
    """Carry out a task as the in-process engine does (same seeded generator), with the client's own memory."""
    secure = m.is_fitins(content)  # a SecAgg+ stage: secaggplus_mod masks the reply's state on its way out
    task, key = m.fitins_content_to_task(content) if secure else m.content_to_task(content)
    if task.client_id != node.client.client_id or m.message_type(task.action) != message_type:
        raise ValueError(f"task {task.action} for {task.client_id} reached {node.client.client_id}")
    if task.action == RESTORE_MEMORY:
        reply = restore_snapshot(node.client, task, key, context, memory_dir)
    else:
        restore_memory(node.client, context, key, memory_dir)
        reply = answer(task, key, node.client, node.trainers)
        keep_memory(node.client, context, key, memory_dir)
    if secure:
        check_clipping_range(reply.state, context)
        return m.reply_to_fitres_content(reply, key.index, task.payload[SECURE_WEIGHT])
    return m.reply_to_content(reply, key.index)


def check_clipping_range(state: State | None, context: Context) -> None:
    """SecAgg+ clips each weighted value to [-r, r] before quantizing it; a larger value would corrupt the sum
    silently, so the node refuses (its weight is at most 1 after Flower scales it by the largest weight)."""
    r = float(context.state.config_records[RECORD_KEY_STATE]["clipping_range"])
    largest = max((float(v.abs().max()) for v in (state or {}).values() if v.numel()), default=0.0)
    if largest > r:
        raise ValueError(f"a trained value of {largest:.3g} exceeds secure_aggregation.clipping_range = {r}: raise it")


def restore_memory(client: EncodedClient, context: Context, key: TaskKey, memory_dir: Path | None) -> None:
    """The client's private memory lives in the node's Context.state, which Flower keeps across messages
    (a simulation worker may serve several partitions; a deployed node starts a fresh process per message).
    Each method has its own, as each in-process method run starts with empty memories. A Context.state without
    it while the node's disk holds a snapshot from an earlier round means the SuperNode restarted on the same
    node id (with SuperNode authentication, the server sees no new node to ask): the newest such snapshot."""
    record = context.state.config_records.get(f"{m.MEMORY}.{key.method}")
    if record is not None:
        client.memory = m.record_to_memory(record)
        return
    before = key.round if isinstance(key.round, int) else AFTER_THE_ROUNDS
    client.memory = latest_snapshot(memory_dir, client.client_id, key.method, before) or {}


def keep_memory(client: EncodedClient, context: Context, key: TaskKey, memory_dir: Path | None) -> None:
    """Back into Context.state; with a memory folder also a snapshot per round on the node's own disk, from
    which a resumed run restores it (Context.state does not outlive the run)."""
    if not client.memory:
        return
    context.state[f"{m.MEMORY}.{key.method}"] = m.memory_to_record(client.memory)
    if memory_dir is not None and isinstance(key.round, int):
        path = snapshot_path(memory_dir, client.client_id, key.method, key.round)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(client.memory), encoding="utf-8")
        tmp.replace(path)


def snapshot_path(memory_dir: Path, client_id: str, method: str, round_idx: int) -> Path:
    return memory_dir / client_id / method / f"round-{round_idx:06d}.json"


def restore_snapshot(
    client: EncodedClient, task: Task, key: TaskKey, context: Context, memory_dir: Path | None
) -> Reply:
    """Resuming before round `before_round`: the memory of the client's last snapshot from an earlier round."""
    snapshot = latest_snapshot(memory_dir, client.client_id, key.method, int(task.payload["before_round"]))
    client.memory = snapshot or {}
    context.state[f"{m.MEMORY}.{key.method}"] = m.memory_to_record(client.memory)
    return Reply(client.client_id, len(client.train), metrics={"restored": snapshot is not None})


def latest_snapshot(memory_dir: Path | None, client_id: str, method: str, before: int) -> dict | None:
    """The memory of the client's newest snapshot from a round before `before` (None: there is none)."""
    if memory_dir is None:
        return None
    folder = memory_dir / client_id / method
    earlier = sorted(p for p in folder.glob("round-*.json") if int(p.stem[len("round-") :]) < before)
    return json.loads(earlier[-1].read_text(encoding="utf-8")) if earlier else None


def make_client_app(source: ConfigSource, memory_dir: Path | None = None) -> ClientApp:
    """A ClientApp whose experiment config comes from `source` (the run config, or a fixed config); private
    memory snapshots go to `memory_dir` (else the node config's `memory-dir`, if set)."""
    app = ClientApp()

    def handle(msg: Message, context: Context) -> Message:
        content = answer_message(msg.content, msg.metadata.message_type, source, context, memory_dir)
        return Message(content, reply_to=msg)

    for register in (app.train(mods=[secure_when_asked]), *other_handlers(app)):
        register(handle)
    return app


def other_handlers(app: ClientApp) -> tuple:
    """Every message type a node answers besides train: evaluation, the local phase, memory restores, the query."""
    return app.evaluate(), app.query("personalize"), app.query("restore_memory"), app.query("partition")


def answer_message(
    content: RecordDict, message_type: str, source: ConfigSource, context: Context, memory_dir: Path | None = None
) -> RecordDict:
    """The reply content to any message a node gets: the partition query, or a task for its client; private
    memory snapshots go to `memory_dir` (else the node config's `memory-dir`, if set)."""
    cfg = source(context)
    if message_type == "query.partition":
        return answer_partition(content, cfg, context)
    configured = context.node_config.get("memory-dir")
    snapshots = memory_dir or (Path(str(configured)).expanduser() if configured else None)
    return answer_task(content, message_type, node_for(cfg, context), context, snapshots)


def fixed_config(cfg: ExperimentConfig) -> ConfigSource:
    return lambda context: cfg


def run_config_source(context: Context) -> ExperimentConfig:
    """The experiment config a deployed node runs: the one the run config names."""
    return experiment_config(context.run_config)


app = make_client_app(run_config_source)
