"""Win rates with ties counted half and Wilson score intervals (paper 001, App. C.3.1 and D.2)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def wilson_interval(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion; `successes` may be fractional (ties count half). (0, 1) if n = 0."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = p + z * z / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    denom = 1 + z * z / n
    return max(0.0, (centre - margin) / denom), min(1.0, (centre + margin) / denom)


def summarize_verdicts(verdicts: Sequence[float], z: float = 1.96) -> dict:
    """Win rate (%) of the first response from verdicts in {1: win, 0.5: tie, 0: loss}, with counts and CI (%)."""
    n = len(verdicts)
    wins = sum(1 for v in verdicts if v == 1.0)
    ties = sum(1 for v in verdicts if v == 0.5)
    score = wins + 0.5 * ties
    low, high = wilson_interval(score, n, z)
    return {
        "win_rate": round(100.0 * score / n, 2) if n else None,
        "n": n,
        "wins": wins,
        "ties": ties,
        "losses": n - wins - ties,
        "ci95": [round(100.0 * low, 2), round(100.0 * high, 2)],
    }


def distinct_n(texts: Sequence[str], n: int = 2) -> float:
    """Distinct-n: unique word n-grams over all n-grams of the texts (1.0: no n-gram repeats; 0.0 if none)."""
    grams = [tuple(words[i : i + n]) for words in (t.split() for t in texts) for i in range(len(words) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0
