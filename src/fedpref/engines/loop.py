"""The one round loop of every engine: rounds, guards, checkpoints, personalization and a method's result.

An engine is a `Transport`: it carries a stage's tasks to their clients and brings back the replies that
came (in-process: by calling the client handler; Flower: as Messages over a Grid). Everything else, the
order of stages, the guards against non-finite updates, when to checkpoint, the round log, the local
phase of every client and the summary of a method, is written here once.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from fedpref.algorithms.base import Algorithm
from fedpref.engines.guards import NonFiniteModelError, nonfinite_tensors, split_finite
from fedpref.engines.traffic import reply_numbers, task_numbers
from fedpref.protocol import (
    COST,
    EVALUATE,
    PERSONALIZE,
    Aggregate,
    ClientInfo,
    Reply,
    State,
    Task,
    TaskKey,
    is_secure,
)

RoundCallback = Callable[[dict], None]
CheckpointCallback = Callable[[int], None]  # called with the next round to run when a checkpoint is due
log = logging.getLogger(__name__)
MEASURED = ("wall_s", "client_s", "server_s", "transport_s", "peak_memory_bytes", "peak_memory_kind", "eval_s")
"""The keys of a round record that measure the machine, not the run: two runs of one seed differ in them."""


class Transport(Protocol):
    """Carries tasks to clients and replies back; it never looks into either."""

    def exchange(self, tasks: list[Task], key: TaskKey) -> list[Reply]:
        """Run each task on its client (task i under `replace(key, index=i)`); the replies that came back,
        in task order. A client that failed or did not answer in time is missing from the list."""
        ...

    def aggregate(self, tasks: list[Task], key: TaskKey) -> Aggregate:
        """Run each task (as `exchange`) but bring back only the mean of the trained states weighted by each task's
        SECURE_WEIGHT, and each contributor's metrics (Flower: SecAgg+; in-process: the same mean in the clear)."""
        ...

    def begin_method(self, method: str, next_round: int = 0, saved_memories: dict[str, dict] | None = None) -> None:
        """Give each client an empty private memory for `method`; when resuming at `next_round`, the memory
        it had at the checkpoint (`saved_memories` where the checkpoint holds them, else the client's own copy)."""
        ...

    def memories(self) -> dict[str, dict]:
        """The clients' private memories a checkpoint must hold for them ({} where the clients keep their own)."""
        ...


def run_rounds(
    algorithm: Algorithm,
    transport: Transport,
    on_round: RoundCallback | None = None,
    start_round: int = 0,
    checkpoint: CheckpointCallback | None = None,
    checkpoint_every: int = 0,
    eval_every: int = 0,
) -> list[dict]:
    """Run rounds start_round..R-1 and the final stage R; returns one log record per round run.

    A client whose update or loss is non-finite, or that sent no reply, is left out of that stage's
    aggregation (and named in the record's `dropped`); a server model that becomes non-finite stops the run.
    Every `eval_every` rounds (0: never) the round's participants also evaluate `algorithm.server_models()`
    (`evaluate_server`); the record gets their mean val_loss / val_acc per model. A stage whose tasks carry
    SECURE_WEIGHT goes through `Transport.aggregate` (secure aggregation): the server sees no single reply, so a
    non-finite one shows only in the sum, which stops the run as above.

    Each record also says what the round cost (`RoundCost`): its wall time split into client compute, server
    work and transport (`client_s + server_s + transport_s == wall_s`), the peak memory the clients reported,
    and the numbers (tensor elements and numeric metrics) sent to and received from each client.
    """
    records = []
    traffic = getattr(transport, "traffic", None)  # a transport that counts its bytes (engines.traffic.Traffic)
    concurrent = bool(getattr(transport, "concurrent_clients", False))
    for r in range(start_round, algorithm.num_rounds + 1):
        if traffic is not None:
            traffic.take()  # what came before this round (a resume's memory restore) is not the round's
        start, stages, losses, dropped, participants, failures = time.perf_counter(), 0, [], [], [], []
        cost = RoundCost(concurrent)
        while tasks := algorithm.next_tasks(r):
            key = TaskKey(algorithm.name, r, stages)
            outcome = (run_secure_stage if is_secure(tasks) else run_stage)(algorithm, transport, tasks, key, cost)
            answered = outcome.used + outcome.nonfinite
            participants += [t.client_id for t in tasks if t.action != EVALUATE and t.client_id in answered]
            dropped += [t.client_id for t in tasks if t.client_id not in outcome.used]
            losses += [x["train_loss"] for x in outcome.metrics if "train_loss" in x]
            failures += [outcome.failure] if outcome.failure else []
            check_server_finite(algorithm, r, outcome.used)
            stages += 1
        if stages == 0 and r == algorithm.num_rounds:
            break
        wall_s = time.perf_counter() - start
        records.append(round_record(algorithm, r, stages, losses, dropped, wall_s) | cost.split(wall_s))
        if failures:
            records[-1]["secure_aggregation_failed"] = failures
        if eval_every > 0 and r < algorithm.num_rounds and (r + 1) % eval_every == 0:
            clients = list(dict.fromkeys(participants))
            records[-1].update(evaluate_server(algorithm, transport, r, stages, clients, cost))
        if traffic is not None:
            carried = traffic.take()
            records[-1]["bytes_down"], records[-1]["bytes_up"] = carried["down"], carried["up"]
        if cost.down:
            records[-1]["params_down"], records[-1]["params_up"] = dict(cost.down), dict(cost.up)
        if on_round:
            on_round(records[-1])
        if checkpoint and should_checkpoint(algorithm, r, checkpoint_every):
            checkpoint(r + 1)
    return records


@dataclass
class RoundCost:
    """What one round cost, gathered stage by stage.

    Time: `transport_s` counts the seconds inside the transport's calls (`exchange`, `aggregate`); of each such
    call, the client compute on its critical path is client time: the sum of the clients' `client_s` where the
    transport runs them one after another (in-process), the slowest client's where they run at once (Flower:
    `concurrent_clients`), never more than the call took. The rest of the call is transport (serializing,
    messaging, waiting); everything outside the calls (the algorithm's `next_tasks`, aggregation and the
    server's checks) is server time. Memory: the largest `peak_memory_bytes` a client reported.
    Numbers: per client, the tensor elements and numeric metric values of its tasks (down) and replies (up)."""

    concurrent: bool = False
    client_s: float = 0.0
    transport_s: float = 0.0  # the calls' seconds less their client time
    peak_memory: dict = field(default_factory=dict)  # {"peak_memory_bytes", "peak_memory_kind"} of the largest
    down: dict[str, int] = field(default_factory=dict)
    up: dict[str, int] = field(default_factory=dict)

    def stage(self, seconds: float, costs: list[dict]) -> None:
        """A transport call of `seconds` whose clients reported `costs` (their metrics[COST])."""
        compute = [float(c.get("client_s", 0.0)) for c in costs]
        critical = (max(compute) if self.concurrent else sum(compute)) if compute else 0.0
        critical = min(critical, seconds)
        self.client_s += critical
        self.transport_s += seconds - critical
        for c in costs:
            if c.get("peak_memory_bytes", -1) > self.peak_memory.get("peak_memory_bytes", -1):
                self.peak_memory = {k: c[k] for k in ("peak_memory_bytes", "peak_memory_kind") if k in c}

    def carried(self, tasks: list[Task], replies: list[Reply]) -> None:
        """The numbers of `tasks` (down) and of their `replies` (up; a client that never answers sends 0)."""
        for task in tasks:
            self.down[task.client_id] = self.down.get(task.client_id, 0) + task_numbers(task)
            self.up.setdefault(task.client_id, 0)
        for reply in replies:
            self.up[reply.client_id] += reply_numbers(reply)

    def split(self, wall_s: float) -> dict:
        """{"client_s", "server_s", "transport_s"} (ms-rounded, summing to the rounded `wall_s`) and the peak memory."""
        wall = round(wall_s, 3)
        client = min(round(self.client_s, 3), wall)
        transport = min(max(round(self.transport_s, 3), 0.0), round(wall - client, 3))
        return {
            "client_s": client,
            "server_s": round(wall - client - transport, 3),
            "transport_s": transport,
            **self.peak_memory,
        }


def take_costs(replies: list[Reply]) -> list[dict]:
    """The costs the replies carry (metrics[COST]), taken out of them: the algorithms never see them."""
    costs = []
    for reply in replies:
        if COST in reply.metrics:
            costs.append(reply.metrics[COST])
            reply.metrics = {k: v for k, v in reply.metrics.items() if k != COST}
    return costs


def exchange(transport: Transport, tasks: list[Task], key: TaskKey, cost: RoundCost | None = None) -> list[Reply]:
    """`transport.exchange`, its replies without their costs; with `cost`, the call's time and numbers go to it."""
    start = time.perf_counter()
    replies = transport.exchange(tasks, key)
    seconds, costs = time.perf_counter() - start, take_costs(replies)
    if cost is not None:
        cost.stage(seconds, costs)
        cost.carried(tasks, replies)
    return replies


@dataclass
class StageOutcome:
    """What a stage did: the clients whose replies were aggregated, their metrics, the clients whose non-finite
    reply was dropped, and why a secure sum failed (None when it did not)."""

    used: list[str]
    metrics: list[dict]
    nonfinite: list[str] = field(default_factory=list)
    failure: str | None = None


def run_stage(
    algorithm: Algorithm, transport: Transport, tasks: list[Task], key: TaskKey, cost: RoundCost | None = None
) -> StageOutcome:
    """One stage in the clear: every finite reply goes to `algorithm.receive`."""
    replies, bad = split_finite(exchange(transport, tasks, key, cost))
    if bad:
        log.warning("%s round %s: dropped non-finite update(s) from %s", key.method, key.round, ", ".join(bad))
    algorithm.receive(key.round, replies)
    return StageOutcome([x.client_id for x in replies], [x.metrics for x in replies], bad)


def run_secure_stage(
    algorithm: Algorithm, transport: Transport, tasks: list[Task], key: TaskKey, cost: RoundCost | None = None
) -> StageOutcome:
    """One stage whose replies the server sees only summed (`Transport.aggregate`). A sum that could not be
    unmasked (too few clients answered) is logged and recorded, and the algorithm keeps its model: never a
    silent average of whoever answered. Each contributor counts as sending a state of the sum's size."""
    start = time.perf_counter()
    aggregate = transport.aggregate(tasks, key)
    seconds = time.perf_counter() - start
    costs = [m[COST] for m in aggregate.metrics if COST in m]
    aggregate.metrics = [{k: v for k, v in m.items() if k != COST} for m in aggregate.metrics]
    if cost is not None:
        cost.stage(seconds, costs)
        state = aggregate.state if aggregate.state is not None else {}
        contributions = [Reply(c, 0, state, m) for c, m in zip(aggregate.client_ids, aggregate.metrics)]
        cost.carried(tasks, contributions)
    if aggregate.state is None:
        log.warning("%s round %s: secure aggregation failed (%s)", key.method, key.round, aggregate.failure)
    algorithm.receive_aggregate(key.round, aggregate)
    return StageOutcome(list(aggregate.client_ids), aggregate.metrics, failure=aggregate.failure)


def evaluate_server(
    algorithm: Algorithm, transport: Transport, r: int, stage: int, client_ids: list[str], cost: RoundCost | None = None
) -> dict:
    """Round `r`'s participants evaluate the server's current model(s) on their validation pairs, as EVALUATE tasks
    under the round's next free stage key (so no training task's generator moves): {"val_loss": [mean per model],
    "val_acc": [...], "eval_clients": replies, "eval_s": seconds}; {} without models or participants. With `cost`,
    the tasks and replies count in the round's numbers (its time is `eval_s`, outside the round's wall time)."""
    models = algorithm.server_models()
    if not models or not client_ids:
        return {}
    start = time.perf_counter()
    tasks = [Task(cid, EVALUATE, list(models), tag="eval") for cid in client_ids]
    replies = exchange(transport, tasks, TaskKey(algorithm.name, r, stage))
    if cost is not None:
        cost.carried(tasks, replies)
    out: dict = {"eval_clients": len(replies)}
    if replies:
        for metric in ("val_loss", "val_acc"):
            out[metric] = [statistics.fmean(x.metrics[metric][k] for x in replies) for k in range(len(models))]
    out["eval_s"] = round(time.perf_counter() - start, 3)
    return out


def should_checkpoint(algorithm: Algorithm, round_idx: int, every: int) -> bool:
    """Every `every` rounds, at the end of each phase of the algorithm, and at the end of the global phase."""
    done = round_idx + 1
    phase_ends = set(algorithm.phase_end_rounds) | {algorithm.num_rounds, algorithm.num_rounds + 1}
    return done in phase_ends or (every > 0 and done % every == 0)


def check_server_finite(algorithm: Algorithm, round_idx: int, client_ids: list[str]) -> None:
    bad = nonfinite_tensors(vars(algorithm))
    if bad:
        raise NonFiniteModelError(
            f"{algorithm.name}: the server model became non-finite in round {round_idx} after aggregating "
            f"clients {', '.join(client_ids) or '(none)'} (first bad tensor: {bad[0]})"
        )


def round_record(
    algorithm: Algorithm, r: int, stages: int, losses: list[float], dropped: list[str], wall_s: float
) -> dict:
    record = {
        "method": algorithm.name,
        "round": r,
        "stages": stages,
        "train_loss": sum(losses) / len(losses) if losses else None,
        "dropped": dropped,
        "wall_s": round(wall_s, 3),
    }
    if algorithm.history and algorithm.history[-1].get("round") == r:
        record.update({k: v for k, v in algorithm.history[-1].items() if k != "round"})
    return record


def communication(records: list[dict]) -> dict | None:
    """A method's bytes per client per round (fedpref.results.MethodResult.communication) from its round records:
    the mean over every (round, client sent a task that round) of the bytes down and up, and each round's
    counts; None when the transport counted nothing."""
    counted = [r for r in records if "bytes_down" in r]
    if not counted:
        return None
    down, up = per_client_round(counted, "bytes")
    out: dict = {
        "bytes_down_per_client_round": down,
        "bytes_up_per_client_round": up,
        "rounds": [{"round": r["round"], "down": r["bytes_down"], "up": r["bytes_up"]} for r in counted],
    }
    return out


def per_client_round(records: list[dict], what: str) -> tuple[float, float]:
    """The mean of `{what}_down` and of `{what}_up` over every (record, client sent a task in it)."""
    down = [n for r in records for n in r[f"{what}_down"].values()]
    up = [r[f"{what}_up"].get(c, 0) for r in records for c in r[f"{what}_down"]]
    return (statistics.fmean(down) if down else 0.0), (statistics.fmean(up) if up else 0.0)


TIME_SPLIT = ("client_s", "server_s", "transport_s")


def method_cost(records: list[dict], trainable_params: int | None = None, federated: bool = True) -> dict:
    """A method's cost (fedpref.results.MethodResult.cost) from its round records (`RoundCost`): the numbers sent
    to and received from a client per round (the mean over every (round, client sent a task); only for a
    `federated` method), the largest peak memory of any round, and the mean seconds per round of client compute,
    server work and transport; with `trainable_params`, the parameters of one model the method trains."""
    out: dict = {} if trainable_params is None else {"trainable_params": trainable_params}
    if federated and (counted := [r for r in records if "params_down" in r]):
        out["params_down_per_client_round"], out["params_up_per_client_round"] = per_client_round(counted, "params")
    if peaks := [r for r in records if "peak_memory_bytes" in r]:
        top = max(peaks, key=lambda r: r["peak_memory_bytes"])
        out |= {k: top[k] for k in ("peak_memory_bytes", "peak_memory_kind") if k in top}
    if split := [r for r in records if "client_s" in r]:
        out |= {f"{k}_per_round": round(statistics.fmean(r[k] for r in split), 4) for k in TIME_SPLIT}
        out["rounds"] = len(split)
    return out


def initializations(algorithm: Algorithm, client_ids: list[str]) -> dict[str, State]:
    """Every client's starting point for personalization."""
    return {cid: algorithm.initialization(cid) for cid in client_ids}


def personalize(
    method: str, inits: dict[str, State], transport: Transport, checkpoints: list[int]
) -> dict[str, list[float]]:
    """Each client's local phase from its initialization, on its own data (FedGD paper, Sec. 2.1): test
    accuracy after each of `checkpoints` steps, by client; a client that did not answer is missing."""
    tasks = [
        Task(cid, PERSONALIZE, [init], steps=max(checkpoints), payload={"checkpoints": list(checkpoints)})
        for cid, init in inits.items()
    ]
    replies = exchange(transport, tasks, TaskKey(method, PERSONALIZE))
    return {reply.client_id: list(reply.metrics["acc"]) for reply in replies}


def finish_method(
    algorithm: Algorithm, transport: Transport, infos: list[ClientInfo], checkpoints: list[int]
) -> tuple[dict, dict[str, State]]:
    """A method's entry in the results (fedpref.results.MethodResult) after its global phase: every client's
    personalization (from `algorithm.initialization`), the partitions it chose, and a latent selector's own
    evaluation of seen and unseen clients; and the initializations (for saving and the diagnostics)."""
    inits = initializations(algorithm, [c.client_id for c in infos])
    per_client = personalize(algorithm.name, inits, transport, checkpoints)
    curves = summarize_curves(checkpoints, per_client, {c.client_id: c.true_group for c in infos})
    if missing := [c.client_id for c in infos if c.client_id not in per_client]:
        curves["missing"] = missing
    result = {"personalization": curves, "diagnostics": {}, "assignments": assignments(algorithm)}
    truth = {c.client_id: c.true_group for c in infos if c.client_id not in algorithm.held_out}
    if None not in truth.values() and (ari := partition_ari(result["assignments"], truth)) is not None:
        result["partition_ari"] = ari
    if selector := evaluate_selector(algorithm, transport, infos):  # FedVPA-GP paper, Tables 1-2
        result["selector"] = selector
    if (privacy := algorithm.privacy_spent()) is not None:
        result["privacy"] = privacy
    return result, inits


def assignments(algorithm: Algorithm) -> list[dict]:
    return [h for h in algorithm.history if "assignment" in h]


def evaluate_selector(algorithm: Algorithm, transport: Transport, infos: list[ClientInfo]) -> dict | None:
    """A latent-conditioned selector's accuracy on seen and unseen clients under their own z (from their
    training pairs, no update); None for a method without one."""
    held_out = set(algorithm.held_out)
    seen = [c.client_id for c in infos if c.client_id not in held_out]
    unseen = [c.client_id for c in infos if c.client_id in held_out]
    if not algorithm.has_selector:
        return None
    out = {"seen": ask_selector(algorithm, transport, seen, "selector/seen")}
    if unseen:
        out["unseen"] = ask_selector(algorithm, transport, unseen, "selector/unseen")
    out["latent_trace"] = algorithm.latent_trace
    return out


def ask_selector(algorithm: Algorithm, transport: Transport, client_ids: list[str], stage: str) -> dict:
    replies = exchange(transport, algorithm.selector_tasks(client_ids), TaskKey(algorithm.name, stage))
    return algorithm.summarize_selector(replies)


def summarize_curves(steps: list[int], per_client: dict[str, list[float]], groups: dict[str, str | None]) -> dict:
    """Mean and (population) std over clients per checkpoint, and the mean per group."""
    columns = list(zip(*per_client.values()))
    by_group: dict[str, list[float]] = {}
    for g in sorted({groups[c] for c in per_client if groups[c] is not None}):
        members = [per_client[c] for c in per_client if groups[c] == g]
        by_group[g] = [round(statistics.fmean(col), 2) for col in zip(*members)]
    return {
        "steps": list(steps),
        "acc_mean": [round(statistics.fmean(col), 2) for col in columns],
        "acc_std": [round(statistics.pstdev(col), 2) for col in columns],
        "by_group": by_group,
        "per_client": per_client,
    }


def partition_ari(assignments: list[dict], truth: dict[str, str]) -> float | None:
    """ARI of the last frozen (FedGD) or final-selection (FedBiscuit) assignment against `truth`; None without one."""
    from sklearn.metrics import adjusted_rand_score

    final = [a for a in assignments if a.get("frozen") or a.get("final_selection")]
    if not final:
        return None
    found = final[-1]["assignment"]
    clients = sorted(c for c in found if c in truth)
    return round(float(adjusted_rand_score([truth[c] for c in clients], [found[c] for c in clients])), 4)


def task_keys(tasks: list[Task], key: TaskKey) -> list[TaskKey]:
    """The key of each task of a stage: the stage's key with the task's index."""
    return [replace(key, index=i) for i in range(len(tasks))]
