"""Run folders read back: the final partition, its ARI and the round it settles, on hand-written assignments."""

from fedpref.reports.run_groups import partition_ari, partition_text, settle_round


def test_partition_ari_uses_the_frozen_assignment():
    truth = {"c000": "G1", "c001": "G1", "c002": "G2", "c003": "G2"}
    early = {"round": 0, "assignment": {"c000": 0, "c001": 1, "c002": 0, "c003": 1}}
    frozen = {"round": 1, "assignment": {"c000": 1, "c001": 1, "c002": 0, "c003": 0}, "frozen": True}
    assert partition_ari([early, frozen], truth) == 1.0
    assert partition_ari([early | {"final_selection": True}], truth) == -0.5  # every cell of the 2x2 table is 1
    assert partition_ari([early], truth) is None


def test_partition_text_names_the_true_groups_in_each_model():
    truth = {"c000": "G1", "c001": "G2", "c002": "G2", "c003": "G3"}
    early = {"round": 0, "assignment": {"c000": 0, "c001": 0, "c002": 0, "c003": 0}}
    frozen = {"round": 2, "assignment": {"c000": 1, "c001": 1, "c002": 0, "c003": 0, "other": 1}, "frozen": True}
    assert partition_text([early, frozen], truth) == "G1 1 + G2 1 | G2 1 + G3 1"
    assert partition_text([early], truth) is None


def test_settle_round_by_hand():
    a, b = {"x": 0, "y": 0, "z": 1}, {"x": 0, "y": 1, "z": 1}
    records = [{"round": 2, "assignment": a}, {"round": 4, "assignment": b}, {"round": 6, "assignment": b}]
    assert settle_round(records) == 4
    b_relabelled = {"x": 1, "y": 0, "z": 0}  # the same partition as b
    assert settle_round([*records[:2], {"round": 6, "assignment": b_relabelled, "frozen": True}]) == 4
    assert settle_round([{"round": 2, "assignment": b}, *records[1:]]) == 2  # never changed: the first record
    assert settle_round([*records, {"round": 8, "assignment": a}]) == 8  # changed at the last record
    assert settle_round([*records[:2], {"round": 6, "assignment": a, "final_selection": True}]) == 4
    assert settle_round(records[:1]) is None and settle_round([]) is None


def test_a_key_missing_from_an_older_config_takes_its_default():
    """A run written before `train.grad_accumulation` existed groups with one that records its default, 1."""
    from fedpref.reports.run_groups import with_defaults

    defaults = {"seed": 0, "train": {"lr": 1e-5, "grad_accumulation": 1}, "data": {"source": "synthetic"}}
    old = {"seed": 3, "train": {"lr": 1e-3}}
    assert with_defaults(old, defaults) == {
        "seed": 3,
        "train": {"lr": 1e-3, "grad_accumulation": 1},
        "data": {"source": "synthetic"},
    }
    assert with_defaults({"extra": {"kept": True}}, defaults)["extra"] == {"kept": True}


def test_a_version_0_run_groups_with_a_run_of_this_version_of_the_same_config(tmp_path):
    """The version-0 fixture (diagnosis keys in [variational]) and the same run as this version writes it
    (config_version 1, those keys in [vpa_diagnosis] only where they differ from the defaults: here nowhere)
    are one configuration: their seeds summarize together."""
    import json
    import shutil
    import tomllib
    from pathlib import Path

    from fedpref.config import config_from_dict, upgrade_config, written_config
    from fedpref.experiments.outputs import to_toml
    from fedpref.reports.run_groups import find_runs, group_runs

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "run_tiny_v0"
    old, new = tmp_path / "seed=0", tmp_path / "seed=1"
    shutil.copytree(fixture, old)
    shutil.copytree(fixture, new)
    raw = tomllib.loads((fixture / "config.toml").read_text(encoding="utf-8"))
    cfg = config_from_dict(upgrade_config(raw, "fixture") | {"seed": 1})
    (new / "config.toml").write_text(to_toml(written_config(cfg)), encoding="utf-8")
    results = json.loads((new / "results.json").read_text(encoding="utf-8"))
    (new / "results.json").write_text(json.dumps(results | {"seed": 1}), encoding="utf-8")
    assert (
        "vpa_diagnosis" not in (new / "config.toml").read_text()
        and "latent_source" in (old / "config.toml").read_text()
    )
    (group,) = group_runs(find_runs([tmp_path]))
    assert [r.path.name for r in group.runs] == ["seed=0", "seed=1"]
