from collections import Counter

import numpy as np
import pytest

from fedpref.algorithms.sampling import (
    group_debiased_probabilities,
    group_debiased_sample,
    one_per_group_sample,
    uniform_sample,
)


def test_group_debiased_probabilities_by_hand():
    # sizes 3 and 1: each group gets mass 1/2 -> 1/6 per client of the big group, 1/2 for the singleton
    p = group_debiased_probabilities([0, 0, 0, 1])
    assert np.allclose(p, [1 / 6, 1 / 6, 1 / 6, 1 / 2])


def test_group_debiased_sampling_balances_groups():
    ids = [f"c{i}" for i in range(20)]
    groups = [0] * 15 + [1] * 5
    counts = Counter()
    rng = np.random.default_rng(0)
    for _ in range(2000):
        for c in group_debiased_sample(ids, groups, 1, rng):
            counts[groups[ids.index(c)]] += 1
    assert abs(counts[0] / 2000 - 0.5) < 0.05


def test_uniform_sample_distinct_and_reproducible():
    ids = [f"c{i}" for i in range(10)]
    a = uniform_sample(ids, 5, np.random.default_rng(3))
    assert len(set(a)) == 5
    assert a == uniform_sample(ids, 5, np.random.default_rng(3))
    with pytest.raises(ValueError):
        uniform_sample(ids, 11, np.random.default_rng(0))


def test_one_per_group_sample():
    ids = [f"c{i}" for i in range(8)]
    groups = [0, 0, 0, 1, 1, 2, 3, 3]
    for seed in range(20):
        picked = one_per_group_sample(ids, groups, 5, np.random.default_rng(seed))
        assert len(set(picked)) == 5
        assert {groups[ids.index(c)] for c in picked} == {0, 1, 2, 3}
