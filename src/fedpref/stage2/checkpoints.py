"""A Stage 2 run's checkpoints: each phase's state (Stage 1 rounds, the held-out judges, conditional DPO steps, its
win rates, FedDPO rounds and theirs) in `run_dir/checkpoints`, so that `fedpref stage2 --resume` continues an
interrupted run where it stopped and ends with the results the run would have had without the interruption."""

from __future__ import annotations

import hashlib
import io
import json
import time
from pathlib import Path
from typing import Any

import torch

from fedpref.engines.checkpoint import CheckpointStore
from fedpref.errors import FedprefError

PHASES = ("stage1", "judges", "dpo", "stage2", "feddpo")  # in the order a run goes through them


def generator_state() -> dict:
    """The global torch generator's state, as a saved phase state carries it (`torch.set_rng_state` reads it)."""
    return {"torch_rng": torch.get_rng_state()}


def config_digest(config: dict) -> str:
    """A short SHA-256 of the Stage 2 config as plain data (key order does not matter)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


class Stage2Checkpoints:
    """The saved state of every phase reached so far, one `CheckpointStore` file for the whole run, with the
    run's wall time so far. A state is snapshotted when saved. Each phase's code decides what its state holds,
    the global torch generator included (LoRA dropout draws from it): continuing from a state, it sets the
    generator back once it has rebuilt what the state fills in, so the run goes on as it would have."""

    def __init__(self, folder: Path, config: dict, resume: bool = False):
        self.store, self.digest = CheckpointStore(folder), config_digest(config)
        self.phases: dict[str, dict] = {}
        self.spans: dict[str, list[float]] = {}  # phase -> [start, end] on the run's clock (`elapsed_s`)
        self.earlier_s, self.started = 0.0, time.perf_counter()
        saved = self.store.load() if resume else None
        if resume and saved is None:
            raise FedprefError(f"{folder.parent}: nothing to resume (no Stage 2 checkpoint in {folder})")
        if saved is not None:
            if saved["config_digest"] != self.digest:
                raise FedprefError(
                    f"{folder}: the checkpoint belongs to a different Stage 2 config (digest "
                    f"{saved['config_digest']}, this config {self.digest}); resume with the run's own config and --set"
                )
            self.phases, self.spans, self.earlier_s = saved["phases"], saved["spans"], saved["elapsed_s"]

    def saved(self, phase: str) -> dict | None:
        """The phase's last saved state (None: it has not started)."""
        entry = self.phases.get(phase)
        if entry is None:
            return None
        return torch.load(io.BytesIO(entry["snapshot"]), weights_only=False)

    def done(self, phase: str) -> bool:
        return self.phases.get(phase, {}).get("done", False)

    def save(self, phase: str, state: dict[str, Any], done: bool = False) -> None:
        """Keep a snapshot of `state` as the phase's (finished with `done`)."""
        if phase not in PHASES:
            raise ValueError(f"unknown Stage 2 phase {phase!r}; one of {', '.join(PHASES)}")
        buffer = io.BytesIO()  # a snapshot now: `state` may hold objects the run goes on changing
        torch.save(state, buffer)
        self.phases[phase] = {"snapshot": buffer.getvalue(), "done": done}
        self.begin(phase)
        if done:
            self.spans[phase][1:] = [self.elapsed_s()]
        payload = {"phases": self.phases, "spans": self.spans, "elapsed_s": self.elapsed_s()}
        self.store.save({"config_digest": self.digest} | payload)

    def begin(self, phase: str) -> None:
        """The phase starts now on the run's clock, unless an earlier process had started it (kept at a save)."""
        self.spans.setdefault(phase, [self.elapsed_s()])

    def took_s(self, phase: str) -> float:
        """Seconds from the phase's start to its end (to now while it runs), over every process that ran it."""
        span = self.spans[phase]
        return round((span[1] if len(span) > 1 else self.elapsed_s()) - span[0], 1)

    def elapsed_s(self) -> float:
        """The run's wall time: this process's, plus the interrupted processes' up to their last save (the work
        they did after it is done again, and counted once)."""
        return self.earlier_s + time.perf_counter() - self.started
