"""`fedpref estimate`: a run's wall time, predicted from a dry run of its methods and a few timed real tasks.

Each method's round loop runs against a transport that answers every task with a stand-in reply and records
the task's work (local steps, pairs evaluated). The first few tasks of each kind also run for real on their
clients (shortened to a few steps) and are timed: that gives the kind's seconds per task, per step and per
evaluated pair (`Prober`). The prediction is the sum over tasks of

    seconds = per_task + per_step * steps + per_pair * pairs

plus the measured set-up and the server's own work (the dry run's time outside the real tasks). Only counts
come from the algorithms, so whatever they do (phases, warm-ups, reassignment checks, evaluation every
few rounds) is counted as it will run.

Beside the time: the bytes down and up a round, counted as the transports count them (fedpref.engines.traffic)
on the dry run's tasks and on its replies (a stand-in reply carries a real reply's metrics and, for a trained
state, the task's model: the same tensors a real one sends back); and the peak memory of the timed real tasks,
as their clients measure it in a run (fedpref.client.cost: CUDA's most allocated on a GPU, else the process's
peak resident set size, which includes the set-up). All of
it holds for this machine only, which the output names.
"""

from __future__ import annotations

import platform
import statistics
import time
from collections import ChainMap, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from fedpref.algorithms.aggregation import clear_aggregate
from fedpref.algorithms.centralized import Centralized
from fedpref.algorithms.registry import build_algorithm
from fedpref.client.cost import CPU_MAX_RSS, CUDA_MAX_ALLOCATED
from fedpref.client.worker import EncodedClient, Trainers, answer
from fedpref.config import ExperimentConfig
from fedpref.engines.loop import communication, finish_method, run_rounds, task_keys
from fedpref.engines.traffic import Traffic
from fedpref.experiments.runner import every_client, pooled_transport, trainers
from fedpref.experiments.setup import Setup, build_setup
from fedpref.protocol import COST, EVALUATE, EVALUATE_SELECTOR, PERSONALIZE, TRAIN, Aggregate, Reply, Task, TaskKey

Progress = Callable[[str], None]
MEMORY_KINDS = {CUDA_MAX_ALLOCATED: "CUDA max allocated", CPU_MAX_RSS: "process peak RSS"}  # what a peak means


@dataclass(frozen=True)
class Work:
    """What one task costs its client: `steps` local steps and `pairs` pair evaluations, of kind `kind`."""

    kind: str
    steps: int
    pairs: int


@dataclass
class UnitCost:
    """Seconds of one kind of task: fixed, per local step and per evaluated pair (timed on this machine)."""

    per_task: float = 0.0
    per_step: float = 0.0
    per_pair: float = 0.0

    def seconds(self, work: Work) -> float:
        return self.per_task + self.per_step * work.steps + self.per_pair * work.pairs


def predict_seconds(works: list[Work], costs: Mapping[str, UnitCost]) -> float:
    """The time the clients spend on `works` (one after another, as in-process runs them)."""
    return sum(costs[w.kind].seconds(w) for w in works)


def work_kind(method: str, action: str) -> str:
    """Plain training, evaluation and personalization cost the same in every method; a variational step or a
    selector evaluation depends on the method's own model (FedVPL, FedVPA-GP and its ablations)."""
    return action if action in (TRAIN, EVALUATE, PERSONALIZE) else f"{method}/{action}"


def work_of(task: Task, key: TaskKey, client: EncodedClient) -> Work:
    """The work `task` asks of `client`: its steps and the pairs it evaluates."""
    if task.action == EVALUATE:
        pairs = len(task.models) * len(client.val)
    elif task.action == PERSONALIZE:
        pairs = len(task.payload["checkpoints"]) * len(client.test)
    elif task.action == EVALUATE_SELECTOR:
        pairs = len(client.train) + len(client.test)  # z from the training pairs, accuracy on the test pairs
    else:
        pairs = 0
    return Work(work_kind(key.method, task.action), task.steps, pairs)


class Prober:
    """Times real tasks of each kind on their clients, and answers every task with a stand-in reply.

    A training kind (its tasks have local steps) runs its first `probe_tasks` + 1 tasks for real, each shortened
    to at most `probe_steps` steps; the first warms up, the others give the seconds per step (a task's fixed
    cost spread over its steps, as in the run). Evaluation and personalization are timed on their first task.
    """

    def __init__(self, trainers: Trainers, probe_steps: int = 8, probe_tasks: int = 3):
        self.trainers, self.probe_steps, self.probe_tasks = trainers, probe_steps, probe_tasks
        self.costs: dict[str, UnitCost] = {}
        self.samples: dict[str, list[tuple[float, int]]] = defaultdict(list)  # (seconds, steps) of real tasks
        self.templates: dict[tuple, Reply] = {}  # a real reply per (kind, number of models), reused as stand-in
        self.seconds = 0.0  # time spent in real tasks (not part of the server's own work)
        self.peak_bytes: dict[str, int] = {}  # kind of task -> the most memory its real tasks reached
        self.memory_kind = ""  # the peak's kind, as the clients' cost names it (MEMORY_KINDS)
        self.device = next(trainers.train.model.parameters()).device

    def reply(self, task: Task, key: TaskKey, client: EncodedClient, kind: str) -> Reply:
        """A stand-in reply to `task`, after running it (or a shorter copy) for real if its kind needs timing."""
        if task.action == PERSONALIZE:  # accuracies at each checkpoint; the probe ran other checkpoints
            if kind not in self.costs:
                self.costs[kind] = self._probe_personalization(task, key, client)
            accuracies = [50.0] * len(task.payload["checkpoints"])
            return Reply(client.client_id, len(client.train), metrics={"acc": accuracies}, tag=task.tag)
        template_key = (kind, len(task.models))
        if task.steps > 0 and len(self.samples[kind]) <= self.probe_tasks:
            self.templates[template_key] = self._sample(task, key, client, kind)
        elif kind not in self.costs:
            self.costs[kind] = self._probe_evaluation(task, key, client)
        if template_key not in self.templates:
            self.templates[template_key] = self._run(task, key, client)[1]
        template = self.templates[template_key]
        state = task.models[0] if template.state is not None else None  # a stand-in update changes nothing
        return replace(template, client_id=client.client_id, num_examples=len(client.train), state=state, tag=task.tag)

    def _run(self, task: Task, key: TaskKey, client: EncodedClient) -> tuple[float, Reply]:
        start = time.perf_counter()
        reply = answer(task, key, client, self.trainers)
        seconds = time.perf_counter() - start
        self.seconds += seconds
        cost = reply.metrics.get(COST, {})  # the client's own measurement of its task
        if "peak_memory_bytes" in cost:
            kind = work_kind(key.method, task.action)
            self.peak_bytes[kind] = max(cost["peak_memory_bytes"], self.peak_bytes.get(kind, 0))
            self.memory_kind = cost["peak_memory_kind"]
        return seconds, reply

    def _sample(self, task: Task, key: TaskKey, client: EncodedClient, kind: str) -> Reply:
        """Run a training task for real (at most `probe_steps` steps); seconds per step from the samples so far
        after the first (a warm-up, unless it is the only one)."""
        steps = min(task.steps, self.probe_steps)
        seconds, reply = self._run(replace(task, steps=steps), key, client)
        self.samples[kind].append((seconds, steps))
        timed = self.samples[kind][1:] or self.samples[kind]
        self.costs[kind] = UnitCost(per_step=sum(t for t, _ in timed) / sum(n for _, n in timed))
        return reply

    def _probe_evaluation(self, task: Task, key: TaskKey, client: EncodedClient) -> UnitCost:
        self._run(task, key, client)  # warm-up
        seconds = statistics.median(self._run(task, key, client)[0] for _ in range(2))
        pairs = work_of(task, key, client).pairs
        return UnitCost(per_pair=seconds / pairs) if pairs else UnitCost(per_task=seconds)

    def _probe_personalization(self, task: Task, key: TaskKey, client: EncodedClient) -> UnitCost:
        """Seconds per step and per tested pair: a test evaluation alone, then one after `probe_steps` steps."""
        k = min(task.steps, self.probe_steps) or 1
        self._run(_personalize(task, 1), key, client)  # warm-up
        evaluate_only = self._run(_personalize(task, 0), key, client)[0]
        with_steps = self._run(_personalize(task, k), key, client)[0]
        return UnitCost(per_step=max(with_steps - evaluate_only, 0.0) / k, per_pair=evaluate_only / len(client.test))


def _personalize(task: Task, steps: int) -> Task:
    """`task` (a personalization) shortened to `steps` local steps and one test evaluation at the end."""
    return replace(task, steps=steps, payload={"checkpoints": [steps]})


class DryRunTransport:
    """Answers every task with the prober's stand-in reply and records its work; no client trains."""

    def __init__(self, clients: Mapping[str, EncodedClient], prober: Prober):
        self.clients, self.prober = clients, prober
        self.works: list[Work] = []
        self.traffic = Traffic()  # the round loop takes each round's bytes into its record
        self.touched: set[str] = set()  # clients whose private memory a probe may have filled

    def exchange(self, tasks: list[Task], key: TaskKey) -> list[Reply]:
        replies = []
        for task, task_key in zip(tasks, task_keys(tasks, key)):
            client = self.clients[task.client_id]
            self.touched.add(task.client_id)
            work = work_of(task, task_key, client)
            self.works.append(work)
            replies.append(self.prober.reply(task, task_key, client, work.kind))
        self.traffic.count_tasks(tasks)
        self.traffic.count_replies(replies)
        return replies

    def aggregate(self, tasks: list[Task], key: TaskKey) -> Aggregate:
        """The same work as `exchange` (SecAgg+'s own messages are not counted), summed in the clear."""
        return clear_aggregate(tasks, self.exchange(tasks, key))

    def begin_method(self, method: str, next_round: int = 0, saved_memories: dict | None = None) -> None:
        stored = getattr(self.clients, "memories", None)  # OnDemandClients keeps memories apart from encodings
        for cid in self.touched:
            memory = stored.get(cid) if stored is not None else getattr(self.clients[cid], "memory", None)
            if memory:
                memory.clear()

    def memories(self) -> dict[str, dict]:
        return {}


# Bytes a round carries: "down" and "up" in all (the mean over the rounds), and per client sent a task
BYTES_KEYS = ("down", "up", "down_per_client", "up_per_client")


@dataclass
class DryRun:
    """What a dry run of one method found: its works by phase, the server's own seconds, its bytes a round."""

    global_works: list[Work]
    local_works: list[Work]
    server_s: float
    traffic: dict[str, float]  # BYTES_KEYS


@dataclass
class MethodEstimate:
    """One method's predicted seconds: its clients' global-phase work, personalization, the server's own work;
    its bytes a round and the peak memory of the timed tasks of its kinds (None: not measured)."""

    name: str
    global_s: float
    personalization_s: float
    server_s: float
    works: list[Work] = field(default_factory=list)
    traffic: dict[str, float] = field(default_factory=dict)  # BYTES_KEYS
    peak_memory_bytes: int | None = None

    @property
    def total_s(self) -> float:
        return self.global_s + self.personalization_s + self.server_s


def round_bytes(records: list[dict]) -> dict[str, float]:
    """The bytes of the round records (`bytes_down` / `bytes_up` by client): the mean round's in all, and the mean
    over every (round, client sent a task) as in a run's results (`communication`)."""
    counted = communication(records)
    if counted is None:
        return dict.fromkeys(BYTES_KEYS, 0.0)
    down = statistics.fmean(sum(r["down"].values()) for r in counted["rounds"])
    up = statistics.fmean(sum(r["up"].values()) for r in counted["rounds"])
    per_client = (counted["bytes_down_per_client_round"], counted["bytes_up_per_client_round"])
    return dict(zip(BYTES_KEYS, (down, up, *per_client), strict=True))


def dry_run(name: str, cfg: ExperimentConfig, setup: Setup, prober: Prober) -> DryRun:
    """Method `name`'s global-phase works, personalization and selector works, server seconds and round bytes."""
    started, probing = time.perf_counter(), prober.seconds
    infos = every_client(setup)
    trained = [c for c in infos if c.client_id not in setup.unseen]
    algorithm = build_algorithm(name, cfg, trained, setup.init_state, setup.model, list(setup.unseen))
    clients: Mapping[str, EncodedClient] = setup.clients
    if isinstance(algorithm, Centralized):  # the references train one pool of raw pairs per model
        clients = ChainMap(dict(pooled_transport(algorithm, cfg, setup).clients), setup.clients)
    transport = DryRunTransport(clients, prober)
    transport.begin_method(name)
    records = run_rounds(algorithm, transport, eval_every=cfg.federation.eval_every)
    global_works = list(transport.works)
    finish_method(algorithm, transport, infos, cfg.personalization.steps)
    local_works = transport.works[len(global_works) :]
    server_s = time.perf_counter() - started - (prober.seconds - probing)
    federated = [r for r in records if r["round"] < algorithm.num_rounds]  # not the stage after the rounds
    return DryRun(global_works, local_works, server_s, round_bytes(federated))


def machine(device: torch.device) -> str:
    """The machine the estimate was measured on: the GPU's name on CUDA, else the CPU's model name and threads."""
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA)"
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    names = [x.split(":", 1)[1].strip() for x in lines if x.startswith("model name")]
    threads = torch.get_num_threads()
    cpu = names[0] if names else platform.processor() or platform.machine()
    return f"{cpu}, {threads} thread{'' if threads == 1 else 's'}"


@dataclass
class Estimate:
    setup_s: float
    methods: list[MethodEstimate]
    costs: dict[str, UnitCost]
    notes: list[str] = field(default_factory=list)
    machine: str = ""  # where the unit costs and the peak memory were measured
    memory_kind: str = ""  # a key of MEMORY_KINDS ("" where no task measured it)

    @property
    def total_s(self) -> float:
        return self.setup_s + sum(m.total_s for m in self.methods)


def estimate_run(cfg: ExperimentConfig, progress: Progress | None = None, probe_steps: int = 8) -> Estimate:
    """Build the run's set-up (timed), dry-run every method, and price each task by the probed unit costs."""
    say = progress or (lambda _: None)
    say("preparing data and model (timed: part of the run)")
    started = time.perf_counter()
    setup = build_setup(cfg)
    setup_s = time.perf_counter() - started
    prober = Prober(trainers(cfg, setup.model), probe_steps)
    methods, notes = [], []
    for name in cfg.algorithm.methods:
        say(f"{name}: dry run (the first tasks of each kind run for real, at most {probe_steps} steps each)")
        run = dry_run(name, cfg, setup, prober)
        works = run.global_works + run.local_works
        methods.append(
            MethodEstimate(
                name,
                predict_seconds(run.global_works, prober.costs),
                predict_seconds(run.local_works, prober.costs),
                run.server_s,
                works,
                run.traffic,
                max((prober.peak_bytes[k] for k in {w.kind for w in works} if k in prober.peak_bytes), default=None),
            )
        )
    if cfg.diagnostics.enabled:
        notes.append("diagnostics are enabled: their time (Gradient Quotient, Headroom) is not in the estimate")
    return Estimate(setup_s, methods, prober.costs, notes, machine(prober.device), prober.memory_kind)


def work_summary(works: list[Work]) -> dict[str, tuple[int, int, int]]:
    """(tasks, steps, pairs) by kind."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for w in works:
        row = out[w.kind]
        row[0], row[1], row[2] = row[0] + 1, row[1] + w.steps, row[2] + w.pairs
    return {k: tuple(v) for k, v in out.items()}


def duration(seconds: float) -> str:
    """'42 s', '12 min', '3.4 h' or '2.1 days'."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def size(nbytes: float | None) -> str:
    """'512 B', '110 kB', '1.5 MB', '2.1 GB' (powers of 1000); '–' for None."""
    if nbytes is None:
        return "–"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.{1 if nbytes < 10 * scale else 0}f} {unit}"
    return f"{nbytes:.0f} B"


def estimate_tables(estimate: Estimate) -> list:
    """Rich tables: the prediction per method (and in total), its bytes a round and peak memory, then the timed
    unit costs, titled with the machine they were measured on."""
    from rich.table import Table

    total = Table(title=f"predicted wall time: {duration(estimate.total_s)} ({estimate.total_s:.0f} s, in-process)")
    for column in ("part", "global phase", "personalization", "server", "total", "client steps", "pairs evaluated"):
        total.add_column(column, justify="left" if column == "part" else "right")
    total.add_row("set-up (measured)", "", "", "", f"{estimate.setup_s:.1f} s", "", "")
    for m in estimate.methods:
        counts = work_summary(m.works).values()
        steps, pairs = sum(c[1] for c in counts), sum(c[2] for c in counts)
        seconds = (m.global_s, m.personalization_s, m.server_s, m.total_s)
        total.add_row(m.name, *(f"{s:.1f} s" for s in seconds), str(steps), str(pairs))
    memory = MEMORY_KINDS.get(estimate.memory_kind, "not measured")
    if estimate.memory_kind == CPU_MAX_RSS:
        memory += " (the whole process's high-water mark, set-up included)"
    carried = Table(
        title="predicted bytes a round and measured peak memory",
        caption="bytes as the transports count them (tensors at their dtype, 8 B a numeric metric); peak memory: "
        f"{memory}, during the timed real tasks",
    )
    for column in ("method", "down a round", "up a round", "down per client", "up per client", "peak memory"):
        carried.add_column(column, justify="left" if column == "method" else "right")
    for m in estimate.methods:
        carried.add_row(m.name, *(size(m.traffic.get(k)) for k in BYTES_KEYS), size(m.peak_memory_bytes))
    units = Table(
        title=f"timed on this machine (seconds): {estimate.machine}", caption="; ".join(estimate.notes) or None
    )
    for column in ("kind of task", "per task", "per step", "per pair"):
        units.add_column(column, justify="left" if column == "kind of task" else "right")
    for kind, c in estimate.costs.items():
        units.add_row(kind, f"{c.per_task:.4f}", f"{c.per_step:.4f}", f"{c.per_pair:.5f}")
    return [total, carried, units]


def estimate_json(estimate: Estimate) -> dict:
    return {
        "total_s": round(estimate.total_s, 1),
        "setup_s": round(estimate.setup_s, 1),
        "methods": {
            m.name: {
                "total_s": round(m.total_s, 1),
                "global_s": round(m.global_s, 1),
                "personalization_s": round(m.personalization_s, 1),
                "server_s": round(m.server_s, 1),
                "work": {k: dict(zip(("tasks", "steps", "pairs"), v)) for k, v in work_summary(m.works).items()},
                "bytes_a_round": {k: round(v, 1) for k, v in m.traffic.items()},
                "peak_memory_bytes": m.peak_memory_bytes,
            }
            for m in estimate.methods
        },
        "unit_costs": {k: vars(c) for k, c in estimate.costs.items()},
        "notes": estimate.notes,
        "measured_on": {"machine": estimate.machine, "peak_memory": estimate.memory_kind},
    }
