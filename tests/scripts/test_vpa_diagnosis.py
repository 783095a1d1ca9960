"""scripts/vpa_diagnosis.py: every variant runs with the effective settings recorded when its table was made."""

from __future__ import annotations

import json

from vpa_diagnosis_settings import DEFAULTS, FIXTURE, all_settings, diagnosis_script


def test_every_variant_resolves_to_the_recorded_settings():
    recorded = json.loads(FIXTURE.read_text())
    now = all_settings()
    assert set(now) == set(recorded) == {*diagnosis_script().VARIANTS, DEFAULTS}
    for name in recorded:
        assert now[name] == recorded[name], name


def test_the_recorded_variants_differ_where_their_overrides_do():
    recorded = json.loads(FIXTURE.read_text())
    before, shipped = recorded["before_fix"], recorded["shipped"]
    assert before["spec"]["selector_reads"] == "sample" and shipped["spec"]["selector_reads"] == "mean"
    assert before["loss"]["base_lr_scale"] == 1.0 and shipped["loss"]["base_lr_scale"] == 0.1
    assert recorded["oracle_z"]["spec"]["latent_source"] == "oracle"
    assert recorded["oracle_z_from_10"]["flags"]["oracle_blind"] == list(range(10))
    assert recorded["warmup"]["flags"]["latent_warmup"] == list(range(5))
    assert recorded["oracle_z_1"]["server"]["clients_per_round"] == 1
