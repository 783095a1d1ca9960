"""FL_target (FedGD paper, Sec. 3.2): FedAvg whose rounds have a uniform ground-truth group composition."""

from __future__ import annotations

from typing import Any

from fedpref.algorithms.fedavg import FedAvg, fedavg_family_spec
from fedpref.algorithms.sampling import group_debiased_sample
from fedpref.protocol import ClientInfo


class FLTarget(FedAvg):
    """FedAvg changed only in client sampling: `group_debiased_sample` over the true groups.

    With the paper's 4 groups and 5 clients a round that is one client from each true group plus one
    uniformly from the rest. An oracle: it needs `ClientInfo.true_group` of every client. Aggregation stays
    FedAvg's size-weighted average ("we modify FL only in the client sampling step", Sec. 3.2). With fewer
    clients per round than groups (outside the paper's setting, e.g. the tiny smoke config), the groups take
    turns in a seeded cyclic order, so every group is heard equally often.
    """

    name = "FL_target"
    uniform_sampling = False  # group-wise: DP is accounted without amplification by subsampling

    def __init__(self, clients: list[ClientInfo], *fedavg_args: Any, **fedavg_kwargs: Any):
        """FedAvg's arguments (`FedAvg.__init__`); every client must carry its ground-truth group."""
        missing = [c.client_id for c in clients if c.true_group is None]
        if missing:
            raise ValueError(f"FL_target needs the ground-truth group of every client; none for {missing[:5]}")
        labels = sorted({c.true_group for c in clients})
        super().__init__(clients, *fedavg_args, **fedavg_kwargs)
        self.group_index = [labels.index(c.true_group) for c in clients]
        self.turn_order = self.rng.permutation(len(labels)).tolist()

    def sample(self, round_idx: int) -> list[str]:
        ids = [c.client_id for c in self.clients]
        return group_debiased_sample(
            ids, self.group_index, self.clients_per_round, self.rng, round_idx, self.turn_order
        )


PAPER = "FedGD"  # whose method these are (`fedpref list methods`)
SPECS = (fedavg_family_spec(FLTarget, "FedAvg sampling a uniform mix of the true groups (an oracle)"),)
