"""Would a preference that needs composition take from a lone client what its group could give back? A probe.

Humor-axis items of the synthetic benchmark (`make_items`, seed 0), 16 clients x 60 pairs, labelled by two rules:
  plain     the humorous response is chosen (what groups G1 and G3 want today);
  composed  the humorous response is chosen when the pair's shared register is elementary, the plain one when it
            is neutral (G1 under `data.cues = "composed"`, humor axis): the cue is humor *with* a context both
            responses share, so chosen-minus-rejected features cancel the context for an additive encoder.
Features are the frozen reward model's pooled embeddings (`benchmark_difficulty.encode_frozen`), chosen minus
rejected; probes are `benchmark_difficulty.probe_accuracy` (antisymmetric L2 logistic regression). Each client's
first 40 pairs train, its last 20 test. Printed per rule: a probe on one client's 40 pairs (mean [min-max] over
clients), on 4 clients' pooled 160 (the size of a reduced config's group; mean over the 4 groups) and on all 16
clients' 640.

    .venv/bin/python scripts/composition_probe.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark_difficulty import encode_frozen, probe_accuracy  # noqa: E402

from fedpref.config import ExperimentConfig  # noqa: E402
from fedpref.data.pairs import PreferencePair  # noqa: E402
from fedpref.data.synthetic import StyleItem, label_for_group, make_items  # noqa: E402
from fedpref.models.factory import build_reward_model  # noqa: E402

CLIENTS, PAIRS, TRAIN, GROUP = 16, 60, 40, 4


def labelled(item: StyleItem, rule: str) -> PreferencePair:
    """G1's label (humorous preferred), under plain or composed cues (`label_for_group`)."""
    chosen, rejected = label_for_group(item, "G1", rule)
    return PreferencePair(item.prompt, chosen, rejected, "c")


def pooled_probe(clients: list[np.ndarray]) -> float:
    return probe_accuracy(np.vstack([c[:TRAIN] for c in clients]), np.vstack([c[TRAIN:] for c in clients]))


def main() -> None:
    items = [it for it in make_items(2 * CLIENTS * PAIRS, seed=0) if it.axis == "humor"][: CLIENTS * PAIRS]
    cfg = ExperimentConfig()
    cfg.lora.top_layers = 2
    model = build_reward_model(cfg)
    for rule in ("plain", "composed"):
        features = encode_frozen(model, [labelled(it, rule) for it in items])
        x = features[0::2] - features[1::2]  # (N, H) chosen minus rejected
        clients = [x[k * PAIRS : (k + 1) * PAIRS] for k in range(CLIENTS)]
        one = [probe_accuracy(c[:TRAIN], c[TRAIN:]) for c in clients]
        groups = [pooled_probe(clients[g : g + GROUP]) for g in range(0, CLIENTS, GROUP)]
        print(
            f"{rule:<9} one client {np.mean(one):.1f} [{min(one):.1f}-{max(one):.1f}]   "
            f"{GROUP} clients {np.mean(groups):.1f}   {CLIENTS} clients {pooled_probe(clients):.1f}"
        )


if __name__ == "__main__":
    main()
