"""The tiny config (quick/tiny) for the end-to-end algorithm tests."""

from __future__ import annotations

from pathlib import Path

from fedpref.config import ExperimentConfig, load_config

TINY = Path(__file__).resolve().parents[2] / "src/fedpref/configs/quick/tiny.toml"


FAST = ("train.local_steps=1", "personalization.steps=[0, 1]")  # leaves data, model and seed as in tiny


def tiny(methods: list[str], *overrides: str) -> ExperimentConfig:
    """The tiny config, made faster, with `--set algorithm.methods=[...]` and further `--set` overrides."""
    return load_config(TINY, [f"algorithm.methods={methods!r}", *FAST, *overrides])
