"""The Flower ClientApp: a node builds its own client (its partition's data, the model) and answers with handle_task."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from torch import nn

from fedpref.client.personalize import personalize
from fedpref.client.trainer import LocalTrainer
from fedpref.client.worker import EncodedClient, handle_task, task_generator
from fedpref.config import ExperimentConfig
from fedpref.data.splits import split_clients
from fedpref.engines.flower import messages as m
from fedpref.engines.flower.appconfig import experiment_config
from fedpref.experiments.runner import optim_configs
from fedpref.experiments.setup import load_pairs, pick_unseen
from fedpref.models.factory import build_reward_model
from fedpref.protocol import ClientInfo

ConfigSource = Callable[[Context], ExperimentConfig]


@dataclass
class Node:
    """What one node holds: its own client's encoded data, and trainers over the shared frozen model."""

    client: EncodedClient
    info: ClientInfo
    held_out: bool  # an unseen client: evaluated, never trained (data.unseen_clients)
    trainer: LocalTrainer
    personal: LocalTrainer
    seed: int
    steps: list[int]


# Per process: a simulation worker serves many partitions and keeps them; a deployed node starts afresh.
_MODELS: dict[str, nn.Module] = {}
_NODES: dict[tuple[str, int], Node] = {}


def partition_of(context: Context) -> tuple[int, int]:
    """(partition id, number of partitions) from the node config (set by the simulation or --node-config)."""
    config = context.node_config
    if "partition-id" not in config or "num-partitions" not in config:
        raise ValueError("this node needs --node-config 'partition-id=<i> num-partitions=<N>'")
    return int(config["partition-id"]), int(config["num-partitions"])


def node_for(cfg: ExperimentConfig, partition_id: int, num_partitions: int) -> Node:
    key = (cfg.digest(), partition_id)
    if key not in _NODES:
        _NODES[key] = build_node(cfg, partition_id, num_partitions)
    return _NODES[key]


def build_node(cfg: ExperimentConfig, partition_id: int, num_partitions: int) -> Node:
    """Load the data, keep only this partition's client (index into the split order) and encode it."""
    splits = split_clients(load_pairs(cfg), cfg.data.val_pairs, cfg.data.test_pairs, cfg.seed)
    if num_partitions != len(splits) or not 0 <= partition_id < len(splits):
        raise ValueError(f"partition {partition_id} of {num_partitions}, but the config makes {len(splits)} clients")
    s = splits[partition_id]
    if cfg.digest() not in _MODELS:
        _MODELS[cfg.digest()] = build_reward_model(cfg)
    model = _MODELS[cfg.digest()]
    client = EncodedClient(s.client_id, s.group, model.encode(s.train), model.encode(s.val), model.encode(s.test))
    train_opt, pers_opt = optim_configs(cfg)
    info = ClientInfo(s.client_id, len(s.train), s.group)
    trainers = LocalTrainer(model, train_opt), LocalTrainer(model, pers_opt)
    unseen = pick_unseen(splits, cfg.data.unseen_clients, cfg.seed) if cfg.data.unseen_clients else []
    return Node(client, info, s.client_id in unseen, *trainers, cfg.seed, cfg.personalization.steps)


def answer_partition(msg: Message, cfg: ExperimentConfig, context: Context) -> Message:
    if m.query_digest(msg.content) != cfg.digest():
        raise ValueError(f"config mismatch: server {m.query_digest(msg.content)}, this node {cfg.digest()}")
    partition_id, num_partitions = partition_of(context)
    node = node_for(cfg, partition_id, num_partitions)
    return Message(m.info_to_content(node.info, partition_id, num_partitions, node.held_out), reply_to=msg)


def answer_task(msg: Message, node: Node, context: Context) -> Message:
    """Carry out a task with the same seeded generator as the in-process engine (and the client's own memory)."""
    task, key = m.content_to_task(msg.content)
    if task.client_id != node.client.client_id or m.message_type(task.action) != msg.metadata.message_type:
        raise ValueError(f"task {task.action} for {task.client_id} reached {node.client.client_id}")
    generator = task_generator(node.seed, key.method, key.round, key.stage, task.client_id, key.index)
    restore_memory(node.client, context, key.method)
    reply = handle_task(task, node.client, node.trainer, generator)
    keep_memory(node.client, context, key.method)
    return Message(m.reply_to_content(reply, key.index), reply_to=msg)


def restore_memory(client: EncodedClient, context: Context, method: str) -> None:
    """The client's private memory lives in the node's Context.state, which Flower keeps across messages
    (a simulation worker may serve several partitions; a deployed node starts a fresh process per message).
    Each method has its own, as each in-process method run starts with empty memories."""
    if hasattr(client, "memory"):
        record = context.state.config_records.get(f"{m.MEMORY}.{method}")
        client.memory = m.record_to_memory(record) if record is not None else {}


def keep_memory(client: EncodedClient, context: Context, method: str) -> None:
    if getattr(client, "memory", None):
        context.state[f"{m.MEMORY}.{method}"] = m.memory_to_record(client.memory)


def answer_personalize(msg: Message, node: Node) -> Message:
    """The client's local phase: fine-tune the given initialization alone; report test accuracy per checkpoint."""
    client_id, method, init = m.content_to_personalize(msg.content)
    if client_id != node.client.client_id:
        raise ValueError(f"personalization for {client_id} reached {node.client.client_id}")
    generator = task_generator(node.seed, method, "personalize", client_id)
    c = node.client
    accuracies = personalize(node.personal, init, c.train, c.test, node.steps, generator)
    return Message(m.curve_to_content(client_id, accuracies), reply_to=msg)


def make_client_app(source: ConfigSource) -> ClientApp:
    """A ClientApp whose experiment config comes from `source` (the run config, or a fixed config)."""
    app = ClientApp()

    def node(context: Context) -> Node:
        return node_for(source(context), *partition_of(context))

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        return answer_task(msg, node(context), context)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        return answer_task(msg, node(context), context)

    @app.query("partition")
    def partition(msg: Message, context: Context) -> Message:
        return answer_partition(msg, source(context), context)

    @app.query("personalize")
    def personalize_(msg: Message, context: Context) -> Message:
        return answer_personalize(msg, node(context))

    return app


def fixed_config(cfg: ExperimentConfig) -> ConfigSource:
    return lambda context: cfg


app = make_client_app(lambda context: experiment_config(context.run_config))
