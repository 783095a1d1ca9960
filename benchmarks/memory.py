"""Peak memory of one FedAvg round with 40, 400 and 4,000 clients, each count in a fresh process.

Clients are encoded on demand and at most `--resident` are kept (OnDemandClients), so memory should not
grow with the clients that are not training; only the raw pairs of every client stay in memory.

    .venv/bin/python benchmarks/memory.py [--counts 40 400 4000] [--out benchmarks/results/memory.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_round(num_clients: int, resident: int) -> dict:
    """Build `num_clients` synthetic clients and run one FedAvg round of 5 clients; report peak RSS."""
    from fedpref.algorithms.base import ClientInfo
    from fedpref.algorithms.fedavg import FedAvg
    from fedpref.client.trainer import LocalTrainer, OptimConfig
    from fedpref.client.worker import EncodedClient
    from fedpref.config import load_config
    from fedpref.data.splits import split_clients
    from fedpref.engines.inprocess import run_rounds
    from fedpref.experiments.client_store import OnDemandClients
    from fedpref.experiments.setup import load_pairs
    from fedpref.models.adapters import trainable_state
    from fedpref.models.factory import build_reward_model

    per_group = num_clients // 4
    cfg = load_config(
        ROOT / "src/fedpref/configs/quick/quick.toml",
        [
            f"data.group_sizes=[{per_group}, {per_group}, {per_group}, {per_group}]",
            "data.pairs_per_axis=6",
            "data.val_pairs=2",
            "data.test_pairs=2",
        ],
    )
    splits = split_clients(load_pairs(cfg), cfg.data.val_pairs, cfg.data.test_pairs, cfg.seed)
    model = build_reward_model(cfg)

    def encode(s):
        return EncodedClient(s.client_id, s.group, model.encode(s.train), model.encode(s.val), model.encode(s.test))

    clients = OnDemandClients(splits, encode, resident)
    infos = [ClientInfo(s.client_id, len(s.train), s.group) for s in splits]
    algorithm = FedAvg(infos, trainable_state(model), 1, 5, 2, cfg.seed)
    run_rounds(algorithm, clients, LocalTrainer(model, OptimConfig(1e-3, 8)), cfg.seed)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    return {
        "clients": num_clients,
        "resident": resident,
        "peak_rss_mib": round(peak_mib, 1),
        "encodings": clients.encodings,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--counts", type=int, nargs="+", default=[40, 400, 4000])
    parser.add_argument("--resident", type=int, default=5)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "memory.json")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_round(args.child, args.resident)))
        return
    rows = []
    for count in args.counts:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(count), "--resident", str(args.resident)],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(
            f"{count:6d} clients: peak RSS {rows[-1]['peak_rss_mib']:8.1f} MiB "
            f"({rows[-1]['encodings']} client encodings)"
        )
    ratio = rows[-1]["peak_rss_mib"] / rows[0]["peak_rss_mib"]
    print(f"peak with {rows[-1]['clients']} clients / with {rows[0]['clients']}: {ratio:.2f}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "ratio_last_first": ratio}, indent=2))


if __name__ == "__main__":
    main()
