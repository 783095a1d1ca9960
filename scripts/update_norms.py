"""The L2 norm of each client's first-round update (its adapters after `train.local_steps` steps from the
initial model, minus the initial model), to choose `privacy.clip_norm`: a C well below the typical norm
clips every update, one far above clips none.

    python scripts/update_norms.py CONFIG [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from fedpref.client.privacy import update_norm
from fedpref.client.trainer import LocalTrainer, optim_configs
from fedpref.client.worker import task_generator
from fedpref.config import load_config
from fedpref.experiments.setup import build_setup


def first_round_norms(config: str, overrides: list[str]) -> tuple[dict[str, float], int]:
    """({client: ||update||_2}, number of trained parameters) of every client's first local training."""
    cfg = load_config(config, overrides)
    setup = build_setup(cfg)
    trainer = LocalTrainer(setup.model, optim_configs(cfg)[0])
    norms = {}
    for client_id, client in setup.seen_clients().items():
        generator = task_generator(cfg.seed, "update_norms", client_id)
        state, _ = trainer.train(setup.init_state, client.train, cfg.train.local_steps, generator)
        norms[client_id] = update_norm(setup.init_state, state)
    return norms, sum(v.numel() for v in setup.init_state.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    norms, parameters = first_round_norms(args.config, args.set)
    print(f"{parameters} trained parameters; first-round update norm per client:")
    for client_id, norm in norms.items():
        print(f"  {client_id}  {norm:.3f}")
    values = list(norms.values())
    print(f"median {statistics.median(values):.3f}, min {min(values):.3f}, max {max(values):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
