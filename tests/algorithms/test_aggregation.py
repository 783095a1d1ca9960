import pytest
import torch

from fedpref.algorithms.aggregation import hierarchical_average, mix, uniform_average, weighted_average


def s(x):
    return {"w": torch.tensor([x, 2 * x])}


def test_weighted_average_by_hand():
    # (1*1 + 3*5) / (1 + 3) = 4.0 ; second entry doubles
    out = weighted_average([s(1.0), s(5.0)], [1, 3])
    assert torch.equal(out["w"], torch.tensor([4.0, 8.0]))


def test_uniform_average():
    assert torch.equal(uniform_average([s(1.0), s(2.0), s(6.0)])["w"], torch.tensor([3.0, 6.0]))


def test_hierarchical_average_by_hand():
    # group 0: clients of size 1 and 3 with values 0 and 4 -> (0*1 + 4*3)/4 = 3
    # group 1: one client of size 100 with value 9 -> 9 ; uniform across groups -> (3 + 9)/2 = 6
    out = hierarchical_average([s(0.0), s(4.0), s(9.0)], sizes=[1, 3, 100], groups=[0, 0, 1])
    assert torch.equal(out["w"], torch.tensor([6.0, 12.0]))
    # plain size weighting would give (0 + 12 + 900) / 104 instead
    assert not torch.equal(weighted_average([s(0.0), s(4.0), s(9.0)], [1, 3, 100])["w"], out["w"])


def test_mix_by_hand():
    assert torch.allclose(mix(s(10.0), s(0.0), 0.6)["w"], torch.tensor([6.0, 12.0]))


def test_average_errors():
    with pytest.raises(ValueError):
        weighted_average([], [])
    with pytest.raises(ValueError):
        weighted_average([s(1.0)], [0])
