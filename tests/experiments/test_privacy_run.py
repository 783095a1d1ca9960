"""A run with [privacy] on: every FedAvg-family method reports its (epsilon, delta) in results.json and table.md."""

import json
import math

from fedpref.cli import main


def test_a_private_run_reports_epsilon_per_method(tmp_path):
    out = tmp_path / "run"
    sets = ["algorithm.methods=['FL','FL_target']", "privacy.clip_norm=0.5", "privacy.noise_multiplier=1.0"]
    argv = ["run", "tiny", "--out", str(out)] + [a for s in sets for a in ("--set", s)]
    assert main(argv) == 0
    methods = json.loads((out / "results.json").read_text())["methods"]
    fl, target = methods["FL"]["privacy"], methods["FL_target"]["privacy"]
    assert fl["releases"] == target["releases"] == 2 and fl["delta"] == 1e-3
    assert 0 < fl["epsilon"] < target["epsilon"] < math.inf  # FL_target's group-wise sampling is not amplified
    assert "Client-level differential privacy" in (out / "table.md").read_text()
