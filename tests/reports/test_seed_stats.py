"""Statistics over seeds, checked against hand-computed numbers."""

import math

import pytest

from fedpref.reports.seed_stats import estimate, paired_difference, t_quantile


def test_mean_std_and_t_interval_by_hand():
    est = estimate([80, 90, 100])
    assert (est.n, est.mean, est.std) == (3, 90.0, 10.0)
    # t_{0.975,2} = 4.3027; half-width 4.3027 * 10 / sqrt(3) = 24.84
    assert est.half_width == pytest.approx(24.84, abs=0.005)
    assert est.interval == pytest.approx((65.16, 114.84), abs=0.005)
    single = estimate([42.0])
    assert (single.n, single.mean, single.std, single.half_width, single.interval) == (1, 42.0, None, None, None)


def test_t_quantiles():
    assert t_quantile(1) == 12.7062 and t_quantile(2) == 4.3027 and t_quantile(30) == 2.0423
    # beyond the table: t_{0.975,40} = 2.0211, t_{0.975,120} = 1.9799, and the normal 1.96 in the limit
    assert t_quantile(40) == pytest.approx(2.0211, abs=1e-4)
    assert t_quantile(120) == pytest.approx(1.9799, abs=1e-4)
    assert t_quantile(10**7) == pytest.approx(1.96, abs=1e-3)
    with pytest.raises(ValueError):
        t_quantile(0)


def test_paired_difference_by_hand():
    # several seeds: one value per seed, the mean over clients of A - B: (0+2)/2, (2+2)/2, (2+4)/2 = 1, 2, 3
    seeds = [({"a": 50, "b": 72}, {"a": 50, "b": 70}), ({"a": 62, "b": 82}, {"a": 60, "b": 80})]
    seeds.append(({"a": 72, "b": 94, "only_in_a": 0}, {"a": 70, "b": 90}))
    est, unit = paired_difference(seeds)
    assert unit == "seed" and est.n == 3 and est.mean == 2.0 and est.std == 1.0
    assert est.half_width == pytest.approx(4.3027 / math.sqrt(3))  # 2.48
    # one seed: the clients are the unit; differences 10, 0, 10 -> mean 6.67, std 5.77, half 4.3027*5.77/sqrt(3)
    est, unit = paired_difference([({"x": 70, "y": 90, "z": 80}, {"x": 60, "y": 90, "z": 70})])
    assert unit == "client" and est.n == 3
    assert (est.mean, est.std, est.half_width) == pytest.approx((6.667, 5.774, 14.342), abs=1e-3)
