"""Tests for the offline synthetic style benchmark generator."""

import random
import re
import statistics
from collections import Counter

import pytest

from fedpref.config import SYNTHETIC_AXES, SYNTHETIC_CUES
from fedpref.data.pairs import PreferencePair
from fedpref.data.synthetic import (
    AXES,
    AXIS_STYLES,
    CUES,
    GROUP_PREFERENCES,
    GROUPS,
    PROMPT_CAPACITY,
    StyleItem,
    _prompt,
    client_id,
    exchange_sentences,
    flip_labels,
    flipped_context,
    generate_synthetic,
    generate_synthetic_with_axes,
    label_for_group,
    make_items,
)
from fedpref.errors import ConfigError


@pytest.fixture(scope="module")
def items():
    """2000 unlabeled items: 1000 per axis."""
    return make_items(2000, seed=11)


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z']+", text.lower()))


def n_words(text: str) -> int:
    return len(text.split())


def by_axis(items, axis):
    return [item for item in items if item.axis == axis]


def test_group_preferences_cover_every_group_and_axis():
    assert set(GROUP_PREFERENCES) == set(GROUPS)
    for prefs in GROUP_PREFERENCES.values():
        assert set(prefs) == set(AXES)
        for axis, style in prefs.items():
            assert style in AXIS_STYLES[axis]


def test_same_seed_same_benchmark_different_seed_different_texts():
    first = generate_synthetic([1, 1, 1, 1], 5, seed=3)
    assert first == generate_synthetic([1, 1, 1, 1], 5, seed=3)
    other = generate_synthetic([1, 1, 1, 1], 5, seed=4)
    texts = {p.chosen for p in first} | {p.rejected for p in first}
    other_texts = {p.chosen for p in other} | {p.rejected for p in other}
    assert texts != other_texts
    assert [p.prompt for p in first] != [p.prompt for p in other]


def test_client_ids_are_zero_padded():
    assert client_id(0) == "c000"
    assert client_id(7) == "c007"
    assert client_id(123) == "c123"


def test_clients_are_numbered_by_group():
    pairs_per_axis = 4
    rows = generate_synthetic_with_axes([2, 1, 0, 3], pairs_per_axis, seed=0)
    assert all(isinstance(pair, PreferencePair) for pair, _ in rows)
    group_of = {pair.client: pair.group for pair, _ in rows}
    assert group_of == {"c000": "G1", "c001": "G1", "c002": "G2", "c003": "G4", "c004": "G4", "c005": "G4"}
    per_client = Counter(pair.client for pair, _ in rows)
    assert set(per_client.values()) == {2 * pairs_per_axis}
    per_client_axis = Counter((pair.client, axis) for pair, axis in rows)
    assert len(per_client_axis) == 6 * len(AXES)
    assert set(per_client_axis.values()) == {pairs_per_axis}


def test_generate_synthetic_drops_axes():
    rows = generate_synthetic_with_axes([1, 0, 1, 0], 3, seed=5)
    assert generate_synthetic([1, 0, 1, 0], 3, seed=5) == [pair for pair, _ in rows]


def test_chosen_is_the_groups_preferred_style(items):
    for item in items[:200]:
        for group in GROUPS:
            chosen, rejected = label_for_group(item, group)
            assert chosen == item.text(GROUP_PREFERENCES[group][item.axis])
            assert chosen != rejected
            assert {chosen, rejected} == set(item.texts)


def test_groups_disagree_exactly_where_they_should(items):
    def agree(g, h, item):
        return label_for_group(item, g) == label_for_group(item, h)

    for item in items:
        level = item.axis == "level"
        assert label_for_group(item, "G1") == label_for_group(item, "G4")[::-1]
        assert label_for_group(item, "G2") == label_for_group(item, "G3")[::-1]
        assert agree("G1", "G2", item) == level
        assert agree("G1", "G3", item) == (not level)
        assert agree("G3", "G4", item) == level
        assert agree("G2", "G4", item) == (not level)


def test_axes_alternate_and_humor_pairs_share_a_register(items):
    assert Counter(item.axis for item in items) == {"level": 1000, "humor": 1000}
    assert {item.register for item in by_axis(items, "level")} == {None}
    assert Counter(item.register for item in by_axis(items, "humor")).keys() == {"elementary", "neutral"}


def test_styles_are_distinct_and_varied(items):
    for axis in AXES:
        for style in AXIS_STYLES[axis]:
            texts = [item.text(style) for item in by_axis(items, axis)]
            assert len(texts) == 1000
            assert len(set(texts)) >= 900, style
            assert len(set().union(*map(words, texts))) > 300, style


def test_style_markers_differ(items):
    level = by_axis(items, "level")
    mean_word_len = {
        style: statistics.mean(len(w) for item in level for w in item.text(style).split())
        for style in AXIS_STYLES["level"]
    }
    assert mean_word_len["phd"] > mean_word_len["elementary"] + 1.0
    humor = by_axis(items, "humor")
    bangs = {style: statistics.mean(item.text(style).count("!") for item in humor) for style in AXIS_STYLES["humor"]}
    assert bangs["humorous"] > bangs["non-humorous"] + 1.0


def test_humor_pairs_share_topic_words(items):
    overlaps = [
        len(words(item.text("humorous")) & words(item.text("non-humorous"))) / len(words(item.text("non-humorous")))
        for item in by_axis(items, "humor")
    ]
    assert statistics.mean(overlaps) > 0.35
    assert min(overlaps) > 0.15


def test_lengths_are_matched_and_not_a_cue(items):
    for item in items:
        a, b = (n_words(text) for text in item.texts)
        assert 20 <= min(a, b) and max(a, b) <= 65
        assert abs(a - b) <= 0.25 * max(a, b)
    for group in GROUPS:
        diffs = [n_words(c) - n_words(r) for c, r in (label_for_group(item, group) for item in items)]
        assert abs(statistics.mean(diffs)) < 0.25 * statistics.stdev(diffs), group


def test_no_prompt_repeats_across_the_benchmark():
    pairs = generate_synthetic([3, 3, 3, 3], 100, seed=1)
    prompts = [p.prompt for p in pairs]
    assert len(prompts) == 2400
    assert len(set(prompts)) == len(prompts)


def test_every_prompt_index_gives_a_distinct_prompt():
    prompts = {_prompt(i)[1] for i in range(PROMPT_CAPACITY)}
    assert len(prompts) == PROMPT_CAPACITY
    assert PROMPT_CAPACITY >= 40 * 2 * 650


def test_make_items_capacity_and_minimum():
    with pytest.raises(ConfigError, match="at most"):
        make_items(PROMPT_CAPACITY + 1, seed=0)
    with pytest.raises(ConfigError):
        make_items(0, seed=0)


@pytest.mark.parametrize(
    ("group_sizes", "pairs_per_axis", "message"),
    [
        ([1, 1, 1], 1, "4 entries"),
        ([1, 1, 1, 1, 1], 1, "4 entries"),
        ([1, -1, 1, 1], 1, "non-negative"),
        ([1, 1.5, 1, 1], 1, "non-negative integers"),
        ([0, 0, 0, 0], 1, "all group sizes are zero"),
        ([1, 1, 1, 1], 0, "pairs_per_axis"),
        ([1, 1, 1, 1], -3, "pairs_per_axis"),
        ([100, 100, 100, 100], PROMPT_CAPACITY, "distinct prompts"),
    ],
)
def test_bad_arguments_raise_config_error(group_sizes, pairs_per_axis, message):
    with pytest.raises(ConfigError, match=message):
        generate_synthetic(group_sizes, pairs_per_axis, seed=0)


def test_unknown_group_raises_config_error(items):
    with pytest.raises(ConfigError, match="G5"):
        label_for_group(items[0], "G5")


def _toy_pairs(clients: dict[str, int]) -> list[PreferencePair]:
    return [
        PreferencePair(f"p{c}{i}", f"good{c}{i}", f"bad{c}{i}", c, "G1") for c, n in clients.items() for i in range(n)
    ]


def test_flip_labels_swaps_exactly_round_fraction_per_client():
    pairs = _toy_pairs({"a": 8, "b": 8, "c": 6})
    noisy = flip_labels(pairs, 0.25, seed=3)
    assert [(p.prompt, p.client, p.group) for p in noisy] == [(p.prompt, p.client, p.group) for p in pairs]
    flipped = Counter(p.client for p in noisy if p.chosen.startswith("bad"))
    assert flipped == {"a": 2, "b": 2, "c": 2}  # round(0.25 * 8) = 2, round(0.25 * 6) = round(1.5) = 2
    for old, new in zip(pairs, noisy, strict=True):
        assert (new.chosen, new.rejected) in {(old.chosen, old.rejected), (old.rejected, old.chosen)}
    assert flip_labels(pairs, 0.25, seed=3) == noisy  # seeded
    assert flip_labels(pairs, 0.0, seed=3) == pairs
    with pytest.raises(ConfigError):
        flip_labels(pairs, 1.5, seed=3)


def test_label_noise_zero_leaves_the_benchmark_identical_and_noise_flips_per_client():
    clean = generate_synthetic_with_axes([1, 1, 1, 1], 10, seed=5)
    assert generate_synthetic_with_axes([1, 1, 1, 1], 10, seed=5, label_noise=0.0) == clean
    noisy = generate_synthetic_with_axes([1, 1, 1, 1], 10, seed=5, label_noise=0.1)
    assert [axis for _, axis in noisy] == [axis for _, axis in clean]
    swapped = Counter(a.client for (a, _), (b, _) in zip(clean, noisy, strict=True) if a != b)
    assert swapped == {client_id(k): 2 for k in range(4)}  # round(0.1 * 20) per client


def test_exchange_sentences_swaps_aligned_positions_only():
    a, b = ["a0", "a1", "a2"], ["b0", "b1"]
    assert exchange_sentences(a, b, 0.0, random.Random(0)) == (a, b)
    assert exchange_sentences(a, b, 1.0 - 1e-12, random.Random(0)) == (["b0", "b1", "a2"], ["a0", "a1"])


def test_style_mix_moves_sentences_between_the_responses_of_a_pair():
    clean = make_items(200, seed=4)
    assert make_items(200, seed=4, style_mix=0.0) == clean
    mixed = make_items(200, seed=4, style_mix=0.3)
    assert [(i.prompt, i.axis, i.register) for i in mixed] == [(i.prompt, i.axis, i.register) for i in clean]
    # the pair's words are the same, only their side changes; some pairs changed, some did not
    assert all(Counter(" ".join(m.texts).split()) == Counter(" ".join(c.texts).split()) for m, c in zip(mixed, clean))
    changed = sum(m.texts != c.texts for m, c in zip(mixed, clean))
    assert 0 < changed < 200
    with pytest.raises(ConfigError, match="style_mix"):
        make_items(10, seed=4, style_mix=0.5)


def test_composed_cues_flip_the_preference_in_the_flipped_context_only(items):
    for item in items[:200]:
        for group in GROUPS:
            plain = label_for_group(item, group)
            composed = label_for_group(item, group, "composed")
            assert composed == (plain[::-1] if flipped_context(item) else plain)


def test_flipped_contexts_are_the_neutral_register_and_academic_topics():
    def item(axis, register, domain):
        return StyleItem("p", axis, ("a", "b"), register, domain)

    assert flipped_context(item("humor", "neutral", "science"))
    assert not flipped_context(item("humor", "elementary", "science"))
    assert flipped_context(item("level", None, "science"))
    assert not flipped_context(item("level", None, "cooking"))
    # G1 prefers the humorous and the elementary response; composed cues reverse it in those contexts
    assert label_for_group(item("humor", "neutral", "cooking"), "G1", "composed") == ("b", "a")
    assert label_for_group(item("level", None, "cooking"), "G1", "composed") == ("a", "b")


def test_composed_cues_flip_about_half_of_each_axis(items):
    for axis in AXES:
        share = statistics.mean(flipped_context(item) for item in by_axis(items, axis))
        assert 0.35 < share < 0.65, (axis, share)


def test_composed_cues_keep_the_items_and_reject_unknown_cues():
    plain = generate_synthetic_with_axes([1, 1, 1, 1], 10, seed=5)
    composed = generate_synthetic_with_axes([1, 1, 1, 1], 10, seed=5, cues="composed")
    assert [(p.prompt, {p.chosen, p.rejected}, axis) for p, axis in plain] == [
        (p.prompt, {p.chosen, p.rejected}, axis) for p, axis in composed
    ]
    assert 0 < sum(a != b for (a, _), (b, _) in zip(plain, composed, strict=True)) < len(plain)
    with pytest.raises(ConfigError, match="cues"):
        generate_synthetic_with_axes([1, 1, 1, 1], 10, seed=5, cues="mixed")


def test_the_config_knows_the_generators_axes_and_cues():
    assert (SYNTHETIC_AXES, SYNTHETIC_CUES) == (AXES, CUES)
