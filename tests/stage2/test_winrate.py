"""Wilson score intervals and win-rate summaries against numbers worked out by hand."""

import pytest

from fedpref.stage2.winrate import distinct_n, summarize_verdicts, wilson_interval


def test_wilson_8_of_10():
    # p = 0.8, z^2 = 3.8416: centre = 0.8 + 3.8416/20 = 0.99208; margin = 1.96 sqrt(0.016 + 0.009604) = 0.313624;
    # denominator 1 + 0.38416 -> (0.678456, 1.305704) / 1.38416
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.490158, abs=1e-5)
    assert high == pytest.approx(0.943317, abs=1e-5)


def test_wilson_edges():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(0, 4)
    assert low == 0.0 and high == pytest.approx(3.8416 / 7.8416, abs=1e-6)  # z^2 / (n + z^2)


def test_ties_count_half():
    s = summarize_verdicts([1.0, 1.0, 0.5, 0.0])
    assert s["win_rate"] == 62.5
    assert (s["n"], s["wins"], s["ties"], s["losses"]) == (4, 2, 1, 1)
    low, high = wilson_interval(2.5, 4)
    assert s["ci95"] == [round(100 * low, 2), round(100 * high, 2)]
    assert summarize_verdicts([])["win_rate"] is None


def test_distinct_2_counts_unique_word_bigrams_over_all_texts():
    # bigrams: (a b), (b a), (a b) | (a b) -> 2 unique of 4
    assert distinct_n(["a b a b", "a b"]) == 0.5
    assert distinct_n(["one two three", "four five"]) == 1.0
    assert distinct_n(["single"]) == 0.0
