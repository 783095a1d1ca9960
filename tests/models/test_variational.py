"""The latent-conditioned selector on MiniLM (paper 001, Sec. 4): embeddings, posterior, shift, dropout, state."""

import dataclasses
import math

import pytest
import torch
from torch import nn

from fedpref.config import ExperimentConfig, VariationalConfig, VPADiagnosisConfig
from fedpref.data.synthetic import generate_synthetic_with_axes
from fedpref.errors import ConfigError
from fedpref.models.adapters import trainable_state
from fedpref.models.encoded import EncodedPairs
from fedpref.models.factory import build_reward_model
from fedpref.models.variational import (
    BASE_PREFIX,
    VariationalSelector,
    VariationalSpec,
    VariationalStudySelector,
    oracle_latent,
    position_flags,
    variational_model,
)

# The paper's literal reading of z in training (the sampled z of Eq. 17), as these tests were written for.
OPTIONS = VariationalConfig(latent_dim=8, feature_dim=16, sigma_max=0.5, selector_reads="sample")
SPEC = VariationalSpec.from_config(OPTIONS, VPADiagnosisConfig(), seed=0)


@pytest.fixture(scope="module")
def base():
    cfg = ExperimentConfig()
    cfg.data.max_length = 64
    cfg.lora.rank, cfg.lora.top_layers = 4, 1
    return build_reward_model(cfg)


@pytest.fixture(scope="module")
def enc(base) -> EncodedPairs:
    pairs = [p for p, axis in generate_synthetic_with_axes([1, 1, 0, 0], 6, 0) if axis == "humor"]
    return base.encode(pairs)


def test_posterior_shapes_and_capped_log_variance(base, enc):
    model = VariationalSelector(base, dataclasses.replace(SPEC, sigma_max=0.1))
    with torch.no_grad():
        model.posterior.bias[8:] = 10.0  # push log sigma^2 far above the cap
        mu, logvar = model.pair_posteriors(enc, torch.arange(4))
    assert mu.shape == logvar.shape == (4, 8)
    assert float(logvar.max()) <= 2 * math.log(0.1) + 1e-6


def test_frozen_embeddings_ignore_the_adapters_and_are_cached(base, enc):
    model = VariationalSelector(base, SPEC)
    h = model.frozen_embeddings(enc)
    assert h.shape == (len(enc), 2, base.bert.config.hidden_size)
    assert model.frozen_embeddings(enc) is h
    state = trainable_state(base)
    with torch.no_grad():
        for n, p in base.named_parameters():
            if "lora_B" in n:
                p.add_(0.5)
        adapted = base.pooled(enc.seqs[:2])
        fresh = model._pooled_frozen(enc.seqs[:2])
    torch.testing.assert_close(fresh.view(2, -1), h[0].reshape(2, -1))
    assert not torch.allclose(adapted, fresh.view(2, -1))
    with torch.no_grad():
        for n, p in base.named_parameters():
            if n in state:
                p.copy_(state[n])


def test_base_logits_are_the_rewards_of_a_and_b(base, enc):
    model = VariationalSelector(base, SPEC)
    index, z = torch.arange(5), torch.randn(5, 8)
    with torch.no_grad():
        base_logits, _ = model.logit_parts(enc, index, z)
        r = base.rewards([enc.seqs[2 * i + k] for i in range(5) for k in (0, 1)]).view(-1, 2)
    flags = position_flags(enc)[:5]
    chosen_logit = torch.where(flags, base_logits[:, 0], base_logits[:, 1])
    torch.testing.assert_close(chosen_logit, r[:, 0])


def test_projected_shift_sees_layer_normalized_embeddings(base):
    """f(z) . W LN(h_k): rescaling or offsetting an embedding leaves the shift unchanged; z changes it."""
    model = VariationalSelector(base, SPEC)
    z, h = torch.randn(3, 8), torch.randn(3, 2, base.bert.config.hidden_size)
    with torch.no_grad():
        shift = model.logit_shift(z, h)
        torch.testing.assert_close(model.logit_shift(z, 4.0 * h + 1.0), shift, rtol=1e-4, atol=1e-5)
        assert not torch.allclose(model.logit_shift(z + 1.0, h), shift)


def test_base_logit_dropout_leaves_only_the_latent_shift(base, enc):
    model = VariationalSelector(base, SPEC)
    with torch.no_grad():
        nn.init.normal_(model.latent[-1].weight)
        index, z = torch.arange(3), torch.randn(1, 8)
        _, shift = model.logit_parts(enc, index, z)
        dropped = model.logits(enc, index, z, keep_base=torch.zeros(3))
    torch.testing.assert_close(dropped, shift)
    assert float(shift.abs().max()) > 0


def test_additive_conditioning_ignores_the_responses_and_projected_does_not(base, enc):
    index, z = torch.arange(6), torch.randn(1, 8)
    shifts = {}
    for mode in ("additive", "projected"):
        model = VariationalSelector(base, dataclasses.replace(SPEC, conditioning=mode))
        with torch.no_grad():
            nn.init.normal_(model.latent[-1].weight)
            shifts[mode] = model.logit_parts(enc, index, z)[1]
    assert torch.allclose(shifts["additive"], shifts["additive"][:1].expand(6, -1))
    assert not torch.allclose(shifts["projected"], shifts["projected"][:1].expand(6, -1))


def test_other_half_context_never_depends_on_the_pair_itself(base):
    model = VariationalSelector(base, SPEC)
    mu, logvar = torch.randn(5, 8), torch.randn(5, 8).clamp_max(0)
    ctx_mu, ctx_logvar = model.context(mu, logvar)
    torch.testing.assert_close(ctx_mu[0], mu[2:].mean(0))  # halves: pairs 0-1 and pairs 2-4
    torch.testing.assert_close(ctx_logvar[4].exp(), logvar[:2].exp().mean(0))
    changed = mu.clone()
    changed[0] += 100.0
    torch.testing.assert_close(model.context(changed, logvar)[0][:2], ctx_mu[:2])
    own = VariationalSelector(base, dataclasses.replace(SPEC, latent_context="pair")).context(mu, logvar)
    assert own[0] is mu


def test_training_outputs_targets_follow_the_positions(base, enc):
    model = VariationalSelector(base, SPEC)
    out = model.training_outputs(enc, torch.arange(6), torch.Generator().manual_seed(0))
    assert out.logits.shape == (6, 2) and out.z.shape == (6, 8)
    torch.testing.assert_close(out.target, (~position_flags(enc)[:6]).long())
    flags = position_flags(enc)
    assert flags.any() and not flags.all()
    assert torch.equal(flags, position_flags(enc))


def test_state_holds_the_reward_model_and_the_variational_modules(base):
    model = variational_model(base, SPEC)
    assert variational_model(base, SPEC) is model
    keys = set(trainable_state(model))
    base_keys = {BASE_PREFIX + k for k in trainable_state(base)}
    assert base_keys < keys and "prototypes" in keys
    modules = {k.split(".")[0] for k in keys - base_keys}
    assert modules == {"features", "posterior", "latent", "projection", "prototypes"}
    init = model.initial_state(trainable_state(base))
    assert init.keys() == keys


def test_causal_backbones_and_bad_specs_fail_clearly(base):
    with pytest.raises(ConfigError, match="encoder backbones"):
        VariationalSelector(nn.Linear(2, 2), SPEC)
    with pytest.raises(ConfigError, match="conditioning"):
        VariationalSelector(base, dataclasses.replace(SPEC, conditioning="multiplicative"))


def test_oracle_latent_is_the_true_type_at_the_prototype_radius():
    z = oracle_latent("G2", SPEC)
    assert z.tolist() == [0.0, 5.0] + [0.0] * 6
    shared = oracle_latent("G1", dataclasses.replace(SPEC, latent_source="oracle_shared"))
    assert shared.tolist() == [5.0] + [0.0] * 6 + [10.0]
    with pytest.raises(ConfigError, match="true type"):
        oracle_latent(None, SPEC)


def test_the_selector_reads_the_oracle_or_centred_z_but_the_losses_see_the_sample(base, enc):
    model = VariationalStudySelector(base, dataclasses.replace(SPEC, latent_source="oracle"))  # the study's
    with torch.no_grad():
        nn.init.normal_(model.latent[-1].weight)
        index, oracle, center = torch.arange(4), oracle_latent("G1", SPEC), torch.full((8,), 2.0)
        plain = model.training_outputs(enc, index, torch.Generator().manual_seed(0))
        read = model.training_outputs(enc, index, torch.Generator().manual_seed(0), oracle, center)
        keep = (torch.rand(4, generator=_after_sample(model, enc, index)) >= SPEC.p_logit).float()
        expected = model.logits(enc, index, (oracle - center).expand(4, -1), keep)
    torch.testing.assert_close(read.z, plain.z)  # KL and pull: the sampled z
    torch.testing.assert_close(read.logits, expected)


def _after_sample(model: VariationalSelector, enc: EncodedPairs, index: torch.Tensor) -> torch.Generator:
    """A generator in the state training_outputs leaves it in after sampling z (for its dropout draw)."""
    generator = torch.Generator().manual_seed(0)
    mu, logvar = model.context(*model.pair_posteriors(enc, index))
    torch.randn(mu.shape, generator=generator)
    return generator


def test_client_context_is_the_mean_posterior_of_the_pairs_outside_the_batch(base, enc):
    model = VariationalSelector(base, dataclasses.replace(SPEC, latent_context="client"))
    index = torch.tensor([0, 2])
    with torch.no_grad():
        ctx_mu, ctx_logvar = model.client_context(enc, index)
        mu, logvar = model.pair_posteriors(enc, torch.tensor([i for i in range(len(enc)) if i not in (0, 2)]))
    assert ctx_mu.shape == (2, 8)
    torch.testing.assert_close(ctx_mu[1], mu.mean(0))
    torch.testing.assert_close(ctx_logvar[0].exp(), logvar.exp().mean(0))


def test_only_a_spec_that_sets_a_study_switch_gets_the_study_s_selector(base):
    assert type(variational_model(base, SPEC)) is VariationalSelector
    for change in ({"latent_source": "oracle"}, {"selector_basis": "prototypes"}, {"detach_latent": True}):
        assert type(variational_model(base, dataclasses.replace(SPEC, **change))) is VariationalStudySelector, change
    assert VariationalSelector(base, SPEC).oracle("G1") is None  # the method never replaces z
