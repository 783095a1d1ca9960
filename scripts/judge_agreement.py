"""How reliable is an LM judge? Its agreement with human labels on held-out HH-RLHF pairs, per type and reading.

Draws the held-out judge pairs exactly as `fedpref stage2` does for a config (`hh_task` with the config's clients,
eval prompts, judge pairs and seed: pairs no client holds, prompts no win rate asks about), takes the test slice
(the same pairs the run measures its judges on), and asks
the LM judge (App. D.2's question, "more helpful" / "more harmless") with the chosen response shown first, once
(`--orders 1`, the paper's single reading) and with both orders (`--orders 2`). A judge that always answers "A"
scores 100% in the single reading; the both-orders reading is the one to trust.

    .venv/bin/python scripts/judge_agreement.py configs/stage2/hh.toml --set task.data_path=FOLDER \
        [--pairs N] [--orders 1,2]
"""

from __future__ import annotations

import argparse
import time

from fedpref.models.factory import resolve_device
from fedpref.stage2.config import load_stage2_config
from fedpref.stage2.held_out_judges import agreement, lm_judge
from fedpref.stage2.hh_task import HH_TYPES, hh_task
from fedpref.stage2.judges import focused_template


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--pairs", type=int, help="held-out test pairs per type (default: eval.judge_test_pairs)")
    parser.add_argument("--orders", default="1,2", help="readings to measure, comma-separated: 1, 2")
    args = parser.parse_args()
    cfg = load_stage2_config(args.config, args.set)
    t = cfg.task
    sizes = (cfg.eval.judge_train_pairs, args.pairs or cfg.eval.judge_test_pairs)  # the run's own test pairs
    task = hh_task(t.data_path, t.clients_per_type, t.prompts_per_client, t.eval_prompts, cfg.seed, sizes)
    tests = {group: test for group, (_, test) in task.judge_pairs.items()}
    templates = {group: focused_template(group) for group in HH_TYPES}
    print(f"| judge | reading | {' | '.join(HH_TYPES)} | s |")
    print("|---|---|" + "---|" * len(HH_TYPES) + "---|")
    for orders in map(int, args.orders.split(",")):
        judge = lm_judge(cfg.eval.lm_model, templates, orders, cfg.eval.lm_max_tokens, resolve_device(cfg.device))
        start = time.perf_counter()
        result = agreement(judge, tests)
        cells = " | ".join(f"{result[g]['win_rate']} {result[g]['ci95']} (n {result[g]['n']})" for g in HH_TYPES)
        reading = "both orders" if orders == 2 else "chosen as A"
        print(f"| {cfg.eval.lm_model} | {reading} | {cells} | {time.perf_counter() - start:.0f} |")


if __name__ == "__main__":
    main()
