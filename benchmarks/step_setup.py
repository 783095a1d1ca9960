"""Shared set-up of the step benchmarks: arguments, and a trainer with the first clients of a config."""

from __future__ import annotations

import argparse
from pathlib import Path

from fedpref.client.trainer import LocalTrainer, OptimConfig
from fedpref.config import load_config
from fedpref.data.splits import split_clients
from fedpref.experiments.setup import load_pairs
from fedpref.models.factory import build_reward_model

ROOT = Path(__file__).resolve().parents[1]


def step_parser(doc: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(ROOT / "src/fedpref/configs/quick/quick.toml"))
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    return parser


def trainer_and_clients(args: argparse.Namespace):
    """(config, model, trainer, client splits) for the first `args.clients` clients of `args.config`."""
    cfg = load_config(args.config)
    clients = split_clients(load_pairs(cfg), cfg.data.val_pairs, cfg.data.test_pairs, cfg.seed)[: args.clients]
    model = build_reward_model(cfg)
    trainer = LocalTrainer(model, OptimConfig(cfg.train.lr, cfg.train.batch_size, precision=cfg.train.precision))
    return cfg, model, trainer, clients
