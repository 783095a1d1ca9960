"""Statistics over seeds: mean, sample std, Student-t 95% intervals and paired differences of accuracies."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from fedpref.errors import FedprefError

# t_{0.975, df} for df = 1..30 (scipy.stats.t.ppf, 4 decimals). Beyond 30 the Cornish-Fisher expansion of the
# t quantile around the normal one (Abramowitz & Stegun 26.7.5) is exact to better than 1e-6.
T975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)  # fmt: skip
Z975 = 1.959963984540054


def t_quantile(df: int) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom (two-sided 95%)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(T975):
        return T975[df - 1]
    z = Z975
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * df**4)
    )


@dataclass(frozen=True)
class Estimate:
    """Mean of `n` values, their sample std (ddof=1) and the half-width of the t-interval of the mean."""

    n: int
    mean: float
    std: float | None  # None for a single value
    half_width: float | None
    values: tuple[float, ...] = ()

    @property
    def interval(self) -> tuple[float, float] | None:
        if self.half_width is None:
            return None
        return self.mean - self.half_width, self.mean + self.half_width


def estimate(values: Sequence[float]) -> Estimate:
    """Mean, sample std and 95% t-interval half-width t_{0.975,n-1} * std / sqrt(n)."""
    if not values:
        raise ValueError("no values to summarize")
    values = tuple(float(v) for v in values)
    n, mean = len(values), statistics.fmean(values)
    if n < 2:
        return Estimate(n, mean, None, None, values)
    std = statistics.stdev(values)
    return Estimate(n, mean, std, t_quantile(n - 1) * std / math.sqrt(n), values)


def paired_difference(seeds: Sequence[tuple[dict[str, float], dict[str, float]]]) -> tuple[Estimate, str]:
    """A minus B for the same clients: (estimate, unit), one (A per client, B per client) pair per seed.

    Clients of one run share its global model, data draw and batches, so their differences are not independent:
    with several seeds, each seed counts once, as the mean over its clients of A - B (unit 'seed', n = seeds).
    With one seed, the clients' differences are the only replication (unit 'client', n = clients); that interval
    says nothing about run-to-run variation.
    """
    diffs = [[a[c] - b[c] for c in sorted(a.keys() & b.keys())] for a, b in seeds]
    if not all(diffs):
        raise FedprefError("paired difference: a run has no client evaluated by both methods")
    if len(diffs) == 1:
        return estimate(diffs[0]), "client"
    return estimate([statistics.fmean(d) for d in diffs]), "seed"
