"""FL_target (FedGD paper, Sec. 3.2): FedAvg that samples one client per ground-truth group each round."""

from __future__ import annotations

from fedpref.algorithms.base import ClientInfo
from fedpref.algorithms.fedavg import FedAvg
from fedpref.algorithms.sampling import one_per_group_sample
from fedpref.models.adapters import State


class FLTarget(FedAvg):
    """FedAvg changed only in client sampling: one client from each true group, the rest uniformly from all.

    An oracle: it needs `ClientInfo.true_group` of every client. Aggregation stays FedAvg's size-weighted
    average ("we modify FL only in the client sampling step", Sec. 3.2). With fewer clients per round than
    groups (outside the paper's setting, e.g. the tiny smoke config), each round takes one client from each
    of |S| distinct groups drawn uniformly, so every group still has the same chance to be heard.
    """

    name = "FL_target"

    def __init__(
        self,
        clients: list[ClientInfo],
        init_state: State,
        num_rounds: int,
        clients_per_round: int,
        local_steps: int,
        seed: int,
    ):
        missing = [c.client_id for c in clients if c.true_group is None]
        if missing:
            raise ValueError(f"FL_target needs the ground-truth group of every client; none for {missing[:5]}")
        labels = sorted({c.true_group for c in clients})
        super().__init__(clients, init_state, num_rounds, clients_per_round, local_steps, seed)
        self.group_index = [labels.index(c.true_group) for c in clients]
        self.num_groups = len(labels)

    def sample(self, round_idx: int) -> list[str]:
        ids, groups = [c.client_id for c in self.clients], self.group_index
        if self.clients_per_round < self.num_groups:
            chosen = set(self.rng.choice(self.num_groups, size=self.clients_per_round, replace=False).tolist())
            ids, groups = zip(*[(c, g) for c, g in zip(ids, groups) if g in chosen])
        return one_per_group_sample(list(ids), list(groups), self.clients_per_round, self.rng)
