"""Centralized check of the FedVPA-GP selector: can z carry two opposite preferences without federation?

One G1 and one G2 client of the humor-only conflict (configs/fedvpa/vpa_synthetic.toml), batches alternating
between them, one AdamW over every trainable weight, base-logit dropout P_LOGIT; prints each type's test
accuracy with z and with the base logits alone every 50 steps (docs/fedvpa.md, choice 6).

OMP_NUM_THREADS=1 .venv/bin/python scripts/vpa_centralized_check.py 0.5 1e-3 300
"""

from __future__ import annotations

import dataclasses
import sys

import torch

from fedpref.algorithms.fedvpa import spec_from_config
from fedpref.client.trainer import BatchStream
from fedpref.client.variational import LossSettings, client_latent, local_loss, selector_accuracy
from fedpref.config import load_config
from fedpref.experiments.setup import build_setup
from fedpref.models.variational import variational_model


def main(p_logit: float, lr: float, steps: int) -> None:
    overrides = ["data.group_sizes=[1,1,0,0]", "federation.clients_per_round=2", "data.unseen_clients=0"]
    cfg = load_config("vpa_synthetic", overrides)
    setup = build_setup(cfg)
    model = variational_model(setup.model, dataclasses.replace(spec_from_config(cfg), p_logit=p_logit))
    clients = list(setup.clients.values())
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95))
    generator = torch.Generator().manual_seed(0)
    streams = [BatchStream(len(c.train), 8, generator) for c in clients]
    settings = LossSettings.from_config(cfg.variational, cfg.vpa_diagnosis, orthogonal=False)
    for step in range(steps):
        model.train()
        i = step % len(clients)
        out = model.training_outputs(clients[i].train, streams[i].next(), generator)
        loss = local_loss(out, settings, model.prototypes, 5.0, None, None, None)["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (step + 1) % 50 == 0:
            for c in clients:
                z, _ = client_latent(model, c.train)
                print(step + 1, c.group, selector_accuracy(model, c.test, z), flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]))
