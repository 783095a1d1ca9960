"""FedVPA-GP's parameter overhead (the FedVPA-GP paper's Sec. 5.5: "about 0.9M trainable parameters, 0.18% of
Qwen-2 0.5B's 494M"), counted on the modules fedpref builds.

For each backbone, the reward model `fedpref run` builds (A/B selector on a causal LM, scalar head on MiniLM) with
the config's LoRA, wrapped by `VariationalSelector` with the config's `[variational]` spec: the backbone's
parameters, the trainable LoRA (+ head) ones, and the variational modules' (feature extractor, posterior head,
latent projection f, prototypes, projection W). `qwen2-0.5b` is the published Qwen2-0.5B architecture with
random weights (benchmarks/paper_models.py; no download).

    .venv/bin/python benchmarks/param_overhead.py [--config vpa_hh] [--models minilm,smollm2,qwen2-0.5b]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from fedpref.algorithms.fedvpa import spec_from_config
from fedpref.config import load_config
from fedpref.models.factory import build_reward_model
from fedpref.models.variational import BASE_PREFIX, VariationalSelector

ROOT = Path(__file__).resolve().parent.parent
BACKBONES = {  # row -> (model.backbone, model.head)
    "minilm": ("minilm", "scalar"),
    "smollm2": ("smollm2", "selector"),
}


def counts(model: VariationalSelector) -> dict[str, int]:
    """Backbone, trainable reward-model (LoRA + head) and variational-module parameter counts."""
    trainable = {n: p.numel() for n, p in model.named_parameters() if p.requires_grad}
    base = sum(v for n, v in trainable.items() if n.startswith(BASE_PREFIX))
    frozen = sum(p.numel() for p in model.base.parameters() if not p.requires_grad)
    return {"backbone": frozen + base, "reward_model_trainable": base, "variational": sum(trainable.values()) - base}


def row(name: str, config: Path) -> dict:
    cfg = load_config(config)
    if name == "qwen2-0.5b":
        import sys

        sys.path.insert(0, str(ROOT / "benchmarks"))
        from paper_models import build_paper_selector

        base = build_paper_selector("qwen2-0.5b", cfg.lora, cfg.data.max_length)
    else:
        backbone, head = BACKBONES[name]
        cfg.model.backbone, cfg.model.head = backbone, head
        base = build_reward_model(cfg)
    c = counts(VariationalSelector(base, spec_from_config(cfg)))
    c["variational_share_pct"] = round(100 * c["variational"] / c["backbone"], 4)
    return c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("vpa_hh"))
    parser.add_argument("--models", default="minilm,smollm2,qwen2-0.5b")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out = {"config": str(args.config), "rows": {}}
    print("| backbone | backbone params | LoRA (+ head) trainable | variational modules | share of backbone |")
    print("|---|---|---|---|---|")
    for name in args.models.split(","):
        with torch.no_grad():
            c = out["rows"][name] = row(name, args.config)
        print(
            f"| {name} | {c['backbone']:,} | {c['reward_model_trainable']:,} | {c['variational']:,} | "
            f"{c['variational_share_pct']}% |"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
