"""Client-level differential privacy at the server: the noised equal-weight mean of clipped updates, and the
run's (epsilon, delta) from Flower's RDP accountant, whose state is plain data that checkpoints carry."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from fedpref.algorithms.aggregation import uniform_average
from fedpref.client.privacy import gaussian_noise_like
from fedpref.config import PrivacyConfig
from fedpref.errors import ConfigError
from fedpref.models.adapters import State

NOISE_STREAM = 0x5EED_D9  # mixed into the noise generator's seed: a stream of its own, apart from sampling


@dataclass
class ClientLevelDP:
    """DP-FedAvg with fixed clipping (McMahan et al., "Learning Differentially Private Recurrent Language Models"),
    as Flower's server-side fixed-clipping strategy does it: clients send updates clipped to L2 norm C, the server
    takes their equal-weight mean and adds N(0, (z C / n)^2) per coordinate, n = the updates received.

    `amplified`: the cohort is a uniform sample without replacement of `cohort` out of `population` clients,
    so the accountant may use amplification by subsampling; otherwise (e.g. FL_target's group-wise sampling)
    every round is accounted as if all clients took part.
    """

    clip_norm: float
    noise_multiplier: float
    delta: float
    population: int
    cohort: int
    amplified: bool
    seed: int
    accountant_state: dict | None = None  # RdpAccountant.state_dict(): JSON-like, so checkpoints carry it
    releases: int = 0
    _accountant: object | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_config(cls, cfg: PrivacyConfig, population: int, cohort: int, amplified: bool, seed: int):
        """None when privacy is off; otherwise checked up front (flwr[dp] present when there is noise)."""
        if not cfg.enabled:
            return None
        dp = cls(cfg.clip_norm, cfg.noise_multiplier, cfg.delta, population, min(cohort, population), amplified, seed)
        if dp.noise_multiplier > 0:
            dp.accountant()  # fail now, not after the first round, when dp-accounting is missing
        return dp

    def aggregate(self, states: list[State], round_idx: int) -> State:
        """mean_i(state_i) + noise = global + mean_i(clipped update_i) + noise: each client's state is the
        model it received plus its clipped update."""
        return self.noised(uniform_average(states), len(states), round_idx)

    def noised(self, mean: State, n: int, round_idx: int) -> State:
        """The equal-weight mean of n clipped states (in the clear, or from secure aggregation) plus the round's
        seeded N(0, (z C / n)^2) noise; composes one release into the accountant."""
        self.record_release()
        if self.noise_multiplier == 0:
            return mean
        seed = int(np.random.SeedSequence([self.seed, NOISE_STREAM, round_idx]).generate_state(1, np.uint64)[0])
        generator = torch.Generator().manual_seed(seed % 2**63)  # the same noise after a resume
        std = self.noise_multiplier * self.clip_norm / n
        noise = gaussian_noise_like(mean, std, generator)
        return {k: mean[k] + noise[k] for k in mean}

    def record_release(self) -> None:
        """One aggregate released; a noised one is composed into the accountant, whose state is kept as plain data."""
        self.releases += 1
        if self.noise_multiplier == 0:
            return
        from flwr.serverapp import GaussianPrivacyEvent

        accountant = self.accountant()
        accountant.compose(GaussianPrivacyEvent(self.noise_multiplier, self.cohort, self.population))
        self.accountant_state = accountant.state_dict()

    def spent(self) -> dict:
        """{'epsilon', 'delta', 'releases', ...}: epsilon is inf without noise (clipping alone is not private)."""
        base = {"clip_norm": self.clip_norm, "noise_multiplier": self.noise_multiplier, "delta": self.delta}
        base |= {"releases": self.releases, "amplification": "without-replacement" if self.amplified else "none"}
        if self.releases == 0:
            return base | {"epsilon": 0.0}
        if self.noise_multiplier == 0:
            return base | {"epsilon": float("inf")}
        return base | {"epsilon": self.accountant().get_epsilon(self.delta)}

    def accountant(self):
        """Flower's RdpAccountant for this cohort, restored from `accountant_state` (after a resume too)."""
        if self._accountant is None:
            self._accountant = _new_accountant(self.population, self.amplified, self.delta)
            if self.accountant_state is not None:
                self._accountant.load_state_dict(self.accountant_state)
        return self._accountant

    def __getstate__(self) -> dict:  # checkpoints pickle the algorithm: the accountant travels as its state only
        return {k: v for k, v in vars(self).items() if k != "_accountant"} | {"_accountant": None}


def _new_accountant(population: int, amplified: bool, delta: float):
    try:
        from flwr.serverapp import NeighboringRelation, RdpAccountant, SamplingMethod
        from flwr.serverapp import PrivacyConfig as AccountingConfig

        if amplified:
            sampling, relation = SamplingMethod.WITHOUT_REPLACEMENT, NeighboringRelation.REPLACE_ONE
        else:
            sampling, relation = SamplingMethod.NO_AMPLIFICATION, NeighboringRelation.ADD_OR_REMOVE_ONE
        return RdpAccountant(AccountingConfig(delta, population, relation, sampling))
    except ImportError as e:
        raise ConfigError(
            f"privacy.noise_multiplier > 0 needs Flower's accountant: pip install 'flwr[dp]==1.42.0' ({e})"
        ) from None
