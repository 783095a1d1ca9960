from collections import Counter

import numpy as np
import pytest

from fedpref.algorithms.sampling import group_debiased_sample, groups_in_turn, uniform_sample


def _ids_and_groups(sizes: list[int]) -> tuple[list[str], list[int]]:
    groups = [g for g, n in enumerate(sizes) for _ in range(n)]
    return [f"c{i:02d}" for i in range(len(groups))], groups


def test_every_group_in_every_round_when_imbalanced():
    """Groups 6/6/2/2, 5 clients a round: the paper's 'uniform group composition regardless of group size'."""
    ids, groups = _ids_and_groups([6, 6, 2, 2])
    rng = np.random.default_rng(0)
    for r in range(10_000):
        picked = group_debiased_sample(ids, groups, 5, rng, r)
        assert len(set(picked)) == 5
        assert {groups[ids.index(c)] for c in picked} == {0, 1, 2, 3}, r


def test_four_groups_five_clients_is_one_per_group_plus_one():
    ids, groups = _ids_and_groups([3, 2, 1, 2])
    for seed in range(50):
        picked = group_debiased_sample(ids, groups, 5, np.random.default_rng(seed))
        per_group = Counter(groups[ids.index(c)] for c in picked)
        assert set(per_group) == {0, 1, 2, 3} and sorted(per_group.values()) == [1, 1, 1, 2]


def test_floor_share_per_group_and_small_groups_give_all_they_have():
    # sizes 3 and 1, k = 4: floor(4/2) = 2 from the big group, the singleton gives its 1, then 1 of the rest
    # (only the big group's third client is left), so every client is chosen
    ids, groups = _ids_and_groups([3, 1])
    assert group_debiased_sample(ids, groups, 4, np.random.default_rng(1)) == ids
    # sizes 4 and 4, k = 6: exactly 3 from each group, whatever the seed
    ids, groups = _ids_and_groups([4, 4])
    for seed in range(20):
        picked = group_debiased_sample(ids, groups, 6, np.random.default_rng(seed))
        assert Counter(groups[ids.index(c)] for c in picked) == {0: 3, 1: 3}


def test_fewer_clients_than_groups_take_turns():
    """K = 6, m = 4: after every round the groups' counts differ by at most one; 600 rounds give 400 each."""
    ids, groups = _ids_and_groups([5, 1, 3, 2, 4, 2])
    order = np.random.default_rng(7).permutation(6).tolist()
    rng, counts = np.random.default_rng(0), Counter()
    for r in range(600):
        picked = group_debiased_sample(ids, groups, 4, rng, r, order)
        heard = [groups[ids.index(c)] for c in picked]
        assert len(set(heard)) == 4
        counts.update(heard)
        assert max(counts[g] for g in range(6)) - min(counts[g] for g in range(6)) <= 1, r
    assert all(counts[g] == 400 for g in range(6))


def test_groups_in_turn_by_hand():
    # order ranks the labels 2, 0, 1; k = 2: rounds take (2, 0), (1, 2), (0, 1), (2, 0), ...
    assert [groups_in_turn([0, 1, 2], 2, r, [2, 0, 1]) for r in range(4)] == [[2, 0], [1, 2], [0, 1], [2, 0]]
    # a label missing from the order (an emptied group was dropped and relabelled) goes last
    assert groups_in_turn([0, 5], 1, 0, [0]) == [0] and groups_in_turn([0, 5], 1, 1, [0]) == [5]


def test_group_debiased_sample_reproducible_and_checked():
    ids, groups = _ids_and_groups([6, 6, 2, 2])
    a = group_debiased_sample(ids, groups, 5, np.random.default_rng(3), 4)
    assert a == group_debiased_sample(ids, groups, 5, np.random.default_rng(3), 4)
    with pytest.raises(ValueError):
        group_debiased_sample(ids, groups, 17, np.random.default_rng(0))


def test_uniform_sample_distinct_and_reproducible():
    ids = [f"c{i}" for i in range(10)]
    a = uniform_sample(ids, 5, np.random.default_rng(3))
    assert len(set(a)) == 5
    assert a == uniform_sample(ids, 5, np.random.default_rng(3))
    with pytest.raises(ValueError):
        uniform_sample(ids, 11, np.random.default_rng(0))
