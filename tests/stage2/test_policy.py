"""Conditional policy mechanics on the real stories260K: z injection, DPO updates, sampling, FedDPO."""

import pytest
import torch

from fedpref.config import LoraConfig
from fedpref.stage2.dpo import DPOSettings, Pair, dpo_backward, dpo_update, response_logps, train_dpo
from fedpref.stage2.feddpo import DPOClient, FedSettings, run_feddpo
from fedpref.stage2.generation import Sampling, sample
from fedpref.stage2.judges import OracleJudge
from fedpref.stage2.policy import ConditionalPolicy, load_lm, pack
from fedpref.stage2.task import oracle_scores

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")
SHORT = Sampling(max_new_tokens=12)


@pytest.fixture
def policy(stories_path):
    lm, tokenizer = load_lm(stories_path)
    return ConditionalPolicy(lm, LoraConfig(rank=4, alpha=8, dropout=0.0), latent_dim=3), tokenizer


def _batch(tokenizer):
    prompt = tokenizer("Once upon a time")["input_ids"]
    return prompt, pack([prompt, prompt], [[260, 300, 1], [270, 1]])


def test_untrained_policy_equals_reference_and_z_shifts_logits(policy):
    pol, tokenizer = policy
    _, batch = _batch(tokenizer)
    with torch.no_grad(), pol.reference():
        ref = response_logps(pol, batch)
    z = torch.tensor([1.0, -2.0, 0.5])
    with torch.no_grad(), pol.conditioned(z, 2):
        same = response_logps(pol, batch)  # zero-initialized Z-to-embedding and LoRA B = 0
    assert torch.allclose(ref, same)
    with torch.no_grad():
        pol.z_to_embedding.weight.normal_()
    with torch.no_grad(), pol.conditioned(z, 2):
        shifted = response_logps(pol, batch)
    with torch.no_grad(), pol.conditioned(torch.zeros(3), 2):
        zero_z = response_logps(pol, batch)
    assert not torch.allclose(shifted, ref)
    assert torch.allclose(zero_z, ref)  # bias is still 0: z = 0 leaves the base untouched


def test_dpo_update_moves_lora_and_z_module_not_the_base(policy):
    pol, tokenizer = policy
    prompt, _ = _batch(tokenizer)
    frozen = {n: p.detach().clone() for n, p in pol.named_parameters() if not p.requires_grad}
    trainable = pol.adapter_state()
    assert any("lora_A" in n for n in trainable) and "z_to_embedding.weight" in trainable
    opt = torch.optim.AdamW([p for p in pol.parameters() if p.requires_grad], lr=1e-2)
    z = torch.tensor([1.0, -1.0, 2.0])
    pairs = [Pair(prompt, [260, 300, 1], [270, 1])]
    metrics = dpo_update(pol, opt, pairs, z, beta=0.1)
    assert metrics["loss"] == pytest.approx(0.693147, abs=1e-5)  # first step: policy = reference
    assert pol.z_to_embedding.weight.grad.abs().sum() > 0
    after = dict(pol.named_parameters())
    assert all(torch.equal(v, after[n]) for n, v in frozen.items())
    changed = [n for n, v in trainable.items() if not torch.equal(v, after[n])]
    assert "z_to_embedding.weight" in changed and any("lora_B" in n for n in changed)
    for _ in range(5):
        metrics = dpo_update(pol, opt, pairs, z, beta=0.1)
    assert metrics["loss"] < 0.69 and metrics["reward_margin"] > 0


def test_sampling_is_seeded_and_stops_at_eos(policy):
    pol, tokenizer = policy
    prompts = ["Once upon a time, there was a dog.", "Tim went to the park."]
    a = sample(pol, tokenizer, prompts, SHORT, seed=3, reference=True)
    b = sample(pol, tokenizer, prompts, SHORT, seed=3, reference=True)
    assert a.texts == b.texts and len(a.texts) == 4  # 2 samples per prompt (App. D.1.2 default)
    assert a.prompt_ids[0] == a.prompt_ids[1] == tokenizer(prompts[0])["input_ids"]
    for r in a.response_ids:
        assert len(r) <= SHORT.max_new_tokens and (1 not in r[:-1])


def test_train_dpo_and_feddpo_run(policy, stories_path):
    pol, tokenizer = policy
    judge = OracleJudge(oracle_scores())
    prompts = ["Once upon a time, there was a big dog.", "One day, a cat saw a tree.", "Sam was happy."]
    settings = DPOSettings(steps=2, prompts_per_step=3, lr=1e-3)
    history = train_dpo(pol, tokenizer, prompts, {"G1": torch.ones(3)}, judge, settings, SHORT, seed=0)
    assert [h["step"] for h in history] == [0, 1]
    lm, tokenizer = load_lm(stories_path)
    glob = ConditionalPolicy(lm, LoraConfig(rank=2, alpha=4, dropout=0.0), latent_dim=0)
    start = glob.adapter_state()
    heard = []
    rounds = run_feddpo(
        glob,
        tokenizer,
        {"c0": DPOClient("c0", "G1", prompts), "c1": DPOClient("c1", "G2", prompts)},
        judge,
        settings,
        FedSettings(rounds=1, clients_per_round=2, local_steps=2),
        SHORT,
        seed=0,
        on_client=lambda r, c, steps, losses, seconds: heard.append((r, c, steps, len(losses) <= steps)),
    )
    assert rounds[0]["sampled"] and set(glob.adapter_state()) == set(start)  # only LoRA travels
    assert sorted(heard) == [(0, "c0", 2, True), (0, "c1", 2, True)]  # each client's 2 local steps, as each ends
    assert all("lora" in n for n in start)


def test_precision_bf16_autocasts_the_forward_and_auto_does_not_on_cpu(stories_path):
    """'auto' is fp32 off a CUDA GPU; 'bf16' autocasts the policy's forward, and log-probabilities stay fp32."""
    lm, tokenizer = load_lm(stories_path)
    lora = LoraConfig(rank=4, alpha=8, dropout=0.0)
    pol = ConditionalPolicy(lm, lora, latent_dim=3, precision="auto")
    _, batch = _batch(tokenizer)
    seen = []
    pol.lm.get_input_embeddings().register_forward_hook(lambda m, i, o: seen.append(torch.is_autocast_enabled("cpu")))
    with torch.no_grad():
        fp32 = response_logps(pol, batch)
        pol.precision = "bf16"
        bf16 = response_logps(pol, batch)
    assert seen == [False, True]
    assert fp32.dtype == bf16.dtype == torch.float32
    assert torch.allclose(fp32, bf16, rtol=0.05) and not torch.equal(fp32, bf16)  # same function, bf16's rounding
    assert pol.device == torch.device("cpu")
    moved = batch.to("cpu")
    assert torch.equal(moved.response_mask, batch.response_mask)


def test_two_half_weighted_backwards_give_the_gradient_of_their_union(policy):
    """dpo.grad_accumulation: two generation batches of equal size, each weighted 1/2, accumulate the gradient of
    the DPO loss on both at once (the loss is a mean over pairs)."""
    pol, tokenizer = policy
    prompt, _ = _batch(tokenizer)
    with torch.no_grad():
        pol.z_to_embedding.weight.normal_()  # a non-zero z path, so that z's gradient is not trivially zero
    first, second = [Pair(prompt, [260, 300, 1], [270, 1])], [Pair(prompt, [280, 1], [290, 310, 1])]
    z, params = torch.tensor([1.0, -1.0, 2.0]), [p for p in pol.parameters() if p.requires_grad]

    def grads(*groups: tuple[list[Pair], float]) -> list[torch.Tensor]:
        pol.zero_grad(set_to_none=True)
        for pairs, weight in groups:
            dpo_backward(pol, pairs, z, beta=0.1, weight=weight)
        return [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params]

    accumulated, union = grads((first, 0.5), (second, 0.5)), grads((first + second, 1.0))
    assert any(g.abs().sum() > 0 for g in union)
    for a, u in zip(accumulated, union):
        torch.testing.assert_close(a, u, rtol=1e-4, atol=1e-7)
    assert any(not torch.allclose(f, u, atol=1e-6) for f, u in zip(grads((first, 1.0)), union))


def test_train_dpo_takes_one_adamw_step_per_grad_accumulation_batches(policy, monkeypatch):
    pol, tokenizer = policy
    steps_taken = []
    real_step = torch.optim.AdamW.step
    monkeypatch.setattr(torch.optim.AdamW, "step", lambda self, *a, **k: steps_taken.append(1) or real_step(self))
    prompts = ["Once upon a time, there was a big dog.", "One day, a cat saw a tree.", "Sam was happy."]
    contexts = {"G1": torch.ones(3), "G2": -torch.ones(3)}
    settings = DPOSettings(steps=2, prompts_per_step=1, lr=1e-3, grad_accumulation=2)
    history = train_dpo(pol, tokenizer, prompts, contexts, OracleJudge(oracle_scores()), settings, SHORT, seed=0)
    assert [(h["step"], h["key"]) for h in history] == [(0, "G1"), (0, "G2"), (1, "G1"), (1, "G2")]
    stepped = {h["step"] for h in history if h["pairs"]}
    assert stepped and len(steps_taken) == len(stepped)  # no step for a window whose every pair was a tie
