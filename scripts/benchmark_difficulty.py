"""How hard is a benchmark's personalization regime? Linear probes on what the data alone allow.

Loads a config exactly as an experiment does (`load_config`, `load_pairs`, `split_clients`, the unseen-client
pick), so it sees the same clients and the same train/test splits, and encodes every (prompt, response) the way
the scalar reward model does (`ScalarRewardModel.encode`, then `pooled`: the mean-pooled last hidden state
the reward head reads; LoRA starts at zero, so this is the frozen backbone). A pair's feature is
x = f(chosen) - f(rejected). With an A/B selector (`model.head = "selector"` on a causal LM) the feature is the final
hidden state h at the answer position of the pair's comparison prompt (App. D.1.1 of the FedVPA-GP paper, chosen at A
or B by the model's own coin flip), signed x = h when the chosen response is A and x = -h when it is B: the
selector's A-minus-B logit is (w_A - w_B).h, linear in h, so the probe can fit any bias-free linear reader of the
frozen LM's answer position. A probe is an L2 logistic regression (sklearn, C = 1.0 fixed, no CV, no intercept)
fitted on (x, 1) and (-x, 0) of the training pairs, so it is antisymmetric: it prefers the chosen response iff
w.x > 0 (a tie, w.x == 0, counts as half right). Frozen features are divided by their training standard deviation first.

Columns, per test client (its test split):
  one-client (frozen)    a probe on that client's own training pairs alone (the Local method's ceiling, linearly)
  whole-group (frozen)   a probe on the training pairs of all seen clients of the client's true group
  all-clients (frozen)   a probe on every seen client's training pairs, groups mixed (one model for everyone)
  one-client (BoW)       CountVectorizer(binary) of prompt + response, chosen minus rejected, own training pairs

Rows: each true group (mean over its clients; one-client columns also give [min-max]) and 'all' (every client).
A one-client probe near 100% means a single client's ~60 pairs already pin down its preference: the
personalization regime is too easy to separate methods. Unseen clients (data.unseen_clients) are probed on their own
data but left out of the whole-group and all-clients training sets, as in an experiment.

.venv/bin/python scripts/benchmark_difficulty.py configs/quick/quick.toml
.venv/bin/python scripts/benchmark_difficulty.py configs/fedgd/tldr_smollm2.toml --set data.path=FOLDER --threads 1
.venv/bin/python scripts/benchmark_difficulty.py configs/fedgd/reduced_balanced.toml --set data.pairs_per_axis=40 \
    --json difficulty.json --md difficulty.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

COLUMNS = {
    "one_client_frozen": "one-client (frozen)",
    "whole_group_frozen": "whole-group (frozen)",
    "all_clients_frozen": "all-clients (frozen)",
    "one_client_bow": "one-client (BoW)",
}
SPREAD = ("one_client_frozen", "one_client_bow")  # columns shown with [min-max] over clients
NO_GROUP = "(none)"


def probe_accuracy(train_x, test_x, C: float = 1.0, scale: bool = True) -> float:
    """Percent of test pairs whose chosen response the probe prefers; rows are chosen-minus-rejected features.

    Fits an intercept-free L2 logistic regression on (x, 1) and (-x, 0) so that p(-x) = 1 - p(x); with `scale`,
    each feature is divided by its training standard deviation (features constant in training are left as is).
    Dense arrays or scipy sparse matrices. A test pair with w.x == 0 counts as half right (a coin flip).
    """
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression

    stack = sp.vstack if sp.issparse(train_x) else np.vstack
    x = stack([train_x, -train_x])
    y = np.r_[np.ones(train_x.shape[0]), np.zeros(train_x.shape[0])]
    if scale:
        x2 = x.multiply(x) if sp.issparse(x) else x * x
        std = np.sqrt(np.asarray(x2.mean(axis=0)).ravel())  # the mean of the symmetric set is 0
        std[std == 0] = 1.0
        inv = sp.diags(1.0 / std) if sp.issparse(x) else 1.0 / std
        x, test_x = (x @ inv, test_x @ inv) if sp.issparse(x) else (x * inv, test_x * inv)
    model = LogisticRegression(C=C, fit_intercept=False, max_iter=5000)
    model.fit(x, y)
    score = np.asarray(test_x @ model.coef_.ravel()).ravel()
    return float(100.0 * np.mean((score > 0) + 0.5 * (score == 0)))


def pair_texts(pair) -> list[tuple[str, str]]:
    """The (prompt, response) inputs of a pair, chosen first: the scalar reward model's `encode` layout."""
    return [(pair.prompt, pair.chosen), (pair.prompt, pair.rejected)]


def report_progress(before: int, done: int, total: int, start: float) -> None:
    """A progress line on stderr: redrawn on a terminal, every tenth of the way in a log file."""
    line = f"encoding {done}/{total} sequences ({time.monotonic() - start:.0f}s)"
    if sys.stderr.isatty():
        print("\r" + line, end="" if done < total else "\n", file=sys.stderr, flush=True)
    elif done == total or 10 * done // total > 10 * before // total:
        print(line, file=sys.stderr, flush=True)


def encode_frozen(model, pairs: list, chunk: int = 64) -> np.ndarray:
    """(N, H) chosen-minus-rejected of what the untrained scalar reward model's head reads for each response
    (`ScalarRewardModel.encode` and `pooled`; LoRA starts at zero, so this is the frozen encoder)."""
    import torch

    seqs = model.encode(pairs).seqs
    model.eval()  # no dropout: the features a trained head would be evaluated on
    out, start = [], time.monotonic()
    with torch.inference_mode():
        for b in range(0, len(seqs), chunk):
            out.append(model.pooled(seqs[b : b + chunk]).double().cpu().numpy())
            report_progress(b, min(b + chunk, len(seqs)), len(seqs), start)
    pooled = np.concatenate(out)  # (2N, H): chosen at 2i, rejected at 2i + 1
    return pooled[0::2] - pooled[1::2]


def encode_selector(model, pairs: list, chunk: int = 8) -> np.ndarray:
    """(N, H) the untrained A/B selector's final hidden state at the answer position of each pair's comparison
    prompt, negated where the chosen response is B, so that x.w > 0 means "prefers the chosen response"."""
    import torch

    enc = model.encode(pairs)  # as encode_frozen: one encode call, so one frozen-prefix pass (and cache entry)
    sign = enc.chosen_is_a.double() * 2 - 1  # (N,): +1 chosen at A, -1 at B
    model.eval()
    out, start = [], time.monotonic()
    with torch.inference_mode():
        for b in range(0, len(pairs), chunk):
            hidden, mask = model.final_hidden(enc.seqs[b : b + chunk])  # (B, L, H), (B, L)
            last = hidden[torch.arange(len(mask), device=hidden.device), mask.sum(1) - 1]  # (B, H)
            out.append((last.double().cpu() * sign[b : b + chunk, None]).numpy())
            report_progress(b, min(b + chunk, len(pairs)), len(pairs), start)
    return np.concatenate(out)


def load_clients(cfg):
    """(splits, unseen ids) exactly as `build_setup` makes them, without building the reward model."""
    from fedpref.data.splits import split_clients
    from fedpref.experiments.setup import load_pairs, pick_unseen

    splits = split_clients(load_pairs(cfg), cfg.data.val_pairs, cfg.data.test_pairs, cfg.seed)
    unseen = pick_unseen(splits, cfg.data.unseen_clients, cfg.seed) if cfg.data.unseen_clients else []
    return splits, unseen


def measure(cfg, threads: int | None = None) -> dict:
    """Every client's probe accuracies (percent) plus group and overall summaries; see the module docstring."""
    import torch
    from sklearn.feature_extraction.text import CountVectorizer

    from fedpref.errors import ConfigError
    from fedpref.models.factory import build_reward_model
    from fedpref.models.scalar_reward import ScalarRewardModel
    from fedpref.models.selector_reward import SelectorRewardModel

    if threads:
        torch.set_num_threads(threads)
    splits, unseen = load_clients(cfg)
    model = build_reward_model(cfg)
    if isinstance(model, ScalarRewardModel):
        features = encode_frozen
    elif isinstance(model, SelectorRewardModel):
        features = encode_selector
    else:
        raise ConfigError(
            f"model.backbone '{cfg.model.backbone}' with model.head '{cfg.model.head}': this probe reads an encoder's "
            "scalar-head features or a causal LM's A/B selector (model.head = 'selector'), not a causal scalar head"
        )

    # Each split as a contiguous block of pairs: rows 2i (chosen) and 2i + 1 (rejected) of the text list.
    texts, ordered, where = [], [], {}
    for s in splits:
        for part in ("train", "test"):
            pairs = getattr(s, part)
            where[s.client_id, part] = (len(texts) // 2, len(texts) // 2 + len(pairs))
            texts += [t for p in pairs for t in pair_texts(p)]
            ordered += pairs
    frozen = features(model, ordered)
    bow_vec = CountVectorizer(binary=True).fit([f"{a} {b}" for a, b in texts])
    bow = bow_vec.transform([f"{a} {b}" for a, b in texts[0::2]]) - bow_vec.transform(
        [f"{a} {b}" for a, b in texts[1::2]]
    )

    def rows(x, ids: Sequence[str], part: str):
        blocks = [where[c, part] for c in ids]
        if hasattr(x, "tocsr"):
            import scipy.sparse as sp

            return sp.vstack([x[a:b] for a, b in blocks]).tocsr()
        return np.concatenate([x[a:b] for a, b in blocks])

    group_of = {s.client_id: s.group or NO_GROUP for s in splits}
    seen = [s.client_id for s in splits if s.client_id not in set(unseen)]
    group_models: dict[str, list[str]] = {}
    for c in seen:
        group_models.setdefault(group_of[c], []).append(c)
    clients = {}
    for s in splits:
        c = s.client_id
        mates = group_models.get(group_of[c], [])
        clients[c] = {
            "group": group_of[c],
            "unseen": c in unseen,
            "train_pairs": len(s.train),
            "test_pairs": len(s.test),
            "one_client_frozen": probe_accuracy(rows(frozen, [c], "train"), rows(frozen, [c], "test")),
            "whole_group_frozen": probe_accuracy(rows(frozen, mates, "train"), rows(frozen, [c], "test"))
            if mates
            else None,
            "all_clients_frozen": probe_accuracy(rows(frozen, seen, "train"), rows(frozen, [c], "test")),
            "one_client_bow": probe_accuracy(rows(bow, [c], "train"), rows(bow, [c], "test"), scale=False),
        }
        print(f"probed {c} ({group_of[c]})", file=sys.stderr, flush=True)
    groups = {g: summarize([v for v in clients.values() if v["group"] == g]) for g in sorted(set(group_of.values()))}
    return {
        "config": cfg.name,
        "seed": cfg.seed,
        "backbone": cfg.model.backbone,
        "head": cfg.model.head,
        "max_length": cfg.data.max_length,
        "probe": {
            "model": "LogisticRegression",
            "C": 1.0,
            "fit_intercept": False,
            "frozen_features": "std-scaled",
            "feature": features.__name__,
        },
        "unseen": list(unseen),
        "groups": groups,
        "all": summarize(list(clients.values())),
        "clients": clients,
    }


def summarize(rows: list[dict]) -> dict:
    out = {
        "clients": len(rows),
        "train_pairs_per_client": statistics.fmean(r["train_pairs"] for r in rows),
        "test_pairs_per_client": statistics.fmean(r["test_pairs"] for r in rows),
    }
    for key in COLUMNS:
        values = [r[key] for r in rows if r[key] is not None]
        out[key] = (
            {"mean": statistics.fmean(values), "min": min(values), "max": max(values)}
            if values
            else {"mean": None, "min": None, "max": None}
        )
    return out


def markdown(result: dict) -> str:
    """The table: one row per group, then 'all'."""

    def cell(stats: dict, spread: bool) -> str:
        if stats["mean"] is None:
            return "-"
        text = f"{stats['mean']:.1f}"
        return f"{text} [{stats['min']:.1f}-{stats['max']:.1f}]" if spread else text

    head = ["group", "clients", "train pairs/client", "test pairs/client"] + list(COLUMNS.values())
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    groups = {} if set(result["groups"]) == {NO_GROUP} else result["groups"]  # one group: the same row as "all"
    for name, row in [*groups.items(), ("all", result["all"])]:
        cells = [
            name,
            str(row["clients"]),
            f"{row['train_pairs_per_client']:g}",
            f"{row['test_pairs_per_client']:g}",
        ]
        cells += [cell(row[key], key in SPREAD) for key in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    if result["unseen"]:
        names = ", ".join(result["unseen"])
        lines.append(f"\nUnseen clients (tested everywhere, in no shared training set): {names}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict:
    from fedpref.config import load_config
    from fedpref.errors import FedprefError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path, help="experiment TOML (configs/*.toml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", type=Path, help="write every number (per client, per group, all) here")
    parser.add_argument("--md", type=Path, help="also write the Markdown table here")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's choice)")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config, args.overrides)
        result = measure(cfg, args.threads)
    except FedprefError as e:
        parser.exit(2, f"error: {e}\n")
    result["config_path"] = str(args.config)
    result["overrides"] = list(args.overrides)
    table = markdown(result)
    print(table)
    if args.md:
        args.md.write_text(table + "\n", encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
