"""How often FedVPA-GP's balanced k-means put a client on its type's majority prototype, per run.

.venv/bin/python scripts/prototype_agreement.py runs/vpa_long_s0 runs/vpa_long_s1 runs/vpa_long_s2
"""

from __future__ import annotations

import json
import sys
import tomllib
from collections import Counter
from pathlib import Path

from fedpref.reports.run_groups import true_groups


def agreement(run: Path) -> float:
    """Fraction of (round, client) prototype indices equal to the most common index of the client's type."""
    group_of = true_groups(tomllib.loads((run / "config.toml").read_text()))
    records = [json.loads(line) for line in (run / "rounds.jsonl").read_text().splitlines()]
    counts = Counter(
        (group_of[c], k) for r in records for c, k in (r.get("prototype_index") or {}).items() if k is not None
    )
    majority = {g: max(n for (h, _), n in counts.items() if h == g) for g, _ in counts}
    return sum(majority.values()) / sum(counts.values())


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(f"{path}: {100 * agreement(Path(path)):.0f}% on the type's majority prototype")
