"""Each lever of the causal A/B selector measured alone, at Qwen2-0.5B size (random weights), in one run.

Every variant trains the same batches of the same LoRA selector (the papers' placement: every layer, r 8,
alpha 16) and must compute the same margins as fedpref's default; the script prints each one's training
step and evaluation time (median over alternating repeats), its ratio to the papers' way, the activation
memory its forward keeps for the backward pass (bytes of the tensors autograd saves), and its largest margin
difference from the default.

    .venv/bin/python benchmarks/causal_levers.py [--model qwen2-0.5b] [--batch 2] [--length 1024] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from fedpref.config import load_config
from fedpref.data.splits import split_clients
from fedpref.experiments.setup import load_pairs
from fedpref.models.backbone import set_activation_checkpointing
from fedpref.models.encoded import EncodedPairs, pad

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paper_models import build_paper_selector  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
Margins = Callable[[EncodedPairs, torch.Tensor], torch.Tensor]


def margins_fn(model, fixed_padding: bool, full_logits: bool) -> Margins:
    """The selector's margins computed the papers' way (`fixed_padding` to max_length, `full_logits`: the LM head
    over every position and token) or fedpref's (the batch's longest sequence, two letter logits at the end)."""
    base = model.lm.get_base_model()
    letters = model.letters

    def margins(enc: EncodedPairs, index: torch.Tensor) -> torch.Tensor:
        ids, mask = pad([enc.seqs[i] for i in index.tolist()], model.tokenizer.pad_token_id)
        if fixed_padding:
            ids = F.pad(ids, (0, model.max_length - ids.shape[1]), value=model.tokenizer.pad_token_id)
            mask = F.pad(mask, (0, model.max_length - mask.shape[1]))
        rows, last = torch.arange(len(ids)), mask.sum(1) - 1
        if full_logits:
            logits = base(input_ids=ids, attention_mask=mask, use_cache=False).logits  # (B, L, V)
            pair = logits[rows, last][:, letters]
        else:
            hidden = base.get_decoder()(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
            pair = hidden[rows, last] @ base.get_output_embeddings().weight[letters].T  # (B, 2)
        diff = (pair[:, 0] - pair[:, 1]).float()
        return torch.where(enc.chosen_is_a[index], diff, -diff)

    return margins


@dataclass
class Variant:
    name: str
    model: torch.nn.Module
    margins: Margins
    setup: Callable[[], None] = lambda: None  # switch the lever on (on a shared model)
    teardown: Callable[[], None] = lambda: None
    autocast: bool = False  # bf16 autocast around the forward
    own_encoding: bool = False  # encodes its pairs itself (the frozen-prefix cache's hidden states)

    def step(self, optimizer, enc: EncodedPairs, index: torch.Tensor) -> None:
        self.model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):
            loss = -F.logsigmoid(self.margins(enc, index).float()).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        self.model.eval()

    @torch.inference_mode()
    def evaluate(self, enc: EncodedPairs, chunk: int) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):
            parts = [self.margins(enc, torch.arange(s, min(s + chunk, len(enc)))) for s in range(0, len(enc), chunk)]
        return torch.cat(parts).float()


def saved_activation_bytes(variant: Variant, enc: EncodedPairs, index: torch.Tensor) -> int:
    """Bytes of the distinct tensors autograd keeps from one training forward for its backward pass."""
    seen: dict[int, int] = {}
    weights = {p.untyped_storage().data_ptr() for p in variant.model.parameters()}  # kept anyway: not activations

    def pack(t: torch.Tensor):
        storage = t.untyped_storage()
        if storage.data_ptr() not in weights:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    variant.setup()
    variant.model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=variant.autocast):
            loss = -F.logsigmoid(variant.margins(enc, index).float()).mean()
    loss.backward()
    variant.model.zero_grad(set_to_none=True)
    variant.model.eval()
    variant.teardown()
    return sum(seen.values())


def build_variants(args, lora) -> list[Variant]:
    """The papers' way, fedpref's default, and each lever alone (models shared where a switch suffices)."""
    fp32 = build_paper_selector(args.model, lora, args.length, seed=0)
    base = fp32.lm.get_base_model()
    default = margins_fn(fp32, fixed_padding=False, full_logits=False)

    def attention(kind: str) -> Callable[[], None]:
        return lambda: setattr(base.config, "_attn_implementation", kind)

    def checkpointing(on: bool) -> Callable[[], None]:
        def switch() -> None:
            set_activation_checkpointing(base, on)
            fp32.eval()  # set_lora_training: checkpointed layers follow the model's mode

        return switch

    variants = [
        Variant("papers' way (fixed padding, full-vocabulary logits)", fp32, margins_fn(fp32, True, True)),
        Variant("  fedpref default (dynamic padding, two letter logits, SDPA, fp32)", fp32, default),
    ]
    if "only" in args.variants:  # the default and the optional variants named, nothing else
        return variants[1:] + optional_variants(args, lora)
    variants += [
        Variant("  lever off: full-vocabulary logits at every position", fp32, margins_fn(fp32, False, True)),
        Variant("  lever off: fixed padding to max_length", fp32, margins_fn(fp32, True, False)),
        Variant(
            "  eager attention instead of SDPA", fp32, default, setup=attention("eager"), teardown=attention("sdpa")
        ),
        Variant("  + gradient checkpointing", fp32, default, setup=checkpointing(True), teardown=checkpointing(False)),
        Variant("  + bf16 autocast (fp32 weights)", fp32, default, autocast=True),
    ]
    return variants + optional_variants(args, lora)


def optional_variants(args, lora) -> list[Variant]:
    """The variants that need a model of their own: bf16 weights, top-2 LoRA, torch.compile."""
    variants = []
    if "bf16" in args.variants:
        bf16 = build_paper_selector(args.model, lora, args.length, seed=0, dtype=torch.bfloat16)
        variants.append(Variant("  + bf16 weights (model.dtype = 'bf16'; LoRA fp32)", bf16, default_for(bf16)))
    if "top2" in args.variants:
        top2 = type(lora)(**{**vars(lora), "top_layers": 2})
        top = build_paper_selector(args.model, top2, args.length)
        variants.append(Variant("LoRA on the top 2 layers: papers' way", top, margins_fn(top, True, True)))
        variants.append(Variant("  fedpref, whole forward each step", top, default_for(top)))
        variants.append(Variant("  fedpref, frozen-prefix cache (default)", top, top.margins, own_encoding=True))
    if "compile" in args.variants:
        variants.append(compiled_variant(args, lora))
    return variants


def default_for(model) -> Margins:
    return margins_fn(model, fixed_padding=False, full_logits=False)


def compiled_variant(args, lora) -> Variant:
    """torch.compile of every decoder layer (dynamic shapes); its compile time is part of the first steps."""
    model = build_paper_selector(args.model, lora, args.length, seed=0)
    for layer in model.lm.get_base_model().get_decoder().layers:
        layer.compile(dynamic=True)
    return Variant("  + torch.compile of the decoder layers", model, default_for(model))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2-0.5b")
    parser.add_argument("--config", default="quick", help="whose pairs to use (a file or a shipped config)")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument(
        "--length", type=int, default=1024, help="max_length, the papers' way pads to it (FedBiscuit's configs: 1024)"
    )
    parser.add_argument("--eval-pairs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--variants",
        default="bf16,top2",
        help="optional variants: bf16, top2, compile; with 'only', just fedpref's default and these",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "causal_levers.json")
    args = parser.parse_args()
    cfg = load_config(args.config, ["lora.top_layers=0", "lora.dropout=0.05"])  # the model itself comes from JSON
    split = split_clients(load_pairs(cfg), cfg.data.val_pairs, cfg.data.test_pairs, cfg.seed)[0]
    variants = build_variants(args, cfg.lora)
    train = variants[0].model.encode(split.train)
    test = variants[0].model.encode(split.test[: args.eval_pairs])
    data = {v.name: (train, test) for v in variants}
    for v in variants:
        if v.own_encoding:
            start = time.perf_counter()
            data[v.name] = (v.model.encode(split.train), v.model.encode(split.test[: args.eval_pairs]))
            print(
                f"{v.name.strip()}: encoding {len(split.train)} + {args.eval_pairs} pairs took "
                f"{time.perf_counter() - start:.1f} s (once per run)"
            )
    batches = [torch.arange(i * args.batch, (i + 1) * args.batch) % len(train) for i in range(args.repeats + 1)]
    lengths = [len(s) for s in train.seqs]
    print(
        f"{args.model}, batch {args.batch}, max_length {args.length}; sequence lengths mean "
        f"{statistics.mean(lengths):.0f}, max {max(lengths)}; {torch.get_num_threads()} threads"
    )
    reference = next(v for v in variants if "fedpref default" in v.name).evaluate(test, args.batch)
    rows = {}
    for v in variants:  # before any training step: every LoRA B is still zero, every variant the same function
        v.setup()
        difference = float((v.evaluate(data[v.name][1], args.batch) - reference).abs().max())
        rows[v.name] = {"max_margin_difference": difference, "train_s": [], "eval_s": []}
        v.teardown()
    for v in variants:
        v.setup()
        start = time.perf_counter()
        optimizer = torch.optim.AdamW([p for p in v.model.parameters() if p.requires_grad], lr=1e-5)
        v.step(optimizer, data[v.name][0], batches[0])
        rows[v.name]["first_step_s"] = time.perf_counter() - start  # warm-up (and compilation)
        v.teardown()
    for r in range(args.repeats):  # alternating: a drift in the machine's speed hits every variant alike
        for v in variants:
            optimizer = torch.optim.AdamW([p for p in v.model.parameters() if p.requires_grad], lr=1e-5)
            v.setup()
            start = time.perf_counter()
            v.step(optimizer, data[v.name][0], batches[r + 1])
            rows[v.name]["train_s"].append(time.perf_counter() - start)
            start = time.perf_counter()
            v.evaluate(data[v.name][1], args.batch)
            rows[v.name]["eval_s"].append(time.perf_counter() - start)
            v.teardown()
    for v in variants:
        rows[v.name]["saved_activations_mb"] = saved_activation_bytes(v, data[v.name][0], batches[0]) / 2**20
    report(rows, args)


def report(rows: dict, args) -> None:
    """One line per variant; ratios against the group's first row (the papers' way with the same LoRA layers)."""
    print(
        f"\n{'variant':66s} {'step s':>7s} {'ratio':>6s} {'eval s':>7s} {'ratio':>6s} {'act MB':>7s} "
        f"{'1st step s':>10s} {'max |dm|':>9s}"
    )
    for i, (name, row) in enumerate(rows.items()):
        train, evaluation = statistics.median(row["train_s"]), statistics.median(row["eval_s"])
        if i == 0 or not name.startswith(" "):  # a group's reference: the papers' way (or the first row)
            ref_train, ref_eval = train, evaluation
        row |= {"train_median_s": train, "eval_median_s": evaluation}
        row |= {"train_speedup": ref_train / train, "eval_speedup": ref_eval / evaluation}
        print(
            f"{name:66s} {train:7.2f} {row['train_speedup']:5.2f}x {evaluation:7.2f} {row['eval_speedup']:5.2f}x "
            f"{row['saved_activations_mb']:7.0f} {row['first_step_s']:10.1f} {row['max_margin_difference']:9.2e}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
