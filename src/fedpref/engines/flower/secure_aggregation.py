"""SecAgg+ for one stage of train tasks: Flower's SecAggPlusWorkflow over the grid, through a one-stage strategy.

The workflow (Flower's own) runs its four stages (setup, share keys, collect masked vectors, unmask) as train
messages to the stage's nodes; each node's `secaggplus_mod` masks its trained state before it leaves, and the
server unmasks only the weighted sum. `OneStage` is the small strategy adapter the workflow needs: it hands over
the stage's tasks as FitIns and keeps what the workflow aggregates.
"""

from __future__ import annotations

import logging

from flwr.app import ArrayRecord, ConfigRecord, Context, RecordDict
from flwr.common import FitIns, FitRes, Parameters, parameters_to_ndarrays
from flwr.server.client_proxy import ClientProxy
from flwr.server.compat.grid_client_proxy import GridClientProxy
from flwr.server.compat.legacy_context import LegacyContext
from flwr.server.strategy import Strategy
from flwr.server.workflow import SecAggPlusWorkflow
from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD
from flwr.server.workflow.constant import Key as WorkflowKey
from flwr.serverapp import Grid

from fedpref.config import SecureAggregationConfig
from fedpref.engines.flower import messages as m
from fedpref.engines.loop import task_keys
from fedpref.protocol import SECURE_WEIGHT, Aggregate, Task, TaskKey

LOG = logging.getLogger("flwr").getChild("fedpref")


class OneStage(Strategy):
    """A strategy for exactly one SecAgg+ stage: its fit instructions are the stage's tasks; it keeps the
    results (every one carrying the unmasked weighted mean) and evaluates nothing."""

    def __init__(self, instructions: list[tuple[ClientProxy, FitIns]]):
        self.instructions = instructions
        self.results: list[FitRes] = []
        self.aggregated: Parameters | None = None

    def initialize_parameters(self, client_manager):
        return None

    def configure_fit(self, server_round, parameters, client_manager):
        return self.instructions

    def aggregate_fit(self, server_round, results, failures):
        self.results = [fitres for _, fitres in results]
        self.aggregated = self.results[0].parameters if self.results else None
        return self.aggregated, {}

    def configure_evaluate(self, server_round, parameters, client_manager):
        return []

    def aggregate_evaluate(self, server_round, results, failures):
        return None, {}

    def evaluate(self, server_round, parameters):
        return None


def workflow(settings: SecureAggregationConfig, tasks: list[Task], timeout_s: float | None) -> SecAggPlusWorkflow:
    """Flower's SecAgg+ workflow for the stage: shares and threshold as fractions or counts, the largest task
    weight as max_weight (every weight then quantizes into [0, 1])."""

    def fraction_or_count(value: float) -> float | int:
        return float(value) if value <= 1 else int(value)

    return SecAggPlusWorkflow(
        num_shares=fraction_or_count(settings.num_shares),
        reconstruction_threshold=fraction_or_count(settings.reconstruction_threshold),
        max_weight=float(max(t.payload[SECURE_WEIGHT] for t in tasks)),
        clipping_range=settings.clipping_range,
        quantization_range=2**settings.quantization_bits,
        timeout=timeout_s,
    )


def secure_aggregate(
    grid: Grid,
    node_of: dict[str, int],
    tasks: list[Task],
    key: TaskKey,
    settings: SecureAggregationConfig,
    timeout_s: float | None,
) -> Aggregate:
    """Run the stage's tasks under SecAgg+; the server gets the weighted mean of the trained states only.
    When too few nodes answer to unmask the sum, the Aggregate has no state and says why."""
    proxies = {t.client_id: GridClientProxy(node_of[t.client_id], grid, run_id=0) for t in tasks}
    strategy = OneStage([(proxies[t.client_id], m.task_to_fitins(t, k)) for t, k in zip(tasks, task_keys(tasks, key))])
    context = LegacyContext(Context(0, 0, {}, RecordDict(), {}), strategy=strategy)
    context.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord({WorkflowKey.CURRENT_ROUND: stage_number(key)})
    context.state.array_records[MAIN_PARAMS_RECORD] = ArrayRecord()  # the tasks carry their models themselves
    workflow(settings, tasks, timeout_s)(grid, context)
    if strategy.aggregated is None:
        return Aggregate(None, [], 0.0, failure=f"SecAgg+ halted: too few of {len(tasks)} clients answered")
    replies = [m.fitres_to_reply(fitres) for fitres in strategy.results]
    keys = replies[0][2]
    state = m.arrays_to_state(parameters_to_ndarrays(strategy.aggregated), keys, tasks[0].models[0])
    weights = {t.client_id: float(t.payload[SECURE_WEIGHT]) for t in tasks}
    used = [reply.client_id for reply, _, _ in replies]
    return Aggregate(state, used, sum(weights[c] for c in used), [reply.metrics for reply, _, _ in replies])


def stage_number(key: TaskKey) -> int:
    """The workflow's `current_round` (it only names its messages' group): the loop's round."""
    return key.round if isinstance(key.round, int) else 0
