"""Win rate of the fine-tuned policy against the frozen base, per preference type (App. C.3.1, D.2)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from fedpref.stage2.dpo import Contexts
from fedpref.stage2.generation import Sampling, sample
from fedpref.stage2.judges import Judge
from fedpref.stage2.policy import ConditionalPolicy
from fedpref.stage2.winrate import distinct_n, summarize_verdicts


def win_rates(
    policy: ConditionalPolicy,
    tokenizer,
    prompts: Sequence[str],
    contexts: Contexts,
    judges: dict[str, Judge],
    sampling: Sampling,
    seed: int,
    examples: int = 2,
) -> dict:
    """{judge: {type: win-rate summary}}: one sampled response per held-out prompt from the policy under the
    type's z (RESPONSE A, as in the paper) and one from the frozen base (adapters off), same sampling seed;
    "distinct_2" of the base's and each type's samples (a collapsed policy repeats itself) and "examples".
    """
    one = replace(sampling, num_samples=1)
    base = sample(policy, tokenizer, prompts, one, seed, reference=True).texts
    out: dict = {name: {} for name in judges}
    shown, diversity = {}, {"base": round(distinct_n(base), 4)}
    for key, z in contexts.items():
        tuned = sample(policy, tokenizer, prompts, one, seed, z=z).texts
        diversity[key] = round(distinct_n(tuned), 4)
        for name, judge in judges.items():
            out[name][key] = summarize_verdicts(judge(prompts, tuned, base, key))
        shown[key] = [{"prompt": p, "policy": a, "base": b} for p, a, b in list(zip(prompts, tuned, base))[:examples]]
    out["examples"], out["distinct_2"] = shown, diversity
    return out
