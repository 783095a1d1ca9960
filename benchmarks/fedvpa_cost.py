"""FedVPA-GP's Sec. 5.5 cost claims: extra parameters, statistics bytes, round time against FedDPO's."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import namedtuple
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT / "benchmarks"))  # param_overhead, paper_models

from param_overhead import BACKBONES, counts  # noqa: E402  (the rows and the count C45 prints)

from fedpref.algorithms.fedvpa import spec_from_config  # noqa: E402
from fedpref.config import ExperimentConfig, LoraConfig, load_config  # noqa: E402
from fedpref.models.variational import VariationalSelector  # noqa: E402

PAPER = {"variational": 900_000, "base": 494_000_000, "share_pct": 0.18, "statistics_bytes": 256, "ratio": 1.18}
TOY_LLAMA = {"vocab_size": 30522, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2}
STATISTICS = ("latent_mu", "latent_var")  # the reply metrics that carry the mixture statistics (mu_bar, sigma_bar^2)


# ----------------------------------------------------------------------------------------------- parameters


def toy_selector(lora: LoraConfig, max_length: int) -> torch.nn.Module:
    """fedpref's A/B selector on a randomly initialized two-layer Llama (hidden 16) with MiniLM's tokenizer."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from fedpref.models.backbone import resolve_backbone
    from fedpref.models.selector_reward import SelectorRewardModel

    tokenizer = AutoTokenizer.from_pretrained(resolve_backbone("minilm"))
    torch.manual_seed(0)
    config = LlamaConfig(**TOY_LLAMA, num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512)
    lm = LlamaForCausalLM(config).requires_grad_(False).eval()
    return SelectorRewardModel(lm, tokenizer, lora, max_length, torch.Generator().manual_seed(0))


def reward_model(name: str, cfg: ExperimentConfig) -> torch.nn.Module:
    """The plain reward model of row `name`: 'toy-llama', 'qwen2-0.5b' (random weights) or a shipped backbone."""
    if name == "toy-llama":
        return toy_selector(cfg.lora, cfg.data.max_length)
    if name == "qwen2-0.5b":
        from paper_models import build_paper_selector

        return build_paper_selector("qwen2-0.5b", cfg.lora, cfg.data.max_length)
    from fedpref.models.factory import build_reward_model

    backbone, head = BACKBONES[name]
    cfg.model.backbone, cfg.model.head = backbone, head
    return build_reward_model(cfg)


def parameter_row(model: VariationalSelector) -> dict:
    """Pretrained (frozen) parameters, the plain reward model's trainable ones (LoRA + head), the variational
    modules' and their share of the pretrained model."""
    c = counts(model)
    base = c["backbone"] - c["reward_model_trainable"]
    return {
        "base": base,
        "reward_model_trainable": c["reward_model_trainable"],
        "variational": c["variational"],
        "share_pct": round(100 * c["variational"] / base, 4),
    }


def parameters(config: str, names: list[str]) -> dict[str, dict]:
    out = {}
    for name in names:
        cfg = load_config(config)
        with torch.no_grad():
            out[name] = parameter_row(VariationalSelector(reward_model(name, cfg), spec_from_config(cfg)))
    return out


# ------------------------------------------------------------------------------------------------ statistics


def statistics_bytes(reply_metrics: dict) -> dict[str, int]:
    """A FedVPA-GP reply's metric bytes as the transport counts them (engines/traffic.py): the mixture
    statistics, the scalar metrics beside them, and the latent width d."""
    from fedpref.engines.traffic import metric_bytes

    stats = {k: v for k, v in reply_metrics.items() if k in STATISTICS}
    return {
        "statistics": metric_bytes(stats),
        "scalars": metric_bytes({k: v for k, v in reply_metrics.items() if k not in STATISTICS}),
        "latent_dim": len(stats.get("latent_mu", [])),
    }


def method_rounds(cfg: ExperimentConfig, method: str, setup=None) -> tuple[list, list[dict]]:
    """`method`'s rounds on `cfg` in process (on `setup` where given): (round 0's first-stage replies, the records)."""
    from fedpref.algorithms.registry import build_algorithm
    from fedpref.client.trainer import LocalTrainer, optim_configs
    from fedpref.client.worker import Trainers
    from fedpref.engines.inprocess import InProcessTransport
    from fedpref.engines.loop import run_rounds
    from fedpref.experiments.setup import build_setup

    setup, (train_opt, pers_opt) = setup or build_setup(cfg), optim_configs(cfg)
    algorithm = build_algorithm(method, cfg, setup.infos, setup.init_state, setup.model, setup.unseen)
    trainers = Trainers(LocalTrainer(setup.model, train_opt), LocalTrainer(setup.model, pers_opt), cfg.seed)
    transport, replies = InProcessTransport(setup.clients, trainers), []
    exchange = transport.exchange

    def keep(tasks: list, key) -> list:
        answered = exchange(tasks, key)
        if key.round == 0 and key.stage == 0:
            replies.extend(answered)
        return answered

    transport.exchange = keep
    return replies, run_rounds(algorithm, transport)


def traffic(config: str, overrides: list[str]) -> dict:
    """One FedVPA-GP round and one FL round on `config`: each reply's statistics and scalar bytes, the same reply
    as Flower's message content, and the bytes up per client beyond FL's (the adapter the two share)."""
    from fedpref.engines.flower.messages import content_bytes, reply_to_content
    from fedpref.engines.loop import communication
    from fedpref.engines.traffic import reply_bytes, tensor_bytes

    rounds = ["federation.rounds=1", "federation.eval_every=0", "personalization.steps=[0]"]
    out = {}
    for method in ("FedVPA-GP", "FL"):
        cfg = load_config(config, [*rounds, f"algorithm.methods=['{method}']", *overrides])
        replies, records = method_rounds(cfg, method)
        first = replies[0]
        out[method] = statistics_bytes(first.metrics) | {
            "state": tensor_bytes(first.state.values()),
            "reply": reply_bytes(first),
            "flower_content": content_bytes(reply_to_content(first, 0)),
            "down_per_client_round": communication(records[:1])["bytes_down_per_client_round"],
            "up_per_client_round": communication(records[:1])["bytes_up_per_client_round"],
        }
    return out


# ------------------------------------------------------------------------------------------------ round time


# The settings both timed methods share: clients a round, local steps, batch (pairs a step), tokens, and rounds
# (round 0 warms up; the median is over the others)
Matched = namedtuple("Matched", "clients steps batch max_length rounds", defaults=(2, 2, 4, 128, 5))


def matched_config(config: str, backbone: str, m: Matched) -> ExperimentConfig:
    """`config` (a synthetic one) with the causal A/B selector on `backbone`, LoRA on every layer (no cached frozen
    prefix, as a policy's DPO step has none), as many clients as take part in a round (the same clients in every
    round of every method: G1, G2, ...), and the matched steps, batch and tokens; FedVPA-GP and FL."""
    groups = [m.clients // 4 + (i < m.clients % 4) for i in range(4)]
    return load_config(
        config,
        [
            f"model.backbone='{backbone}'",
            "model.head='selector'",
            "lora.top_layers=0",
            f"federation.rounds={m.rounds}",
            f"data.group_sizes={groups}",
            f"federation.clients_per_round={m.clients}",
            f"train.local_steps={m.steps}",
            f"train.batch_size={m.batch}",
            f"data.max_length={m.max_length}",
            "federation.eval_every=0",
            "personalization.steps=[0]",
            "algorithm.methods=['FedVPA-GP','FL']",
        ],
    )


def fedvpa_round_seconds(cfg: ExperimentConfig, m: Matched) -> dict[str, list[float]]:
    """Seconds of each round of FedVPA-GP and of FL (the same reward model without the variational modules)."""
    from fedpref.experiments.setup import build_setup

    setup = build_setup(cfg)
    out = {}
    for method in ("FedVPA-GP", "FL"):
        records = method_rounds(cfg, method, setup)[1]
        out[method] = [r["wall_s"] for r in records if r["round"] < m.rounds]
    return out


def feddpo_round_seconds(cfg: ExperimentConfig, m: Matched) -> list[float]:
    """Seconds of each FedDPO round (offline DPO on each client's own training pairs, as FedDPO's clients on
    logged data) on the same backbone, LoRA, clients, batch and local steps."""
    from fedpref.data.load import load_pairs
    from fedpref.data.splits import split_clients
    from fedpref.stage2.dpo import DPOSettings, tokenize_pairs
    from fedpref.stage2.feddpo import DPOClient, FedSettings, run_feddpo
    from fedpref.stage2.generation import Sampling
    from fedpref.stage2.policy import ConditionalPolicy, load_lm

    splits = split_clients(load_pairs(cfg), cfg.data.val_pairs, cfg.data.test_pairs, cfg.seed)
    lm, tokenizer = load_lm(cfg.model.backbone)
    policy = ConditionalPolicy(lm, cfg.lora, latent_dim=0, seed=cfg.seed, precision="fp32")
    sampling = Sampling(max_prompt_tokens=m.max_length // 2, eos_token_id=tokenizer.eos_token_id or 0)
    clients = {
        s.client_id: DPOClient(
            s.client_id, s.group or "", pairs=tokenize_pairs(tokenizer, s.train, sampling, m.max_length // 4)
        )
        for s in splits
    }
    seconds: list[float] = []
    settings = DPOSettings(lr=1e-4, steps=m.steps, prompts_per_step=m.batch)
    run_feddpo(
        policy,
        tokenizer,
        clients,
        None,
        settings,
        FedSettings(m.rounds, m.clients, m.steps),
        sampling,
        cfg.seed,
        lambda record: seconds.append(record["wall_s"]),
    )
    return seconds[: m.rounds]


def median_after_first(seconds: list[float]) -> float:
    return statistics.median(seconds[1:] if len(seconds) > 1 else seconds)


def round_times(config: str, backbone: str, m: Matched, threads: int) -> dict:
    torch.set_num_threads(threads)
    cfg = matched_config(config, backbone, m)
    per_round = fedvpa_round_seconds(cfg, m) | {"FedDPO": feddpo_round_seconds(cfg, m)}
    medians = {k: round(median_after_first(v), 3) for k, v in per_round.items()}
    return {
        "backbone": backbone,
        "matched": m._asdict(),
        "rounds_s": {k: [round(s, 3) for s in v] for k, v in per_round.items()},
        "median_s": medians,
        "ratio_fedvpa_over_feddpo": round(medians["FedVPA-GP"] / medians["FedDPO"], 3),
        "ratio_fedvpa_over_fl": round(medians["FedVPA-GP"] / medians["FL"], 3),
    }


# ---------------------------------------------------------------------------------------------------- output


def table(result: dict) -> list[str]:
    lines = ["| quantity | paper (Sec. 5.5) | ours |", "|---|---|---|"]
    for name, c in result.get("parameters", {}).items():
        ours = (
            f"{c['variational']:,} ({c['share_pct']}% of {c['base']:,}); LoRA (+ head) {c['reward_model_trainable']:,}"
        )
        paper = "0.9M (0.18% of 494M)" if name == "qwen2-0.5b" else "–"
        lines.append(f"| variational modules' parameters, {name} | {paper} | {ours} |")
    if t := result.get("traffic"):
        v, fl = t["FedVPA-GP"], t["FL"]
        ours = (
            f"{v['statistics']} B ({v['latent_dim']} + {v['latent_dim']} float64) + {v['scalars']} B of scalar "
            f"metrics; a reply {v['reply']:,} B (Flower content {v['flower_content']:,} B), of which the trained "
            f"state {v['state']:,} B (FL's {fl['state']:,} B); per client and round down / up "
            f"{v['down_per_client_round']:,.0f} / {v['up_per_client_round']:,.0f} B "
            f"(FL {fl['down_per_client_round']:,.0f} / {fl['up_per_client_round']:,.0f} B)"
        )
        lines.append(f"| mixture statistics per client per round | 256 B (2 x 32 FP32) | {ours} |")
    if r := result.get("round_time"):
        med, m = r["median_s"], r["matched"]
        parts = [
            f"{r['ratio_fedvpa_over_feddpo']}x: FedVPA-GP {med['FedVPA-GP']} s vs FedDPO {med['FedDPO']} s a round",
            f"FL {med['FL']} s (FedVPA-GP / FL {r['ratio_fedvpa_over_fl']}x)",
            f"{r['backbone']}, {m['clients']} clients (every round) x {m['steps']} steps x {m['batch']} pairs",
            f"median of rounds 1-{m['rounds'] - 1}",
        ]
        ours = "; ".join(parts)
        lines.append(f"| round time, FedVPA-GP / FedDPO | 1.18x | {ours} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="vpa_hh", help="config whose [lora] and [variational] the counts use")
    parser.add_argument(
        "--models", default="toy-llama,minilm,smollm2,qwen2-0.5b", help="parameter rows (comma-separated)"
    )
    parser.add_argument("--traffic-config", default="tiny", help="config whose round the statistics bytes come from")
    parser.add_argument("--time-config", default="tiny", help="synthetic config whose data the round times use")
    parser.add_argument("--time-backbone", default="smollm2", help="causal LM both timed methods run on")
    parser.add_argument("--rounds", type=int, default=Matched().rounds, help="rounds timed per method (first: warm-up)")
    parser.add_argument("--clients", type=int, default=Matched().clients, help="clients a round, both methods")
    parser.add_argument("--steps", type=int, default=Matched().steps, help="local steps a client, both methods")
    parser.add_argument("--batch", type=int, default=Matched().batch, help="pairs a local step, both methods")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--skip", default="", help="parts to leave out: parameters, traffic, round_time")
    parser.add_argument("--json", type=Path, help="also write the numbers as JSON here")
    args = parser.parse_args()
    skip, result = set(filter(None, args.skip.split(","))), {}
    if "parameters" not in skip:
        result["parameters"] = parameters(args.config, args.models.split(","))
    if "traffic" not in skip:
        result["traffic"] = traffic(args.traffic_config, [])
    if "round_time" not in skip:
        matched = Matched(args.clients, args.steps, args.batch, Matched().max_length, args.rounds)
        result["round_time"] = round_times(args.time_config, args.time_backbone, matched, args.threads)
    result["paper"] = PAPER
    print("\n".join(table(result)))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
