"""`fedpref export`: a client's personalized reward model from a finished run, as a PEFT folder plus its head."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torch import nn

from fedpref.client.personalize import personalize
from fedpref.client.trainer import LocalTrainer, optim_configs
from fedpref.client.worker import task_generator
from fedpref.config import ExperimentConfig, load_config
from fedpref.errors import FedprefError
from fedpref.experiments.runner import load_initializations
from fedpref.experiments.setup import Setup, build_setup
from fedpref.models.adapters import State, trainable_state
from fedpref.models.hf_export import save_reward_model
from fedpref.protocol import PERSONALIZE


@dataclass
class Personalized:
    """A client's model after the run's personalization (`setup.model` holds `state`)."""

    cfg: ExperimentConfig
    setup: Setup
    state: State
    accuracies: list[float]  # test accuracy at each personalization.steps, as the run measured them

    @property
    def model(self) -> nn.Module:
        return self.setup.model


def personalized_model(run_dir: Path, method: str, client: str) -> Personalized:
    """Re-run `client`'s personalization of `method` exactly as the run did: its config, its saved
    initialization (models/<method>.pt), the same trainer settings and generator, up to the last step."""
    run_dir = Path(run_dir)
    if not (run_dir / "config.toml").is_file():
        raise FedprefError(f"{run_dir}: not a fedpref run folder (no config.toml)")
    path = run_dir / "models" / f"{method}.pt"
    if not path.is_file():
        saved = sorted(p.stem for p in (run_dir / "models").glob("*.pt"))
        raise FedprefError(f"{run_dir}: no method {method} saved (models/: {', '.join(saved) or 'none'})")
    inits = load_initializations(path)
    if client not in inits:
        raise FedprefError(f"{run_dir}: no client {client} in {method} (clients: {', '.join(sorted(inits))})")
    cfg = load_config(run_dir / "config.toml")
    setup = build_setup(cfg)
    _, pers_opt = optim_configs(cfg)
    data = setup.clients[client]
    generator = task_generator(cfg.seed, method, PERSONALIZE, client)
    # the tests along the way are part of the run's sequence, so they are repeated (they also check the replay)
    trainer = LocalTrainer(setup.model, pers_opt)
    accuracies = personalize(trainer, inits[client], data.train, data.test, cfg.personalization.steps, generator)
    return Personalized(cfg, setup, trainable_state(setup.model), accuracies)


def export_client(run_dir: Path, method: str, client: str, out: Path, merged: bool = False) -> Personalized:
    """Write `client`'s personalized model of `method` to `out` (see fedpref.models.hf_export)."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FedprefError(f"{out}: not empty; choose another --out")
    done = personalized_model(run_dir, method, client)
    info = {
        "run": str(Path(run_dir).resolve()),
        "method": method,
        "client": client,
        "backbone": done.cfg.model.backbone,
        "personalization_steps": done.cfg.personalization.steps[-1],
        "test_accuracy": done.accuracies[-1],
    }
    save_reward_model(done.model, out, info, merged=merged)
    return done
