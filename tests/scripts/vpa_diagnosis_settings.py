"""The effective FedVPA-GP settings of every scripts/vpa_diagnosis.py variant: what the algorithm, the model and
the loss are built with, through the path a run takes (config -> registry -> the round's tasks -> the client).

.venv/bin/python tests/scripts/vpa_diagnosis_settings.py   # rewrites tests/fixtures/vpa_diagnosis_settings.json
"""

from __future__ import annotations

import dataclasses
import json

from load_script import ROOT, load_script

from fedpref.algorithms.registry import build_algorithm
from fedpref.client.variational import LossSettings
from fedpref.config import load_config
from fedpref.models.adapters import trainable_state
from fedpref.models.factory import build_reward_model
from fedpref.models.variational import VariationalSpec
from fedpref.protocol import ClientInfo

FIXTURE = ROOT / "tests" / "fixtures" / "vpa_diagnosis_settings.json"
DEFAULTS = "<defaults>"  # the fixture's entry for a config that sets no key
FLAGS = ("oracle_blind", "latent_warmup")  # per-round task flags of the study


def diagnosis_script():
    return load_script("scripts/vpa_diagnosis.py")


def variant_overrides(script, name: str) -> list[str]:
    """The `--set` items `vpa_diagnosis.py run` passes to `fedpref sweep` for the variant."""
    return [script.ONLY_FEDVPA, *script.BEFORE_FIX, *script.VARIANTS[name][1]]


def effective_settings(cfg, model) -> dict:
    """What FedVPA-GP runs with under `cfg`: the server's settings, and per round the spec, the loss settings and
    the flags its tasks carry, as the client reads them."""
    # 4 + 4 trained clients of two true types, as vpa_synthetic's 5 + 5 less one unseen client of each.
    infos = [ClientInfo(f"c{i:02d}", 10, "G1" if i < 4 else "G2") for i in range(8)]
    algo = build_algorithm("FedVPA-GP", cfg, infos, trainable_state(model), model)
    s = algo.settings
    server = {
        "prior": s.prior,
        "orthogonal": s.orthogonal,
        "assignment": s.assignment,
        "sampling": s.sampling,
        "center_latents": s.center_latents,
        "scale_latents": s.scale_latents,
        "rounds": algo.num_rounds,
        "clients_per_round": algo.clients_per_round,
        "local_steps": algo.local_steps,
        "seed": algo.seed,
        "train_lr": cfg.train.lr,
    }
    specs, losses, flags = set(), set(), {f: [] for f in FLAGS}
    for r in range(algo.num_rounds):
        for task in algo.next_tasks(r):
            specs.add(json.dumps(dataclasses.asdict(VariationalSpec(**task.payload["spec"])), sort_keys=True))
            losses.add(json.dumps(dataclasses.asdict(LossSettings(**task.payload["loss"])), sort_keys=True))
            for f in FLAGS:
                if task.payload.get(f) and r not in flags[f]:
                    flags[f].append(r)
    assert len(specs) == 1 and len(losses) == 1, "spec and loss settings are the same every round"
    return {"server": server, "spec": json.loads(specs.pop()), "loss": json.loads(losses.pop()), "flags": flags}


def all_settings() -> dict[str, dict]:
    script = diagnosis_script()
    model = build_reward_model(load_config(script.CONFIG, variant_overrides(script, "before_fix")))
    out = {}
    for name in script.VARIANTS:
        out[name] = effective_settings(load_config(script.CONFIG, variant_overrides(script, name)), model)
    # What the shipped config path gives FedVPA-GP with no key set: the defaults a run sees.
    out[DEFAULTS] = effective_settings(load_config(None, [script.ONLY_FEDVPA]), model)
    return out


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(all_settings(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE.relative_to(ROOT)}")
