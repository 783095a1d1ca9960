"""HH-RLHF as a Stage 2 task (FedVPA-GP paper Sec. 5.1): helpful and harmless clients hold their own pairs for
Stage 1; conversations no client holds are the server's DPO prompts and the win-rate prompts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from fedpref.data.hh import Triple, load_hh_rlhf
from fedpref.data.hh_partition import partition_hh
from fedpref.data.pairs import PreferencePair
from fedpref.errors import DataError
from fedpref.stage2.task import Stage2Task

HH_TYPES = ("helpful", "harmless")  # partition_hh's groups, helpful clients first (c00, c01, ...)
HH_SUBSETS = ("helpful-base", "harmless-base")
# Where each type's held-out judge pairs come from: helpfulness from the two helpful subsets no client is dealt,
# harmlessness from the harmless-base pairs no client was dealt (there is no second harmless subset).
JUDGE_SUBSETS = {"helpful": ("helpful-online", "helpful-rejection-sampled"), "harmless": ("harmless-base",)}


def held_out_prompts(triples: dict[str, Sequence[Triple]], dealt: Sequence[PreferencePair], seed: int) -> list[str]:
    """Every distinct prompt of `triples` that no client was dealt, in a `seed`-shuffled order."""
    taken = {p.prompt for p in dealt}
    free = list(dict.fromkeys(prompt for ts in triples.values() for prompt, _, _ in ts if prompt not in taken))
    order = np.random.default_rng(seed).permutation(len(free))
    return [free[i] for i in order]


def hh_task(
    path: str | Path,
    clients_per_type: int,
    pairs_per_client: int,
    eval_prompts: int,
    seed: int,
    judge_pairs: tuple[int, int] = (0, 0),
) -> Stage2Task:
    """`clients_per_type` helpful clients dealt helpful-base pairs and as many harmless clients harmless-base
    pairs (`pairs_per_client` each, disjoint); `eval_prompts` held-out conversations for the win rates and the
    rest of them for the server's DPO. `judge_pairs` = (train, test) labelled pairs per type for the held-out
    judges (`JUDGE_SUBSETS`; (0, 0): none)."""
    wanted = HH_SUBSETS + (JUDGE_SUBSETS["helpful"] if any(judge_pairs) else ())
    triples = load_hh_rlhf(path, subsets=wanted)
    pairs = partition_hh(
        {name: triples[name] for name in HH_SUBSETS},
        num_clients=2 * clients_per_type,
        scheme="by_subset",
        helpful_fraction=0.5,
        pairs_per_client=pairs_per_client,
        seed=seed,
    )
    free = held_out_prompts({name: triples[name] for name in HH_SUBSETS}, pairs, seed)
    if len(free) <= eval_prompts:
        raise DataError(
            f"{path}: {len(free)} conversation(s) left after dealing {pairs_per_client} pairs to each of "
            f"{2 * clients_per_type} clients; need more than task.eval_prompts = {eval_prompts}"
        )
    judges = (
        held_out_judge_pairs(triples, pairs, set(free[:eval_prompts]), judge_pairs, seed) if any(judge_pairs) else {}
    )
    return Stage2Task(
        types=HH_TYPES,
        client_types={p.client: p.group for p in pairs},
        stage1_pairs=pairs,
        eval_prompts=free[:eval_prompts],
        pool=free[eval_prompts:],
        chat_focus={t: t for t in HH_TYPES},  # "more helpful" / "more harmless" (App. C.3.1's two win rates)
        judge_pairs=judges,
    )


def held_out_judge_pairs(
    triples: dict[str, Sequence[Triple]],
    dealt: Sequence[PreferencePair],
    eval_prompts: set[str],
    sizes: tuple[int, int],
    seed: int,
) -> dict[str, tuple[list[PreferencePair], list[PreferencePair]]]:
    """Per type, (train, test) pairs of its `JUDGE_SUBSETS` whose prompt no client was dealt and no win rate
    asks about, drawn in a `seed`-shuffled order."""
    taken = {p.prompt for p in dealt} | eval_prompts
    out = {}
    for group, subsets in JUDGE_SUBSETS.items():
        missing = [name for name in subsets if name not in triples]
        if missing:
            raise DataError(f"held-out {group} judge pairs need HH-RLHF subset(s) {', '.join(missing)}")
        pool = [t for name in subsets for t in triples[name] if t[0] not in taken]
        train, test = sizes
        if len(pool) < train + test:
            raise DataError(f"{len(pool)} held-out {group} pair(s); the judges ask for {train} + {test}")
        order = np.random.default_rng(seed + 77).permutation(len(pool))[: train + test]
        chosen = [PreferencePair(*pool[i], client=f"judge-{group}", group=group) for i in order]
        out[group] = (chosen[:train], chosen[train:])
    return out
