"""scripts/update_norms.py: every client's first-round update norm on configs/quick/tiny.toml, positive and printed."""

from __future__ import annotations

from load_script import ROOT, load_script


def test_every_client_gets_a_positive_norm(capsys):
    module = load_script("scripts/update_norms.py")
    assert module.main([str(ROOT / "src/fedpref/configs/quick/tiny.toml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    per_client = [line.split() for line in lines if line.startswith("  c")]
    assert len(per_client) == 8 and all(float(norm) > 0 for _, norm in per_client)
    assert lines[-1].startswith("median ")
