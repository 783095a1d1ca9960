"""Offline synthetic style benchmark: template-built response pairs differing in reading level or humor."""

from __future__ import annotations

import itertools
import json
import numbers
import random
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from fedpref.data.pairs import PreferencePair
from fedpref.errors import ConfigError

GROUPS: tuple[str, ...] = ("G1", "G2", "G3", "G4")
AXES: tuple[str, ...] = ("level", "humor")
# The two styles compared on each axis; `StyleItem.texts` follows this order.
AXIS_STYLES: dict[str, tuple[str, str]] = {
    "level": ("elementary", "phd"),
    "humor": ("humorous", "non-humorous"),
}
GROUP_PREFERENCES: dict[str, dict[str, str]] = {
    "G1": {"level": "elementary", "humor": "humorous"},
    "G2": {"level": "elementary", "humor": "non-humorous"},
    "G3": {"level": "phd", "humor": "humorous"},
    "G4": {"level": "phd", "humor": "non-humorous"},
}
# Register shared by both responses of a humor-axis pair.
HUMOR_REGISTERS: tuple[str, ...] = ("elementary", "neutral")
# How a group's preference is read from an item: "plain", its preferred style always wins; "composed", its
# preferred style wins in one context and the other style in the other (`flipped_context`), so the cue is a style
# *with* a context both responses share, not a style word alone.
CUES: tuple[str, ...] = ("plain", "composed")
# Composed cues: contexts where a group's preference flips. Humor: the pair's shared register is neutral (the
# group's humor preference holds for elementary-register pairs). Level: the prompt's topic is academic (the
# group's reading level holds for everyday topics).
FLIPPED_REGISTERS: frozenset[str] = frozenset({"neutral"})
ACADEMIC_DOMAINS: frozenset[str] = frozenset({"history", "language", "science", "space", "technology"})

MIN_TARGET_WORDS, MAX_TARGET_WORDS = 30, 50
MAX_WORDS = 62
MAX_LENGTH_GAP = 0.2  # largest |a - b| / max(a, b) accepted for a pair's word counts
_ATTEMPTS = 8
_PERMUTATIONS_3 = tuple(itertools.permutations(range(3)))


@dataclass(frozen=True)
class _Topic:
    domain: str
    subject: str
    terms: tuple[str, str, str]
    simple: str  # plain-language gist, an independent clause
    technical: str  # jargon-heavy gist, an independent clause


# The vocabulary (topics, register sentences, jokes, prompt frames) is package data: synthetic_vocabulary.json.
_VOCABULARY = json.loads(resources.files("fedpref.data").joinpath("synthetic_vocabulary.json").read_text("utf-8"))


def _by_domain(table: dict[str, list[str]]) -> dict[str, tuple[str, ...]]:
    return {domain: tuple(values) for domain, values in table.items()}


TOPICS: tuple[_Topic, ...] = tuple(
    _Topic(t["domain"], t["subject"], tuple(t["terms"]), t["simple"], t["technical"]) for t in _VOCABULARY["topics"]
)
JARGON = _by_domain(_VOCABULARY["jargon"])  # technical words per domain, for the PhD register
ANALOGIES = _by_domain(_VOCABULARY["analogies"])  # everyday comparisons per domain, for the elementary register
DOMAIN_PUNS = _by_domain(_VOCABULARY["domain_puns"])
SURNAMES = tuple(_VOCABULARY["surnames"])  # fictitious authors of the PhD register's citations

# Elementary register: simple words, short sentences, everyday analogies, addressing a child.
_ELEMENTARY = {k: tuple(v) for k, v in _VOCABULARY["registers"]["elementary"].items()}
# Neutral register: plain adult prose, serious and matter-of-fact.
_NEUTRAL = {k: tuple(v) for k, v in _VOCABULARY["registers"]["neutral"].items()}
# PhD register: jargon, long subordinate clauses, hedged academic tone, citation-like phrasing.
_PHD = {k: tuple(v) for k, v in _VOCABULARY["registers"]["phd"].items()}
# Humor: jokes, puns, playful asides and exclamations, mixed into either plain register.
HUMOR_BODY, HUMOR_OPENERS, HUMOR_CLOSERS = (tuple(_VOCABULARY["humor"][k]) for k in ("body", "openers", "closers"))
HUMOR_P_OPENER, HUMOR_P_CLOSER = 0.7, 0.5


@dataclass(frozen=True)
class _Register:
    leads: tuple[str, ...]
    body: tuple[str, ...]
    openers: tuple[str, ...]
    closers: tuple[str, ...]
    p_opener: float
    p_closer: float
    min_sentences: int
    max_body: int
    extras: tuple[str, ...] = ()  # one of these joins each response's supporting sentences


_REGISTERS: dict[str, _Register] = {
    "elementary": _Register(
        *(_ELEMENTARY[k] for k in ("leads", "body", "openers", "closers")), 0.7, 0.4, 3, 8, _ELEMENTARY["analogies"]
    ),
    "neutral": _Register(*(_NEUTRAL[k] for k in ("leads", "body", "openers", "closers")), 0.5, 0.3, 2, 6),
    "phd": _Register(*(_PHD[k] for k in ("leads", "body", "openers", "closers")), 0.5, 0.4, 2, 6),
}

# Prompts: prefix + question frame (with the topic's subject) + suffix.
PROMPT_FRAMES, PROMPT_PREFIXES, PROMPT_SUFFIXES = (
    tuple(_VOCABULARY["prompts"][k]) for k in ("frames", "prefixes", "suffixes")
)
PROMPT_CAPACITY: int = len(TOPICS) * len(PROMPT_FRAMES) * len(PROMPT_PREFIXES) * len(PROMPT_SUFFIXES)


@dataclass(frozen=True)
class StyleItem:
    """An unlabeled benchmark item: a prompt and two responses differing along one style axis."""

    prompt: str
    axis: str  # "level" or "humor"
    texts: tuple[str, str]  # responses in AXIS_STYLES[axis] order
    register: str | None = None  # shared plain register of a humor-axis pair ("elementary" or "neutral")
    domain: str = ""  # the prompt's topic domain (synthetic_vocabulary.json), e.g. "science"

    def text(self, style: str) -> str:
        """The response written in `style` (one of AXIS_STYLES[self.axis])."""
        return self.texts[AXIS_STYLES[self.axis].index(style)]


def client_id(index: int) -> str:
    """Client id for a 0-based client index: "c000", "c001", ..."""
    return f"c{index:03d}"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _words(text: str) -> int:
    """Word count of single-spaced text (templates never contain double spaces)."""
    return text.count(" ") + 1 if text else 0


def _choice(rng: random.Random, seq: Sequence[str]) -> str:
    """Like `rng.choice`, but cheaper (a benchmark draws millions of these)."""
    return seq[int(rng.random() * len(seq))]


def _pick(rng: random.Random, seq: Sequence[str], k: int) -> list[str]:
    """Like `rng.sample(seq, k)` (k distinct elements in random order), via a partial Fisher-Yates shuffle."""
    pool = list(seq)
    n = len(pool)
    for i in range(k):
        j = i + int(rng.random() * (n - i))
        pool[i], pool[j] = pool[j], pool[i]
    return pool[:k]


def _two(rng: random.Random, seq: Sequence[str]) -> tuple[str, str]:
    """Two distinct elements of `seq`, uniformly over ordered pairs."""
    n = len(seq)
    i = int(rng.random() * n)
    return seq[i], seq[(i + 1 + int(rng.random() * (n - 1))) % n]


def _prompt(index: int) -> tuple[_Topic, str]:
    """Decode a prompt index in [0, PROMPT_CAPACITY) into (topic, prompt text); distinct indices give distinct text."""
    index, t = divmod(index, len(TOPICS))
    index, f = divmod(index, len(PROMPT_FRAMES))
    suffix, p = divmod(index, len(PROMPT_PREFIXES))
    topic = TOPICS[t]
    parts = (PROMPT_PREFIXES[p], PROMPT_FRAMES[f].format(s=topic.subject), PROMPT_SUFFIXES[suffix])
    return topic, " ".join(part for part in parts if part)


def _citation(rng: random.Random) -> tuple[str, str]:
    """A parenthetical and a narrative citation-like phrase, e.g. ("Okafor et al., 2014", "Okafor et al. (2014)")."""
    first, second = _two(rng, SURNAMES)
    year = 1978 + int(rng.random() * 46)
    authors = f"{first} et al." if rng.random() < 0.6 else f"{first} and {second}"
    return f"{authors}, {year}", f"{authors} ({year})"


def _slots(topic: _Topic, rng: random.Random) -> dict[str, str]:
    """Template slot values for one pair: the topic's words (terms in random order) and drawn style material."""
    t1, t2, t3 = (topic.terms[i] for i in _PERMUTATIONS_3[int(rng.random() * 6)])
    j1, j2 = _two(rng, JARGON[topic.domain])
    cite, citer = _citation(rng)
    return {
        "s": topic.subject,
        "S": _cap(topic.subject),
        "g": topic.simple,
        "tg": topic.technical,
        "t1": t1,
        "t2": t2,
        "t3": t3,
        "T1": _cap(t1),
        "T2": _cap(t2),
        "T3": _cap(t3),
        "an": _choice(rng, ANALOGIES[topic.domain]),
        "j1": j1,
        "j2": j2,
        "cite": cite,
        "citer": citer,
    }


def _fill(templates: Sequence[str], slots: dict[str, str], target: int, min_count: int) -> list[str]:
    """Render templates in order until about `target` words.

    The first `min_count` are always kept; later ones are skipped when they would move the word count away
    from the target, and rendering stops once the count is within 2 words of it.
    """
    kept: list[str] = []
    total = 0
    for template in templates:
        if len(kept) >= min_count and abs(total - target) <= 2:
            break
        sentence = template.format_map(slots)
        n = sentence.count(" ") + 1
        if len(kept) >= min_count and abs(total + n - target) >= abs(total - target):
            continue
        kept.append(sentence)
        total += n
    return kept


def _plain_templates(register: _Register, rng: random.Random, k: int) -> list[str]:
    """A lead template carrying the gist, then `k` shuffled supporting ones (one from `register.extras`, if any)."""
    support = _pick(rng, register.body, k - 1 if register.extras else k)
    if register.extras:
        support.insert(int(rng.random() * k), _choice(rng, register.extras))
    return [_choice(rng, register.leads), *support]


def _humor_templates(register: _Register, domain: str, rng: random.Random) -> list[str]:
    """Plain templates of `register` interleaved with jokes: content first, then a joke, then a random mix."""
    content = _plain_templates(register, rng, 6)
    jokes = _pick(rng, HUMOR_BODY, 3)
    jokes.insert(int(rng.random() * 4), _choice(rng, DOMAIN_PUNS[domain]))
    mixed = [content.pop(0), jokes.pop(0)]
    while content or jokes:
        source = jokes if jokes and (not content or rng.random() < 0.5) else content
        mixed.append(source.pop(0))
    return mixed


def _compose(
    style: str, register_name: str, domain: str, slots: dict[str, str], target: int, rng: random.Random
) -> list[str]:
    """The sentences of one response of about `target` words in the plain register `register_name`, with jokes
    if `style` is humorous."""
    register = _REGISTERS[register_name]
    humorous = style == "humorous"
    openers = HUMOR_OPENERS if humorous else register.openers
    closers = HUMOR_CLOSERS if humorous else register.closers
    p_opener, p_closer = (HUMOR_P_OPENER, HUMOR_P_CLOSER) if humorous else (register.p_opener, register.p_closer)
    opener = _choice(rng, openers) if rng.random() < p_opener else ""
    closer = _choice(rng, closers).format_map(slots) if rng.random() < p_closer else ""
    if humorous:
        templates, min_count = _humor_templates(register, domain, rng), 2
    else:
        templates, min_count = _plain_templates(register, rng, register.max_body), register.min_sentences
    body = _fill(templates, slots, target - _words(opener) - _words(closer), min_count)
    return [part for part in (opener, *body, closer) if part]


def _gap(a: str, b: str) -> float:
    na, nb = _words(a), _words(b)
    return abs(na - nb) / max(na, nb) + (1.0 if max(na, nb) > MAX_WORDS else 0.0)


def _make_texts(axis: str, register: str | None, topic: _Topic, rng: random.Random) -> tuple[list[str], list[str]]:
    """The sentences of two length-matched responses in AXIS_STYLES[axis] order.

    A randomly chosen side is written to a random target length and the other side to that side's length,
    so neither style is systematically longer; pairs whose lengths still differ too much are redrawn.
    """
    styles = AXIS_STYLES[axis]
    registers = styles if register is None else (register, register)
    best, best_gap = ([], []), float("inf")
    for _ in range(_ATTEMPTS):
        slots = _slots(topic, rng)
        first = 0 if rng.random() < 0.5 else 1
        texts: list[list[str]] = [[], []]
        target = MIN_TARGET_WORDS + int(rng.random() * (MAX_TARGET_WORDS - MIN_TARGET_WORDS + 1))
        for side in (first, 1 - first):
            texts[side] = _compose(styles[side], registers[side], topic.domain, slots, target, rng)
            target = _words(" ".join(texts[side]))
        gap = _gap(" ".join(texts[0]), " ".join(texts[1]))
        if gap < best_gap:
            best, best_gap = (texts[0], texts[1]), gap
        if gap <= MAX_LENGTH_GAP:
            break
    return best


def exchange_sentences(
    a: Sequence[str], b: Sequence[str], fraction: float, rng: random.Random
) -> tuple[list[str], list[str]]:
    """`a` and `b` with each aligned sentence pair (position j < min length) swapped with probability `fraction`.

    Both responses then carry material of both styles, in expectation (1 - fraction) of their own: the pair's
    style contrast shrinks by a factor 1 - 2 x fraction while topic and length stay as they were.
    """
    a, b = list(a), list(b)
    for j in range(min(len(a), len(b))):
        if rng.random() < fraction:
            a[j], b[j] = b[j], a[j]
    return a, b


def make_items(n: int, seed: int, style_mix: float = 0.0) -> list[StyleItem]:
    """`n` unlabeled items with distinct prompts; axes alternate "level", "humor", ... Deterministic per arguments.

    `style_mix` > 0 exchanges sentences between each item's two responses (`exchange_sentences`, a generator
    seeded from (seed, item)) after the items are drawn, so the same prompts and sentences only change sides.
    """
    if not 0.0 <= style_mix < 0.5:
        raise ConfigError(f"synthetic benchmark: style_mix must be in [0, 0.5), got {style_mix}")
    if n < 1:
        raise ConfigError(f"synthetic benchmark: need at least 1 item, got {n}")
    if n > PROMPT_CAPACITY:
        raise ConfigError(
            f"synthetic benchmark: {n} prompts requested but the generator makes at most {PROMPT_CAPACITY}"
        )
    rng = random.Random(seed)
    items = []
    for i, index in enumerate(rng.sample(range(PROMPT_CAPACITY), n)):
        topic, prompt = _prompt(index)
        axis = AXES[i % len(AXES)]
        register = _choice(rng, HUMOR_REGISTERS) if axis == "humor" else None
        a, b = _make_texts(axis, register, topic, rng)
        if style_mix:
            a, b = exchange_sentences(a, b, style_mix, random.Random(f"style-mix/{seed}/{i}"))
        items.append(StyleItem(prompt, axis, (" ".join(a), " ".join(b)), register, topic.domain))
    return items


def flipped_context(item: StyleItem) -> bool:
    """Whether composed cues reverse a group's preference on `item`: a neutral-register humor pair, or a level
    pair whose topic is academic."""
    if item.axis == "humor":
        return item.register in FLIPPED_REGISTERS
    return item.domain in ACADEMIC_DOMAINS


def label_for_group(item: StyleItem, group: str, cues: str = "plain") -> tuple[str, str]:
    """(chosen, rejected) for `group`: chosen is the response in the group's preferred style on the item's axis;
    with `cues` "composed", the other response where `flipped_context(item)`."""
    if group not in GROUP_PREFERENCES:
        raise ConfigError(f"unknown preference group {group!r}; expected one of {', '.join(GROUPS)}")
    if cues not in CUES:
        raise ConfigError(f"synthetic benchmark: cues must be one of {', '.join(CUES)}, got {cues!r}")
    preferred = GROUP_PREFERENCES[group][item.axis]
    other = next(style for style in AXIS_STYLES[item.axis] if style != preferred)
    if cues == "composed" and flipped_context(item):
        preferred, other = other, preferred
    return item.text(preferred), item.text(other)


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_sizes(group_sizes: Sequence[int], pairs_per_axis: int) -> None:
    if len(group_sizes) != len(GROUPS):
        raise ConfigError(f"synthetic benchmark: group_sizes needs {len(GROUPS)} entries, got {len(group_sizes)}")
    if any(not _is_int(size) or size < 0 for size in group_sizes):
        raise ConfigError(f"synthetic benchmark: group sizes must be non-negative integers, got {list(group_sizes)}")
    if sum(group_sizes) == 0:
        raise ConfigError("synthetic benchmark: all group sizes are zero; need at least one client")
    if not _is_int(pairs_per_axis) or pairs_per_axis < 1:
        raise ConfigError(f"synthetic benchmark: pairs_per_axis must be an integer >= 1, got {pairs_per_axis}")
    needed = sum(group_sizes) * len(AXES) * pairs_per_axis
    if needed > PROMPT_CAPACITY:
        raise ConfigError(
            f"synthetic benchmark: {sum(group_sizes)} clients x {len(AXES)} axes x {pairs_per_axis} pairs needs "
            f"{needed} distinct prompts, but the generator makes at most {PROMPT_CAPACITY}"
        )


def generate_synthetic_with_axes(
    group_sizes: Sequence[int],
    pairs_per_axis: int,
    seed: int,
    label_noise: float = 0.0,
    style_mix: float = 0.0,
    cues: str = "plain",
) -> list[tuple[PreferencePair, str]]:
    """All clients' (pair, axis) tuples, clients ordered by group; deterministic per arguments.

    Client k gets items k*2P .. (k+1)*2P - 1 of `make_items` (P = pairs_per_axis), alternating axes,
    so each client has P "level" and P "humor" pairs; no prompt appears twice in the benchmark.
    `label_noise` > 0 swaps chosen and rejected of exactly round(label_noise * 2P) pairs per client
    (`flip_labels`); 0 leaves the benchmark unchanged. `style_mix` > 0 mixes each pair's styles (`make_items`).
    `cues` "composed" labels by `label_for_group`'s composed rule; the items are the same as with "plain".
    """
    _check_sizes(group_sizes, pairs_per_axis)
    per_client = len(AXES) * pairs_per_axis
    items = make_items(sum(group_sizes) * per_client, seed, style_mix)
    groups = [group for group, size in zip(GROUPS, group_sizes, strict=True) for _ in range(size)]
    out = []
    for k, group in enumerate(groups):
        for item in items[k * per_client : (k + 1) * per_client]:
            chosen, rejected = label_for_group(item, group, cues)
            out.append((PreferencePair(item.prompt, chosen, rejected, client_id(k), group), item.axis))
    if label_noise:
        noisy = flip_labels([pair for pair, _ in out], label_noise, seed)
        out = [(pair, axis) for pair, (_, axis) in zip(noisy, out, strict=True)]
    return out


def flip_labels(pairs: Sequence[PreferencePair], fraction: float, seed: int) -> list[PreferencePair]:
    """`pairs` with exactly round(fraction * n_c) of each client's n_c pairs swapped (chosen <-> rejected).

    Which pairs flip is drawn per client by a generator seeded from (seed, client), independently of the
    other clients; pairs keep their order. fraction 0 returns the pairs unchanged. Applied before the
    train/val/test split, so every split carries about the same fraction of noisy labels.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ConfigError(f"label noise must be in [0, 1], got {fraction}")
    if fraction == 0.0:
        return list(pairs)
    positions: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        positions.setdefault(pair.client, []).append(i)
    flipped: set[int] = set()
    for client, idx in positions.items():
        rng = random.Random(f"label-noise/{seed}/{client}")
        flipped.update(rng.sample(idx, round(fraction * len(idx))))
    return [
        PreferencePair(p.prompt, p.rejected, p.chosen, p.client, p.group) if i in flipped else p
        for i, p in enumerate(pairs)
    ]


def generate_synthetic(group_sizes: Sequence[int], pairs_per_axis: int, seed: int) -> list[PreferencePair]:
    """All clients' pairs; deterministic per (group_sizes, pairs_per_axis, seed).

    `group_sizes` gives the number of clients in G1..G4 (clients are numbered by group: with [10, 10, 10, 10],
    c000-c009 are G1, c010-c019 G2, ...). Each client gets `pairs_per_axis` pairs on each style axis.
    """
    return [pair for pair, _ in generate_synthetic_with_axes(group_sizes, pairs_per_axis, seed)]
