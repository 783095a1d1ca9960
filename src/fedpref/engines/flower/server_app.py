"""The Flower ServerApp: the in-process engine's round loop, carried to SuperNodes as Messages over a Grid."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from flwr.app import Context, Message
from flwr.serverapp import Grid, ServerApp

from fedpref.algorithms.base import Algorithm
from fedpref.algorithms.centralized import Centralized
from fedpref.config import ExperimentConfig
from fedpref.engines.flower import messages as m
from fedpref.engines.flower.appconfig import ServerSettings, experiment_config, server_settings
from fedpref.engines.guards import split_finite
from fedpref.engines.inprocess import check_server_finite, round_record
from fedpref.experiments import outputs
from fedpref.experiments.methods import build_algorithm
from fedpref.experiments.runner import add_partition_ari, summarize_curves
from fedpref.models.adapters import trainable_state
from fedpref.models.factory import build_reward_model
from fedpref.protocol import ClientInfo, Reply, Task

LOG = logging.getLogger("flwr").getChild("fedpref")
POLL_S = 0.1
RoundCallback = Callable[[dict], None]


@dataclass
class Peers:
    """The clients found on the grid, in partition order (= the in-process client order), and their nodes."""

    infos: list[ClientInfo]
    node_of: dict[str, int]
    held_out: list[str] = field(default_factory=list)  # unseen clients: never trained, still evaluated

    def trained(self) -> list[ClientInfo]:
        return [info for info in self.infos if info.client_id not in self.held_out]


def exchange(grid: Grid, messages: list[Message], timeout_s: float) -> list[Message | None]:
    """Push the messages, pull replies until all are in or `timeout_s` passes; None where none came back."""
    ids = list(grid.push_messages(messages))
    pending = {mid: i for i, mid in enumerate(ids) if mid}
    replies: list[Message | None] = [None] * len(messages)
    deadline = time.monotonic() + timeout_s
    while pending:
        for reply in grid.pull_messages(list(pending)):
            if (i := pending.pop(reply.metadata.reply_to_message_id, None)) is not None:
                replies[i] = reply
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    return replies


def usable(reply: Message | None, what: str) -> bool:
    """A reply counts unless it is missing (timeout) or an error; both are logged and the run goes on."""
    if reply is None:
        LOG.warning("fedpref: no reply in time for %s; left out", what)
        return False
    if reply.has_error():
        LOG.warning("fedpref: %s failed on node %s: %s", what, reply.metadata.src_node_id, reply.error.reason)
        return False
    return True


def discover(grid: Grid, config_digest: str, wait_s: float, timeout_s: float) -> Peers:
    """Ask each connected node once for its partition; wait until every partition has answered."""
    found: dict[int, tuple[ClientInfo, int, bool]] = {}
    asked: set[int] = set()
    expected, deadline = None, time.monotonic() + wait_s
    while expected is None or len(found) < expected:
        new = sorted(set(grid.get_node_ids()) - asked)
        if not new and time.monotonic() >= deadline:
            raise RuntimeError(f"only partitions {sorted(found)} of {expected or '?'} answered within {wait_s} s")
        if not new:
            time.sleep(1.0)
            continue
        asked.update(new)
        msgs = [Message(m.partition_query(config_digest), n, "query.partition", group_id="discover") for n in new]
        for node, reply in zip(new, exchange(grid, msgs, timeout_s)):
            if usable(reply, f"the partition query to node {node}"):  # a node that fails it is not asked again
                info, partition, expected = m.content_to_info(reply.content)
                if partition in found:
                    raise RuntimeError(f"two nodes claim partition {partition}")
                found[partition] = (info, node, m.content_held_out(reply.content))
    ordered = [found[p] for p in sorted(found)]
    held_out = [info.client_id for info, _, held in ordered if held]
    return Peers([info for info, _, _ in ordered], {info.client_id: node for info, node, _ in ordered}, held_out)


def run_stage(grid: Grid, peers: Peers, tasks: list[Task], key: m.TaskKey, timeout_s: float) -> list[Reply]:
    """One message per task (to the task's client's node); the replies that came back, in task order."""
    group = f"{key.method}/{key.round}/{key.stage}"
    msgs = [
        Message(
            m.task_to_content(t, m.TaskKey(key.method, key.round, key.stage, i)),
            peers.node_of[t.client_id],
            m.message_type(t.action),
            group_id=group,
        )
        for i, t in enumerate(tasks)
    ]
    replies = []
    for i, (task, msg) in enumerate(zip(tasks, exchange(grid, msgs, timeout_s))):
        if usable(msg, f"{task.action} task {i} of {group} ({task.client_id})"):
            reply, index = m.content_to_reply(msg.content)
            if index == i and reply.client_id == task.client_id:
                replies.append(reply)
            else:
                LOG.warning(
                    "fedpref: %s answered task %d (%s) of %s; left out", task.client_id, index, reply.client_id, group
                )
    return replies


def run_rounds_over_grid(
    grid: Grid, algorithm: Algorithm, peers: Peers, timeout_s: float, on_round: RoundCallback | None = None
) -> list[dict]:
    """The in-process engine's loop (rounds 0..R-1, then the final stage R), each stage one message exchange.

    `dropped` names the clients left out of a stage: no reply in time, an error reply, or a non-finite update.
    """
    log = []
    for r in range(algorithm.num_rounds + 1):
        start, stages, losses, dropped = time.perf_counter(), 0, [], []
        while tasks := algorithm.next_tasks(r):
            replies = run_stage(grid, peers, tasks, m.TaskKey(algorithm.name, r, stages, 0), timeout_s)
            answered = {x.client_id for x in replies}
            replies, bad = split_finite(replies)
            dropped += [t.client_id for t in tasks if t.client_id not in answered] + bad
            losses += [x.metrics["train_loss"] for x in replies if "train_loss" in x.metrics]
            algorithm.receive(r, replies)
            check_server_finite(algorithm, r, [x.client_id for x in replies])
            stages += 1
        if stages == 0 and r == algorithm.num_rounds:
            break
        log.append(round_record(algorithm, r, stages, losses, dropped, time.perf_counter() - start))
        if on_round:
            on_round(log[-1])
    return log


def personalize_over_grid(
    grid: Grid, algorithm: Algorithm, peers: Peers, cfg: ExperimentConfig, timeout_s: float
) -> dict:
    """Each client's local phase, run on its own node from `algorithm.initialization`; summarized as in-process."""
    ids = [c.client_id for c in peers.infos]
    group = f"{algorithm.name}/personalize"
    msgs = [
        Message(
            m.personalize_to_content(c, algorithm.name, algorithm.initialization(c)),
            peers.node_of[c],
            "query.personalize",
            group_id=group,
        )
        for c in ids
    ]
    per_client = {}
    for cid, reply in zip(ids, exchange(grid, msgs, timeout_s)):
        if usable(reply, f"personalization of {cid}"):
            per_client[cid] = m.content_to_curve(reply.content)[1]
    curves = summarize_curves(cfg.personalization.steps, per_client, {c.client_id: c.true_group for c in peers.infos})
    if missing := [c for c in ids if c not in per_client]:
        curves["missing"] = missing
    return curves


Sink = Callable[[str, dict, list[dict], Algorithm], None]  # (method, result, round log, final algorithm)


def serve(
    grid: Grid, cfg: ExperimentConfig, settings: ServerSettings, sink: Sink, on_round: RoundCallback | None = None
) -> None:
    """Discover the clients once, then run each method in turn; `sink` gets each method's outcome."""
    peers = discover(grid, cfg.digest(), settings.node_wait_s, settings.reply_timeout_s)
    model = build_reward_model(cfg)
    init = trainable_state(model)
    for method in settings.methods:
        algorithm = build_algorithm(method, cfg, peers.trained(), init, model, peers.held_out)
        if isinstance(algorithm, Centralized):
            raise ValueError(f"{method} pools raw data (a centralized reference); it runs only in-process")
        sink(method, *serve_method(grid, cfg, algorithm, peers, settings.reply_timeout_s, on_round))


def serve_method(
    grid: Grid,
    cfg: ExperimentConfig,
    algorithm: Algorithm,
    peers: Peers,
    timeout_s: float,
    on_round: RoundCallback | None,
) -> tuple[dict, list[dict], Algorithm]:
    """One method over the grid: the rounds, then every client's personalization on its own node."""
    start = time.perf_counter()
    log = run_rounds_over_grid(grid, algorithm, peers, timeout_s, on_round)
    global_s = time.perf_counter() - start
    curves = personalize_over_grid(grid, algorithm, peers, cfg, timeout_s)
    result = {
        "personalization": curves,
        "diagnostics": {},
        "assignments": [h for h in algorithm.history if "assignment" in h],
        "timing": {"wall_s": round(time.perf_counter() - start, 2), "global_s": round(global_s, 2)},
        "engine": "flower",
    }
    add_partition_ari(result, peers.infos)
    return result, log, algorithm


def make_server_app(
    cfg: ExperimentConfig, settings: ServerSettings, sink: Sink, on_round: RoundCallback | None = None
) -> ServerApp:
    """A ServerApp for a config held in memory (the Simulation Engine)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        serve(grid, cfg, settings, sink, on_round)

    return app


def json_lines(path: Path) -> RoundCallback:
    """A round callback appending one JSON line per round (as the in-process run's rounds.jsonl)."""
    path.write_text("", encoding="utf-8")

    def append(record: dict) -> None:
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    return append


def main_from_run_config(grid: Grid, context: Context) -> None:
    """Deployment: config and method from the run config; results into `out-dir` (if set) and the log."""
    cfg, settings = experiment_config(context.run_config), server_settings(context.run_config)
    out = Path(settings.out_dir).expanduser() if settings.out_dir else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
        outputs.write_config(cfg, out)
    on_round = json_lines(out / "rounds.jsonl") if out else (lambda record: LOG.info("fedpref: %s", record))
    summary = {"engine": "flower", "config_hash": cfg.digest(), "seed": cfg.seed, "methods": {}}

    def sink(method: str, result: dict, log: list[dict], algorithm: Algorithm) -> None:
        LOG.info("fedpref: %s acc_mean %s", method, result["personalization"]["acc_mean"])
        summary["methods"][method] = result
        if out:
            outputs.write_json(summary, out / "results.json")

    serve(grid, cfg, settings, sink, on_round)


app = ServerApp()
app.main()(main_from_run_config)
