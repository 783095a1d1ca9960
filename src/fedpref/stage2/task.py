"""What a Stage 2 task gives the pipeline, and the story task stories260K can express (two types that like or
dislike size words, exact oracle)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from fedpref.data.pairs import PreferencePair

Scores = dict[str, Callable[[str], float]]  # preference type -> its exact utility of a response


@dataclass
class Stage2Task:
    """One task's preference types, Stage 1 data and prompts.

    `pool` feeds the server's conditional DPO and `eval_prompts` the win rates: both are prompts no client holds
    (only adapters travel); `judge_pairs` hold labels that no client and no training step sees. `oracle` is None
    where no exact utility exists (real data); `chat_focus` names, per type, the quality a chat judge is asked
    about (empty: the paper's App. D.2 question for every type).
    """

    types: tuple[str, ...]
    client_types: dict[str, str]  # client id -> preference type
    stage1_pairs: list[PreferencePair]
    eval_prompts: list[str]
    pool: list[str]
    oracle: Scores | None = None
    chat_focus: dict[str, str] = field(default_factory=dict)
    # type -> (train, test) labelled pairs that no client holds and whose prompts are not win-rate prompts: the
    # held-out judges' own data (trained on `train`, their agreement with human labels measured on `test`)
    judge_pairs: dict[str, tuple[list[PreferencePair], list[PreferencePair]]] = field(default_factory=dict)


SIZE_WORDS = ("big", "huge", "large", "giant", "tall", "enormous")
# Type -> sign of the utility: "G1" prefers more size words, "G2" fewer (opposite preferences, as the paper's
# helpful vs harmless clients).
TYPES = {"G1": 1.0, "G2": -1.0}

_NAMES = ("Lily", "Tim", "Sam", "Sue", "Ben", "Mia", "Max", "Anna", "Tom", "Lucy", "Jack", "Amy")
_SUBJECTS = ("a little girl named {n}", "a boy named {n}", "a cat named {n}", "a dog named {n}", "a bird named {n}")
_OPENINGS = (
    "Once upon a time, there was {s}.",
    "One day, {s} went to the park.",
    "There was {s} who liked to play outside.",
    "{S} was very happy today.",
)


def count_words(text: str, words: Sequence[str] = SIZE_WORDS) -> int:
    """Whole-word, case-insensitive occurrences of `words` in `text`."""
    wanted = set(words)
    return sum(1 for w in re.findall(r"[a-z]+", text.lower()) if w in wanted)


def oracle_scores(words: Sequence[str] = SIZE_WORDS) -> Scores:
    """Per type, the exact utility of a story: +count (G1) or -count (G2) of the word set."""
    return {g: (lambda text, s=sign: s * count_words(text, words)) for g, sign in TYPES.items()}


def story_prompts(seed: int) -> list[str]:
    """The 240 distinct story openings (4 openings x 5 subjects x 12 names), shuffled by `seed`."""
    prompts = []
    for opening, subject, name in itertools.product(_OPENINGS, _SUBJECTS, _NAMES):
        s = subject.format(n=name)
        prompts.append(opening.format(s=s, S=s[0].upper() + s[1:]))
    order = np.random.default_rng(seed).permutation(len(prompts))
    return [prompts[i] for i in order]
