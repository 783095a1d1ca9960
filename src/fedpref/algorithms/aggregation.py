"""Pure aggregation rules over adapter states (dicts of tensors)."""

from __future__ import annotations

from collections.abc import Sequence

from fedpref.models.adapters import State
from fedpref.protocol import SECURE_WEIGHT, Aggregate, Reply, Task


def weighted_average(states: Sequence[State], weights: Sequence[float]) -> State:
    """sum_i w_i * state_i / sum_i w_i, key by key (FedAvg when w_i = N_i)."""
    if not states:
        raise ValueError("cannot average zero models")
    total = float(sum(weights))
    if total <= 0:
        raise ValueError(f"weights must have a positive sum, got {list(weights)}")
    return {
        key: sum(w / total * s[key].double() for s, w in zip(states, weights)).to(states[0][key].dtype)
        for key in states[0]
    }


def uniform_average(states: Sequence[State]) -> State:
    """Every model counts the same."""
    return weighted_average(states, [1.0] * len(states))


def hierarchical_average(states: Sequence[State], sizes: Sequence[float], groups: Sequence[int]) -> State:
    """Size-weighted within each group, then uniform across the groups present (FedGD paper, Phase 2)."""
    group_models = []
    for g in sorted(set(groups)):
        members = [i for i, gi in enumerate(groups) if gi == g]
        group_models.append(weighted_average([states[i] for i in members], [sizes[i] for i in members]))
    return uniform_average(group_models)


def mix(old: State, new: State, w: float) -> State:
    """w * old + (1 - w) * new."""
    return {k: w * old[k] + (1.0 - w) * new[k] for k in old}


def copy_state(state: State) -> State:
    return {k: v.clone() for k, v in state.items()}


def clear_aggregate(tasks: Sequence[Task], replies: Sequence[Reply]) -> Aggregate:
    """What secure aggregation reveals, computed in the clear: the mean of the replies' states weighted by their
    tasks' SECURE_WEIGHT (the reference a SecAgg+ sum must match within its quantization)."""
    weight_of = {t.client_id: float(t.payload[SECURE_WEIGHT]) for t in tasks}
    if not replies:
        return Aggregate(None, [], 0.0, failure="no client answered")
    weights = [weight_of[r.client_id] for r in replies]
    mean = weighted_average([r.state for r in replies], weights)
    return Aggregate(mean, [r.client_id for r in replies], sum(weights), [dict(r.metrics) for r in replies])
