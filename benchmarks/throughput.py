"""Client training/evaluation throughput: fedpref's trainer vs the papers' reference way, in one run.

The reference trains a client the way the papers' public code does: load the global LoRA weights into
a PEFT model, create a fresh optimizer, pad every batch to the fixed maximum length, run the whole
backbone (for the selector: logits over all positions and the whole vocabulary), evaluate without
`inference_mode`. Both sides compute the same function; the script checks that their margins agree.
fedpref's side trains on new batches in every repeat, as a real run does (the reference pads every batch to
one length, so its shapes never change).

    .venv/bin/python benchmarks/throughput.py [--models minilm,stories,smollm2,qwen2-0.5b] [--repeats 3]
        [--out FILE.json]
        [--device cuda] [--precision bf16|bf16-frozen] [--reference-precision fp32|bf16|bf16-frozen]

On a GPU (`--device cuda`) fedpref autocasts to bf16 (train.precision 'auto'); the reference runs in fp32 as
the papers' code does by default, or under the same bf16 autocast (`--reference-precision bf16`), which
separates the precision lever from the others. `--reference-precision bf16-frozen` gives the reference
fedpref's 'bf16-frozen' lever: every frozen Linear of its backbone multiplies in bf16.

The `smollm2` row is the embedded SmolLM2-135M-Instruct (real pretrained weights, the 4-bit GGUF dequantized)
as the A/B selector with LoRA on all 30 layers, the papers' adapter placement, on the quick config's pairs.
The paper-size rows (`qwen2-0.5b`, `qwen2-0.5b-tldr`, `gemma-2b`) build the published architecture with
random weights and tokenize with MiniLM's tokenizer (benchmarks/paper_models.py); the reference pads to
1024 tokens as FedBiscuit's public configs do; they train fewer clients, steps and pairs (--paper-*) so
that a repeat takes minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from peft import get_peft_model_state_dict, set_peft_model_state_dict
from torch.utils.flop_counter import FlopCounterMode

from fedpref.client.trainer import BatchStream, LocalTrainer, OptimConfig, bf16_autocast
from fedpref.config import load_config
from fedpref.data.splits import split_clients
from fedpref.experiments.setup import load_pairs
from fedpref.models.adapters import trainable_state
from fedpref.models.encoded import pad
from fedpref.models.factory import build_reward_model, resolve_device
from fedpref.models.frozen_bf16 import frozen_bf16_matmul

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paper_models import build_paper_selector  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STORIES = (ROOT / ".." / "shared" / "models" / "stories260K" / "hf").resolve()
TLDR = (ROOT / "src/fedpref/configs/fedgd/tldr_local.toml").resolve()
Build = Callable[[object], torch.nn.Module]  # config -> reward model


def gemm_rate(dtype: torch.dtype, device: str = "cpu", repeats: int = 30) -> float:
    """Best-of GFLOP/s of an n x n matmul at `dtype` on `device`, measured now (the machine's reference rate)."""
    n = 8192 if device.startswith("cuda") else 1024  # a GPU needs a large product to reach its rate
    a, b = torch.randn(n, n, device=device).to(dtype), torch.randn(n, n, device=device).to(dtype)
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def cpu_name() -> str:
    """The CPU's model name (ratios differ between CPU kinds: docs/speed.md), or the platform's word for it."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def device_name(device: str) -> str:
    """The GPU's name for a CUDA device, else the CPU's (ratios differ between CPU kinds: docs/speed.md)."""
    return torch.cuda.get_device_name(device) if device.startswith("cuda") else cpu_name()


def _sync() -> None:
    if torch.cuda.is_initialized():  # GPU work is asynchronous: a timer must wait for it
        torch.cuda.synchronize()


def _timed(fn) -> float:
    _sync()
    start = time.perf_counter()
    fn()
    _sync()
    return time.perf_counter() - start


def clients_for(cfg, count: int, test_pairs: int | None = None):
    splits = split_clients(load_pairs(cfg), cfg.data.val_pairs, cfg.data.test_pairs, cfg.seed)[:count]
    return [replace(s, test=s.test[:test_pairs]) for s in splits] if test_pairs else splits


@dataclass
class Side:
    """One way of training clients: run every client's local steps, or evaluate every client's test pairs."""

    train_all: Callable[[], None]
    eval_all: Callable[[], None]
    margins: torch.Tensor  # (N,) of the first client's test pairs, to check both sides compute one function
    info: dict


def bench_fedpref(cfg, clients, steps: int, build: Build = build_reward_model) -> Side:
    """fedpref: one reused model, the client's adapter swapped in, packed tokens, cached frozen prefix."""
    model = build(cfg)
    optim = OptimConfig(cfg.train.lr, cfg.train.batch_size, precision=cfg.train.precision)
    trainer = LocalTrainer(model, replace(optim, eval_chunk=cfg.train.eval_batch_size))
    init = trainable_state(model)
    setup_s = time.perf_counter()
    encoded = [(model.encode(s.train), model.encode(s.test)) for s in clients]
    setup_s = time.perf_counter() - setup_s  # tokenization and frozen prefix: once per run, not per round
    trainer.train(init, encoded[0][0], 1, torch.Generator().manual_seed(0))  # warm-up
    repeat = itertools.count(1)

    def train_all() -> None:
        seed = next(repeat)  # new batches in every repeat, as in a real run's rounds: new packed lengths
        for t, _ in encoded:
            trainer.train(init, t, steps, torch.Generator().manual_seed(seed))

    def eval_all() -> None:
        for _, e in encoded:
            trainer.evaluate(init, e)

    check = encoded[0][1]
    info = {
        "step_gflop": _step_flops(model, trainer, encoded[0][0]) / 1e9,
        "setup_s": setup_s,
        "flips": None if check.chosen_is_a is None else check.chosen_is_a.tolist(),
    }
    return Side(train_all, eval_all, trainer.evaluate(init, check).margins, info)


def _step_flops(model, trainer: LocalTrainer, data) -> float:
    stream = BatchStream(len(data), trainer.optim.batch_size, torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as counter:
        loss = -F.logsigmoid(model.margins(data, stream.next())).mean()
        loss.backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def _summary(train_s: list[float], eval_s: list[float], clients: int, steps: int, batch: int, test_pairs: int) -> dict:
    """Rates from the median of the repeats (the machine's speed drifts; repeats alternate the two sides)."""
    train, evaluation = statistics.median(train_s), statistics.median(eval_s)
    return {
        "train_s": train,
        "train_s_repeats": train_s,
        "eval_s_repeats": eval_s,
        "train_pairs_per_s": clients * steps * batch / train,
        "client_steps_per_s": clients * steps / train,
        "eval_pairs_per_s": test_pairs / evaluation,
    }


class ReferenceScalar(torch.nn.Module):
    """The papers' way for an encoder reward model: fixed-length padding, the whole backbone every step."""

    def __init__(self, ours):
        super().__init__()
        self.peft, self.head, self.tok, self.max_length = ours.encoder, ours.head, ours.tokenizer, ours.max_length

    def margins(self, pairs) -> torch.Tensor:
        texts = [(p.prompt, r) for p in pairs for r in (p.chosen, p.rejected)]
        batch = self.tok(
            [a for a, _ in texts],
            [b for _, b in texts],
            truncation="longest_first",
            max_length=self.max_length,
            padding="max_length",
            return_tensors="pt",
        ).to(self.head.weight.device)
        hidden = self.peft(**batch).last_hidden_state
        weights = batch["attention_mask"].unsqueeze(-1).float()
        r = self.head((hidden * weights).sum(1) / weights.sum(1)).view(-1, 2)
        return r[:, 0] - r[:, 1]


class ReferenceSelector(torch.nn.Module):
    """The papers' way for the A/B selector: fixed-length padding, logits over every position and token."""

    def __init__(self, ours):
        super().__init__()
        self.ours, self.lm, self.max_length, self.letters = ours, ours.lm, ours.max_length, ours.letters

    def margins(self, pairs, chosen_is_a: list[bool] | None = None) -> torch.Tensor:
        flips = chosen_is_a or [True] * len(pairs)
        texts = [
            (p.prompt, p.chosen, p.rejected) if a else (p.prompt, p.rejected, p.chosen) for p, a in zip(pairs, flips)
        ]
        ids = [torch.tensor(self.ours._encode_one(*t)) for t in texts]  # the same tokens as fedpref
        batch, mask = pad(ids, self.ours.tokenizer.pad_token_id)
        batch = F.pad(batch, (0, self.max_length - batch.shape[1]), value=self.ours.tokenizer.pad_token_id)
        mask = F.pad(mask, (0, self.max_length - mask.shape[1]))  # fixed-length padding
        device = self.lm.get_base_model().device
        batch, mask = batch.to(device), mask.to(device)
        logits = self.lm(input_ids=batch, attention_mask=mask).logits  # (B, L, V): every position and token
        last = logits[torch.arange(len(ids), device=device), mask.sum(1) - 1][:, self.letters]
        diff = last[:, 0] - last[:, 1]
        return torch.where(torch.tensor(flips, device=device), diff, -diff)


def use_bf16_frozen_linears(model: torch.nn.Module) -> None:
    """Every frozen Linear of `model` (LoRA's base layers included) multiplies by a bf16 copy of its weight."""
    for linear in [m for m in model.modules() if isinstance(m, torch.nn.Linear) and not m.weight.requires_grad]:
        weight = linear.weight.detach().to(torch.bfloat16)

        def forward(x: torch.Tensor, weight: torch.Tensor = weight, bias: torch.Tensor | None = linear.bias):
            out = frozen_bf16_matmul(x.reshape(-1, x.shape[-1]), weight).view(*x.shape[:-1], -1)
            return out if bias is None else out + bias

        linear.forward = forward


def bench_reference(
    cfg, clients, steps: int, wrapper, flips: list[bool] | None, build: Build, precision: str = "fp32"
) -> Side:
    """Per client: load the global LoRA weights into the PEFT model, a fresh optimizer, fixed padding;
    `precision` 'bf16' autocasts its forward passes as fedpref does on a GPU, 'bf16-frozen' multiplies by
    every frozen weight in bf16."""
    ours = build(replace(cfg, train=replace(cfg.train, precision="fp32")))
    device = resolve_device(cfg.device).split(":")[0]
    autocast = torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=precision == "bf16")
    ref = wrapper(ours)
    peft_model = ours.encoder if hasattr(ours, "encoder") else ours.lm
    if precision == "bf16-frozen":
        use_bf16_frozen_linears(peft_model)
    global_lora = {k: v.clone() for k, v in get_peft_model_state_dict(peft_model).items()}
    head = getattr(ours, "head", None)
    global_head = {k: v.clone() for k, v in head.state_dict().items()} if head is not None else None

    def load_global() -> None:
        set_peft_model_state_dict(peft_model, global_lora)
        if head is not None:
            head.load_state_dict(global_head)

    params = [p for p in ours.parameters() if p.requires_grad]
    b = cfg.train.batch_size

    def train_client(split) -> None:
        load_global()
        optimizer = torch.optim.AdamW(params, lr=cfg.train.lr, betas=(cfg.train.beta1, cfg.train.beta2))
        peft_model.train()
        for step in range(steps):
            batch = [split.train[(step * b + i) % len(split.train)] for i in range(b)]  # plain PreferencePairs
            with autocast:
                loss = -F.logsigmoid(ref.margins(batch).float()).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    def evaluate(split) -> None:
        peft_model.eval()
        with torch.no_grad(), autocast:
            chunk = cfg.train.eval_batch_size
            for start in range(0, len(split.test), chunk):
                ref.margins(split.test[start : start + chunk])

    def train_all() -> None:
        for s in clients:
            train_client(s)

    def eval_all() -> None:
        for s in clients:
            evaluate(s)

    train_client(clients[0])  # warm-up, as for fedpref
    load_global()
    peft_model.eval()
    with torch.no_grad(), autocast:
        test, chunk = clients[0].test, cfg.train.eval_batch_size
        chunks = [test[i : i + chunk] for i in range(0, len(test), chunk)]
        parts, done = [], 0
        for part in chunks:
            parts.append(ref.margins(part, flips[done : done + len(part)]) if flips else ref.margins(part))
            done += len(part)
        margins = torch.cat(parts).float().cpu()
    return Side(train_all, eval_all, margins, {})


def compare(
    name: str,
    cfg,
    clients_count: int,
    steps: int,
    wrapper,
    repeats: int,
    build: Build = build_reward_model,
    test_pairs: int | None = None,
    reference_precision: str = "fp32",
) -> dict:
    clients = clients_for(cfg, clients_count, test_pairs)
    ours = bench_fedpref(cfg, clients, steps, build)
    ref = bench_reference(cfg, clients, steps, wrapper, ours.info.pop("flips"), build, reference_precision)
    device = resolve_device(cfg.device)
    dtype = torch.bfloat16 if bf16_autocast(cfg.train.precision, device.split(":")[0]) else torch.float32
    times, gemm = {"fedpref": ([], []), "reference": ([], [])}, []
    for _ in range(repeats):  # alternate, so a drift in the machine's speed hits both sides alike
        for side, (train_s, eval_s) in zip((ours, ref), times.values()):
            train_s.append(_timed(side.train_all))
            eval_s.append(_timed(side.eval_all))
        gemm.append(gemm_rate(dtype, device))  # next to this repeat's training step
    test_pairs = sum(len(s.test) for s in clients)
    ours_row, ref_row = (
        _summary(*times[k], clients_count, steps, cfg.train.batch_size, test_pairs) | side.info
        for k, side in (("fedpref", ours), ("reference", ref))
    )
    steps_done = clients_count * steps
    best_step_rate = ours_row["step_gflop"] * steps_done / min(times["fedpref"][0])
    row = {
        "fedpref": ours_row,
        "reference": ref_row,
        "train_speedup": ours_row["train_pairs_per_s"] / ref_row["train_pairs_per_s"],
        "eval_speedup": ours_row["eval_pairs_per_s"] / ref_row["eval_pairs_per_s"],
        "max_margin_difference": float((ours.margins.float().cpu() - ref.margins).abs().max()),
        "precision": cfg.train.precision,
        "reference_precision": reference_precision,
        "gemm_gflops": max(gemm),
        "gemm_gflops_repeats": gemm,
        "step_gflops_achieved": best_step_rate,
        # best against best: both are robust to the machine's transient slowdowns, which hit either side
        "fraction_of_gemm": best_step_rate / max(gemm),
    }
    _print(name, row)
    return row


def _print(name: str, row: dict) -> None:
    f, r = row["fedpref"], row["reference"]
    print(f"\n== {name}")
    print(
        f"train pairs/s    fedpref {f['train_pairs_per_s']:8.1f}   reference {r['train_pairs_per_s']:8.1f}"
        f"   ratio {row['train_speedup']:.2f}x"
    )
    print(f"client-steps/s   fedpref {f['client_steps_per_s']:8.2f}   reference {r['client_steps_per_s']:8.2f}")
    print(
        f"eval pairs/s     fedpref {f['eval_pairs_per_s']:8.1f}   reference {r['eval_pairs_per_s']:8.1f}"
        f"   ratio {row['eval_speedup']:.2f}x"
    )
    spread = ", ".join(f"{a:.1f}/{b:.1f} s" for a, b in zip(f["train_s_repeats"], r["train_s_repeats"]))
    print(f"train time per repeat (fedpref/reference): {spread}")
    print(f"same function: max |margin difference| = {row['max_margin_difference']:.2e}")
    print(
        f"training step: {f['step_gflop']:.1f} GFLOP at {row['step_gflops_achieved']:.0f} GFLOP/s = "
        f"{100 * row['fraction_of_gemm']:.0f}% of the GEMM rate (best repeat against the best of "
        f"{', '.join(f'{g:.0f}' for g in row['gemm_gflops_repeats'])} GFLOP/s measured between repeats)"
    )


PAPER_ROWS = {  # row -> (architecture, data config): the quick config's synthetic pairs, or TL;DR's long posts
    "qwen2-0.5b": ("qwen2-0.5b", None),
    "qwen2-0.5b-tldr": ("qwen2-0.5b", TLDR),
    "gemma-2b": ("gemma-2b", None),
}


def paper_row(row: str, args) -> dict:
    """A paper-size causal A/B selector, LoRA on every layer as in the papers (r 8, alpha 16, dropout 0.05)."""
    arch, data_config = PAPER_ROWS[row]
    overrides = [  # the model itself is built from the JSON config, with the selector head
        "lora.top_layers=0",
        "lora.dropout=0.05",
        f"data.max_length={args.paper_length}",
        f"train.batch_size={args.paper_batch}",
        f"train.eval_batch_size={args.paper_batch}",
        "train.lr=1e-5",
        f"device='{args.device}'",
    ] + ([f"train.precision='{args.precision}'"] if args.precision else [])
    cfg = load_config(data_config or args.config, overrides)

    def build(c):
        return build_paper_selector(arch, c.lora, c.data.max_length, c.seed).to(resolve_device(c.device))

    name = f"{arch} A/B selector, random weights ({'TL;DR' if data_config else 'synthetic'} pairs)"
    return compare(
        name,
        cfg,
        args.paper_clients,
        args.paper_steps,
        ReferenceSelector,
        args.repeats,
        build,
        args.paper_eval_pairs,
        args.reference_precision,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(ROOT / "src/fedpref/configs/quick/quick.toml"))
    parser.add_argument(
        "--models",
        default="minilm,stories,qwen2-0.5b,qwen2-0.5b-tldr",
        help=f"rows to run, comma-separated: minilm, stories, smollm2, {', '.join(PAPER_ROWS)}",
    )
    parser.add_argument("--clients", type=int, default=5, help="clients trained per setting (one round)")
    parser.add_argument("--steps", type=int, default=8, help="local steps per client")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per side, alternating; medians reported")
    parser.add_argument("--paper-clients", type=int, default=1, help="clients of a paper-size row")
    parser.add_argument("--paper-steps", type=int, default=2, help="local steps per client of a paper-size row")
    parser.add_argument("--paper-batch", type=int, default=2, help="batch of a paper-size row (papers: 16)")
    parser.add_argument("--paper-length", type=int, default=1024, help="max tokens of a paper-size row")
    parser.add_argument("--paper-eval-pairs", type=int, default=8, help="test pairs per client of a paper-size row")
    parser.add_argument("--smollm2-clients", type=int, default=2, help="clients of the smollm2 row")
    parser.add_argument("--smollm2-steps", type=int, default=4, help="local steps per client of the smollm2 row")
    parser.add_argument("--smollm2-length", type=int, default=256, help="max tokens of the smollm2 row")
    parser.add_argument("--device", default="cpu", help="torch device of every row: cpu, cuda, cuda:1, auto")
    parser.add_argument(
        "--precision",
        choices=("auto", "fp32", "bf16", "bf16-frozen"),
        default=None,
        help="fedpref's train.precision for every row (default: the config's; 'bf16' autocasts on the CPU too; "
        "'bf16-frozen': encoders' frozen base weights in bf16)",
    )
    parser.add_argument(
        "--reference-precision",
        choices=("fp32", "bf16", "bf16-frozen"),
        default="fp32",
        help="the reference's forward: fp32 (the papers' code), bf16 autocast (fedpref's 'auto' on a GPU) or "
        "bf16 products with every frozen weight (fedpref's 'bf16-frozen')",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "throughput.json")
    args = parser.parse_args()
    rows = args.models.split(",")
    unknown = sorted(set(rows) - {"minilm", "stories", "smollm2", *PAPER_ROWS})
    if unknown:
        parser.error(f"unknown --models {', '.join(unknown)}")
    device = resolve_device(args.device)
    results = {
        "threads": torch.get_num_threads(),
        "cpu": cpu_name(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "device": device,
        "device_name": device_name(device),
        "torch": torch.__version__,
    }
    print(f"{results['cpu']} ({results['cpu_capability']}), {results['threads']} threads; device {device}")
    if device != "cpu":
        print(f"{results['device_name']}, torch {torch.__version__}, reference in {args.reference_precision}")
    on_device = [f"device='{args.device}'"] + ([f"train.precision='{args.precision}'"] if args.precision else [])
    cfg = load_config(args.config, on_device)
    if "minilm" in rows:
        results["minilm_scalar"] = compare(
            "MiniLM scalar reward (quick config)",
            cfg,
            args.clients,
            args.steps,
            ReferenceScalar,
            args.repeats,
            reference_precision=args.reference_precision,
        )
    if "stories" in rows and not STORIES.is_dir():
        print(f"\n(skipping the stories260K selector: {STORIES} not found)")
    elif "stories" in rows:
        sel = load_config(
            args.config,
            [f"model.backbone='{STORIES}'", "model.head='selector'", "lora.top_layers=0", "data.max_length=256"]
            + on_device,
        )
        results["stories_selector"] = compare(
            "stories260K A/B selector",
            sel,
            args.clients,
            args.steps,
            ReferenceSelector,
            args.repeats,
            reference_precision=args.reference_precision,
        )
    if "smollm2" in rows:
        sel = load_config(
            args.config,
            ["model.backbone='smollm2'", "model.head='selector'", "lora.top_layers=0", "lora.dropout=0.05"]
            + [f"data.max_length={args.smollm2_length}"]
            + on_device,
        )
        results["smollm2_selector"] = compare(
            "SmolLM2-135M-Instruct A/B selector (real weights, LoRA on all 30 layers)",
            sel,
            args.smollm2_clients,
            args.smollm2_steps,
            ReferenceSelector,
            args.repeats,
            test_pairs=args.paper_eval_pairs,
            reference_precision=args.reference_precision,
        )
    for row in (r for r in rows if r in PAPER_ROWS):
        results[row] = paper_row(row, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
