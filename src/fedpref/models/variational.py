"""Latent-conditioned A/B selector of FedVPA-GP (paper 001, Sec. 3.2-4.4) on an encoder or a causal-LM selector."""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass

import torch
from torch import nn

from fedpref.config import (
    CONDITIONINGS,
    LATENT_CONTEXTS,
    VARIATIONAL_CHOICES,
    VPA_DIAGNOSIS_CHOICES,
    VariationalConfig,
    VPADiagnosisConfig,
    derive,
)
from fedpref.errors import ConfigError
from fedpref.models.adapters import State, trainable_state
from fedpref.models.encoded import EncodedPairs
from fedpref.models.scalar_reward import ScalarRewardModel
from fedpref.models.selector_reward import SelectorRewardModel
from fedpref.models.variational_math import cap_logvar, init_prototypes, prototype_coordinates, reparameterize

BASE_PREFIX = "base."  # trainable-state keys of the wrapped reward model (LoRA, and the scalar head if any)


@dataclass(frozen=True)
class VariationalSpec:
    """Architecture of the variational modules (everything a client needs to rebuild them).

    conditioning: 'additive' is the paper's logits = logits_base + f(z) (Sec. 4.4), a content-free shift;
    'projected' makes the shift content-aware: delta_k = f(z) . W LN(h_k) for response k (see `logit_shift`).
    latent_context: 'pair' is Algorithm 2 line 14 (z from the pair's own difference embedding);
    'other_half' takes each pair's z from the other half of its batch (client-level, as at test time).
    latent_source: 'inferred' (the method); 'oracle' replaces z, in training and evaluation, by the client's
    true type as a one-hot at the prototype radius (`oracle_latent`), to test the z path apart from inference.
    selector_reads: in training the selector reads the sampled z ('sample', Eq. 17) or its context posterior's
    mean ('mean', no sampling noise); detach_latent: the selector's loss does not reach the inference network.
    selector_basis: 'latent' (f reads z) or 'prototypes' (f reads z's coordinates along the prototypes).
    Every field is required: a run's spec is `from_config` (the defaults live in `VariationalConfig`).
    """

    latent_dim: int
    feature_dim: int
    sigma_max: float
    p_logit: float
    num_prototypes: int
    prototype_scale: float
    conditioning: str
    latent_context: str
    latent_source: str
    selector_reads: str
    selector_basis: str
    detach_latent: bool
    seed: int

    @classmethod
    def from_config(cls, options: VariationalConfig, study: VPADiagnosisConfig, seed: int) -> VariationalSpec:
        """The spec of a run: each field by name from the method's options, else the diagnosis study's switches."""
        return derive(cls, options, study, seed=seed)

    def to_payload(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class TrainOutputs:
    """One training batch: A/B logits, targets (0: A chosen), pair posteriors, and the context z."""

    logits: torch.Tensor  # (B, 2)
    target: torch.Tensor  # (B,)
    mu: torch.Tensor  # (B, d) per-pair posterior means
    ctx_mu: torch.Tensor  # (B, d) posterior each pair's z is drawn from
    ctx_logvar: torch.Tensor  # (B, d)
    z: torch.Tensor  # (B, d)


def position_flags(enc: EncodedPairs) -> torch.Tensor:
    """(N,) True where the chosen response is A: the selector's flags, else a fixed coin flip per pair."""
    if enc.chosen_is_a is not None:
        return enc.chosen_is_a.bool()
    return torch.rand(len(enc), generator=torch.Generator().manual_seed(len(enc))) < 0.5


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class VariationalSelector(nn.Module):
    """logits(A, B | z) = logits_base(A, B) + shift(z) (Sec. 4.4); z ~ q(z | dh) (Eq. 5).

    Encoder path: the base logits are the scalar rewards (r_A, r_B) of the two responses (LoRA + head,
    trained); dh = h_chosen - h_rejected uses the frozen backbone's pooled embedding of each response.
    Causal-LM path (a `SelectorRewardModel`, one prompt per pair): the base logits are the letters' logits
    at the last position (LoRA trained); h is the frozen LM's final-layer hidden state at the last token of
    each response span (Sec. 4.1, `SelectorRewardModel.response_ends`). Both frozen embeddings are taken
    with the adapters disabled and cached once per dataset. Modules: feature extractor H -> 2F -> F, posterior
    head F -> 2d (mu, log sigma^2 capped at log sigma_max^2), latent projection f: d -> 64 -> 32 -> 2
    (Table 4), M prototypes (Sec. 4.2), and for 'projected' conditioning W: H -> 2.
    """

    def __init__(self, base: nn.Module, spec: VariationalSpec):
        super().__init__()
        if not isinstance(base, (ScalarRewardModel, SelectorRewardModel)):
            raise ConfigError(
                "FedVPA-GP / FedVPL need a scalar reward model (encoder backbones) or an A/B selector "
                f"(causal LMs), got {type(base).__name__}"
            )
        check_spec(spec)
        self.base, self.spec = base, spec
        self.causal = isinstance(base, SelectorRewardModel)
        hidden = (base.lm if self.causal else base.bert).config.hidden_size
        d, f = spec.latent_dim, spec.feature_dim
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(spec.seed)
            self.features = nn.Sequential(_mlp([hidden, 2 * f, f]), nn.ReLU())
            self.posterior = nn.Linear(f, 2 * d)
            self.latent = _mlp([d, 64, 32, 2])  # f_theta, Table 4
            self.projection = nn.Linear(hidden, 2, bias=False) if spec.conditioning == "projected" else None
        generator = torch.Generator().manual_seed(spec.seed)
        self.prototypes = nn.Parameter(init_prototypes(spec.num_prototypes, d, spec.prototype_scale, generator))
        self.to(next(base.parameters()).device)
        self.initial_modules = {k: v for k, v in trainable_state(self).items() if not k.startswith(BASE_PREFIX)}
        self._frozen: dict[int, torch.Tensor] = {}

    def train(self, mode: bool = True):
        super().train(mode)
        self.base.train(mode)  # LoRA dropout only; the frozen backbone stays in eval mode
        return self

    def initial_state(self, base_state: State) -> State:
        """The starting shared state: the given reward-model state plus these modules' initial weights."""
        return {**{BASE_PREFIX + k: v.clone() for k, v in base_state.items()}, **self.initial_modules}

    # ------------------------------------------------------------ embeddings

    def frozen_embeddings(self, enc: EncodedPairs) -> torch.Tensor:
        """(N, 2, H) frozen-backbone embeddings of (chosen, rejected), computed once per dataset."""
        key = id(enc)
        if key not in self._frozen:
            self._frozen[key] = self._span_frozen(enc) if self.causal else self._pooled_frozen(enc.seqs)
            weakref.finalize(enc, self._frozen.pop, key, None)
        return self._frozen[key]

    @torch.no_grad()
    def _pooled_frozen(self, seqs: list[torch.Tensor], chunk: int = 64) -> torch.Tensor:
        base, parts = self.base, []
        with base.encoder.disable_adapter():
            for start in range(0, len(seqs), chunk):
                parts.append(base.pooled(seqs[start : start + chunk]).float())
        return torch.cat(parts).view(-1, 2, parts[0].shape[-1])

    @torch.no_grad()
    def _span_frozen(self, enc: EncodedPairs, chunk: int = 64) -> torch.Tensor:
        """(N, 2, H) final-token hidden states of the (chosen, rejected) spans of the frozen causal LM."""
        ends, parts = self.base.response_ends(enc), []  # (N, 2) over (A, B)
        with self.base.lm.disable_adapter():
            for start in range(0, len(enc), chunk):
                hidden, _ = self.base.final_hidden(enc.seqs[start : start + chunk])  # (B, L, H)
                rows = torch.arange(hidden.shape[0], device=hidden.device).unsqueeze(-1)
                parts.append(hidden[rows, ends[start : start + chunk].to(hidden.device)].float())  # (B, 2, H)
        h_ab = torch.cat(parts)
        return torch.where(enc.chosen_is_a.to(h_ab.device)[:, None, None], h_ab, h_ab.flip(1))

    # ------------------------------------------------------------ inference network (Sec. 4.1)

    def pair_posteriors(self, enc: EncodedPairs, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mu, capped log sigma^2), each (B, d), of q(z | dh) for the pairs at `index` (Eq. 5)."""
        h = self.frozen_embeddings(enc)[index.to(self.prototypes.device)]
        out = self.posterior(self.features(h[:, 0] - h[:, 1]))
        mu, logvar = out.chunk(2, dim=-1)
        return mu, cap_logvar(logvar, self.spec.sigma_max)

    def context(self, mu: torch.Tensor, logvar: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each pair's latent posterior: its own ('pair'), or the mean over the other half of the batch.

        'other_half' averages the posteriors (means and variances) of the half the pair is not in, so a
        pair's z never depends on its own label (a leave-one-out mean would: it is the batch sum minus the
        pair's own mu). A batch of one pair falls back to the pair's own posterior.
        """
        n = mu.shape[0]
        if self.spec.latent_context == "pair" or n == 1:
            return mu, logvar
        half = n // 2
        var = logvar.exp()
        first = (mu[half:].mean(0), var[half:].mean(0))  # context of the first half
        second = (mu[:half].mean(0), var[:half].mean(0))
        ctx_mu = torch.cat([first[0].expand(half, -1), second[0].expand(n - half, -1)])
        ctx_var = torch.cat([first[1].expand(half, -1), second[1].expand(n - half, -1)])
        return ctx_mu, ctx_var.log()

    def selector_input(self, z: torch.Tensor, center: torch.Tensor | None = None, scale: float = 1.0) -> torch.Tensor:
        """What f reads of z: centred and scaled (`read_latent`)."""
        return read_latent(z, center, scale)

    def training_latent(self, z: torch.Tensor, ctx_mu: torch.Tensor, oracle_z: torch.Tensor | None) -> torch.Tensor:
        """(B, d) the latent the selector reads in training: the sample z (Eq. 17) or its context posterior's mean.
        `oracle_z` is the diagnosis study's (VariationalStudySelector); the method has none."""
        return z if self.spec.selector_reads == "sample" else ctx_mu

    def oracle(self, group: str | None, blind: bool = False) -> torch.Tensor | None:
        """The latent that replaces z in training for a client of true type `group`: none for the method itself."""
        return None

    def evaluation_latent(self, z: torch.Tensor, group: str | None) -> torch.Tensor:
        """The latent the selector reads in evaluation: the client's own z."""
        return z

    def client_context(self, enc: EncodedPairs, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """('client') The mean posterior of every training pair of the client outside this batch, for each pair
        of the batch: the test-time latent (all the client's pairs) without the batch's own labels."""
        rest = torch.ones(len(enc), dtype=torch.bool)
        rest[index] = False
        if not rest.any():
            rest[:] = True
        mu, logvar = self.pair_posteriors(enc, torch.nonzero(rest).squeeze(-1))
        ctx_mu, ctx_var = mu.mean(0), logvar.exp().mean(0)
        return ctx_mu.expand(len(index), -1), ctx_var.log().expand(len(index), -1)

    # ------------------------------------------------------------ selector (Sec. 4.4)

    def base_logits(self, enc: EncodedPairs, index: torch.Tensor, chosen_is_a: torch.Tensor) -> torch.Tensor:
        """(B, 2) base logits of (A, B): the trained scalar rewards of the two responses, or the letter logits."""
        if self.causal:
            return self.base.letter_logits(enc, index)
        seqs = [enc.seqs[2 * i + k] for i in index.tolist() for k in (0, 1)]
        r = self.base.rewards(seqs).view(-1, 2)  # (chosen, rejected)
        return torch.where(chosen_is_a.unsqueeze(-1), r, r.flip(-1))

    def logit_shift(self, z: torch.Tensor, h_ab: torch.Tensor) -> torch.Tensor:
        """(B, 2) shift of the A/B logits: f(z) ('additive'), or f(z) . W h_k per response k ('projected')."""
        f = self.latent(z)
        if self.projection is None:
            return f
        # Layer-normalized h: raw pooled embeddings differ by ~0.03 under W between two responses, too small
        # for f(z) to ever matter next to trained base logits (~1); normalized, the difference is ~0.3.
        h_ab = nn.functional.layer_norm(h_ab, h_ab.shape[-1:])
        return (self.projection(h_ab) * f.unsqueeze(1)).sum(-1)

    def logit_parts(self, enc: EncodedPairs, index: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(base, shift), each (B, 2) over (A, B), of the pairs at `index` under z ((d,), (1, d) or (B, d))."""
        device = self.prototypes.device
        chosen_is_a = position_flags(enc)[index].to(device)
        h = self.frozen_embeddings(enc)[index.to(device)]
        h_ab = torch.where(chosen_is_a[:, None, None], h, h.flip(1))
        shift = self.logit_shift(z.expand(len(index), -1), h_ab)
        return self.base_logits(enc, index, chosen_is_a), shift

    def logits(
        self, enc: EncodedPairs, index: torch.Tensor, z: torch.Tensor, keep_base: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(B, 2) logits(A, B | z) of the pairs at `index`; `keep_base` (B,) 0/1 drops base logits per pair."""
        base, shift = self.logit_parts(enc, index, z)
        if keep_base is not None:
            base = base * keep_base.unsqueeze(-1).to(base.dtype)
        return base + shift

    def training_outputs(
        self,
        enc: EncodedPairs,
        index: torch.Tensor,
        generator: torch.Generator,
        oracle_z: torch.Tensor | None = None,
        center: torch.Tensor | None = None,
        scale: float = 1.0,
    ) -> TrainOutputs:
        """Algorithm 2 lines 11-18 for one batch, with base-logit dropout at rate p_logit.

        The selector reads (z - `center`) / `scale` (`read_latent`). `oracle_z` (d,) replaces the sampled z in
        the logits only (latent_source 'oracle'); the KL and the prototype pull always see the sampled z itself,
        so the inference network trains as usual.
        """
        mu, logvar = self.pair_posteriors(enc, index)
        if self.spec.latent_context == "client":
            ctx_mu, ctx_logvar = self.client_context(enc, index)
        else:
            ctx_mu, ctx_logvar = self.context(mu, logvar)
        z = reparameterize(ctx_mu, ctx_logvar, generator)
        z_logits = self.selector_input(self.training_latent(z, ctx_mu, oracle_z), center, scale)
        keep = (torch.rand(len(index), generator=generator) >= self.spec.p_logit).float()
        logits = self.logits(enc, index, z_logits, keep)
        target = (~position_flags(enc)[index]).long().to(logits.device)
        return TrainOutputs(logits, target, mu, ctx_mu, ctx_logvar, z)


class VariationalStudySelector(VariationalSelector):
    """The selector under the diagnosis study's model switches ([vpa_diagnosis]; docs/fedvpa.md, "Diagnosis"):
    z replaced by the true type's latent (`latent_source`), the selector's loss stopped at z (`detach_latent`),
    f reading z in the prototype basis (`selector_basis`). Built only for a spec that sets one (`variational_model`),
    so the method's own selector has no branch for them."""

    def selector_input(self, z: torch.Tensor, center: torch.Tensor | None = None, scale: float = 1.0) -> torch.Tensor:
        z = super().selector_input(z, center, scale)
        return prototype_coordinates(z, self.prototypes) if self.spec.selector_basis == "prototypes" else z

    def training_latent(self, z: torch.Tensor, ctx_mu: torch.Tensor, oracle_z: torch.Tensor | None) -> torch.Tensor:
        z_read = super().training_latent(z, ctx_mu, oracle_z)
        if self.spec.detach_latent:
            z_read = z_read.detach()
        return z_read if oracle_z is None else oracle_z.to(z.device).expand_as(z)

    def oracle(self, group: str | None, blind: bool = False) -> torch.Tensor | None:
        """The true type's latent (`oracle_latent`) with latent_source 'oracle' / 'oracle_shared'; zeros while
        `blind` (the rounds before oracle_from_round)."""
        if self.spec.latent_source == "inferred":
            return None
        z = oracle_latent(group, self.spec)
        return torch.zeros_like(z) if blind else z

    def evaluation_latent(self, z: torch.Tensor, group: str | None) -> torch.Tensor:
        oracle_z = self.oracle(group)
        return z if oracle_z is None else oracle_z.to(z.device)


def sets_a_study_switch(spec: VariationalSpec) -> bool:
    """Whether `spec` differs from the method in one of the diagnosis study's switches (VPADiagnosisConfig's
    defaults are the method)."""
    method = VPADiagnosisConfig()
    return any(getattr(spec, k) != getattr(method, k) for k in dataclasses.asdict(spec) if hasattr(method, k))


def read_latent(z: torch.Tensor, center: torch.Tensor | None, scale: float) -> torch.Tensor:
    """What the selector reads of a latent z: (z - center) / scale (identity without centre and at scale 1)."""
    if center is not None:
        z = z - center.to(z.device)
    return z / scale


def oracle_latent(group: str | None, spec: VariationalSpec) -> torch.Tensor:
    """(d,) the true type G<k> as the one-hot e_(k-1) at the prototype radius (latent_source 'oracle').

    'oracle_shared' adds a component common to every type, twice as long (s * 2 e_(d-1)): the same type
    difference on top of a shared offset, as inferred latents have before they are centred.
    """
    if group is None or not group.lstrip("G").isdigit():
        raise ConfigError(f"vpa_diagnosis.latent_source = 'oracle' needs clients with a true type G<k>, got {group!r}")
    index = int(group.lstrip("G")) - 1
    if not 0 <= index < spec.latent_dim - 1:
        raise ConfigError(f"type {group} has no oracle latent in d = {spec.latent_dim} dimensions")
    z = torch.zeros(spec.latent_dim)
    z[index] = spec.prototype_scale
    if spec.latent_source == "oracle_shared":
        z[-1] = 2 * spec.prototype_scale
    return z


def check_spec(spec: VariationalSpec) -> None:
    choices = {"conditioning": CONDITIONINGS, "latent_context": LATENT_CONTEXTS, **VARIATIONAL_CHOICES}
    tables = {**dict.fromkeys(choices, "variational"), **dict.fromkeys(VPA_DIAGNOSIS_CHOICES, "vpa_diagnosis")}
    for key, allowed in {**choices, **VPA_DIAGNOSIS_CHOICES}.items():
        if hasattr(spec, key) and getattr(spec, key) not in allowed:
            raise ConfigError(f"{tables[key]}.{key} must be one of {', '.join(allowed)}")
    if not 1 <= spec.num_prototypes <= spec.latent_dim:
        raise ConfigError("variational.num_prototypes must be between 1 and variational.latent_dim")


_MODELS: dict[tuple[int, VariationalSpec], VariationalSelector] = {}


def variational_model(base: nn.Module, spec: VariationalSpec) -> VariationalSelector:
    """The selector wrapping `base` for `spec`, built once per (reward model, spec) and then reused.

    The engines hand clients a trainer around the plain reward model; this is how a client gets the
    variational modules around it without changing the engines. Weights always come from the task's state.
    """
    key = (id(base), spec)
    if key not in _MODELS:
        _MODELS[key] = (VariationalStudySelector if sets_a_study_switch(spec) else VariationalSelector)(base, spec)
    return _MODELS[key]
