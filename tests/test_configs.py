"""The shipped configs (package data, composed with `base =`) resolve to the configs they replaced, key for key."""

import dataclasses
from pathlib import Path

import pytest

from fedpref.config import SHIPPED_CONFIGS, find_config, load_config, merge_tables, read_with_bases, shipped_name
from fedpref.errors import ConfigError
from fedpref.stage2.config import load_stage2_config

ROOT = Path(__file__).resolve().parents[1]
OLD = ROOT / "tests" / "fixtures" / "configs_v0"  # the top-level configs/ as commit 76016d4 shipped them

# old file -> its shipped replacement
REPLACED = {
    "quick.toml": "quick/quick",
    "tiny.toml": "quick/tiny",
    "reduced_balanced.toml": "fedgd/reduced_balanced",
    "reduced_imbalanced.toml": "fedgd/reduced_imbalanced",
    "tldr_local.toml": "fedgd/tldr_local",
    "tldr_smollm2.toml": "fedgd/tldr_smollm2",
    "calibrated_balanced.toml": "calibration/calibrated_balanced",
    "boundary_balanced.toml": "calibration/boundary_balanced",
    "composed_balanced.toml": "calibration/composed_balanced",
    "composed_tau15_balanced.toml": "calibration/composed_tau15_balanced",
    "vpa_synthetic.toml": "fedvpa/vpa_synthetic",
    "vpa_hh.toml": "fedvpa/vpa_hh",
    "vpa_hh_smollm2.toml": "fedvpa/vpa_hh_smollm2",
    "paper_balanced.toml": "paper/fedgd_balanced_qwen2",
    "paper_imbalanced.toml": "paper/fedgd_imbalanced_qwen2",
    "stage2/hh.toml": "stage2/hh",
    "stage2/stories.toml": "stage2/stories",
}
PAPER_SCALE = {  # the paper-scale configs now name the paper's model, its LoRA targets and a GPU where there is one
    "device": "auto",
    "model.backbone": "Qwen/Qwen2-0.5B",
    "model.head": "selector",
    "lora.target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj"],
}
# the only keys that differ from the old files, each on purpose
CHANGED = {
    "paper_balanced.toml": {**PAPER_SCALE, "name": "fedgd_balanced_qwen2"},
    "paper_imbalanced.toml": {**PAPER_SCALE, "name": "fedgd_imbalanced_qwen2"},
    # was ../shared/models/stories260K/hf: a folder only this checkout's machine has
    "stage2/stories.toml": {"policy_path": "ggml-org/models/tinyllamas/stories260K.gguf"},
}


# the experiment configs the Makefile names -> (the config and the --set chain it replaced there): same config
EXPERIMENTS = {
    "fedgd/reduced_balanced_20r_t1": (
        "reduced_balanced",
        ["federation.rounds=20", "algorithm.reassign_every=1", "algorithm.methods=['FL','FL_target','FedGD']"],
    ),
    "fedgd/reduced_imbalanced_20r_t1": (
        "reduced_imbalanced",
        ["federation.rounds=20", "algorithm.reassign_every=1", "algorithm.methods=['FL','FL_target','FedGD']"],
    ),
    "fedgd/reduced_imbalanced_40r_t2": ("reduced_imbalanced", ["federation.rounds=40", "algorithm.reassign_every=2"]),
    "fedgd/reduced_balanced_diagnostics": (
        "reduced_balanced",
        ["algorithm.methods=['FL','CL','Multi-CL']", "diagnostics.enabled=true"],
    ),
    "fedvpa/vpa_synthetic_ablation": (
        "vpa_synthetic",
        ['algorithm.methods=["FedVPA-GP","FedVPL","FedVPL+Ortho","FedVPL+GB"]'],
    ),
    "fedvpa/vpa_hh_k50": (
        "vpa_hh",
        ["data.hh.num_clients=50", "data.hh.pairs_per_client=90", "federation.clients_per_round=10"],
    ),
    "fedvpa/vpa_hh_k100": (
        "vpa_hh",
        ["data.hh.num_clients=100", "data.hh.pairs_per_client=45", "federation.clients_per_round=10"],
    ),
    "fedvpa/vpa_hh_vs_fedbiscuit": (
        "vpa_hh",
        ['algorithm.methods=["FedVPA-GP","FedBiscuit"]', "algorithm.num_models=3", "algorithm.reassign_every=2"],
    ),
    "stage2/stories_stage1_paper": ("stage2/stories", ["stage1.rounds=50", "stage1.local_steps=30"]),
}


SMOLLM2_SELECTOR = ["data.max_length=288", "data.prefix_cache_mb=512", "model.backbone='smollm2'"]
SMOLLM2_SELECTOR += ["model.head='selector'"]
# configs added since, none of which replaced anything -> (the config it composes and what it sets, its name too)
ADDED = {
    "fedgd/reduced_balanced_smollm2": (
        "reduced_balanced",
        [*SMOLLM2_SELECTOR, "name='reduced_balanced_smollm2'", "algorithm.methods=['Local','CL','Multi-CL','FL']"],
    ),
    "fedgd/reduced_imbalanced_smollm2": (
        "reduced_imbalanced",
        [*SMOLLM2_SELECTOR, "name='reduced_imbalanced_smollm2'", "algorithm.methods=['FL','FL_target','FedGD']"],
    ),
}


def flat(table: dict, prefix: str = "") -> dict:
    """{'a.b': value} for every leaf of a nested dict."""
    out = {}
    for key, value in table.items():
        if isinstance(value, dict) and value:
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def resolved(path: Path, stage2: bool) -> dict:
    cfg = load_stage2_config(path) if stage2 else load_config(path)
    return flat(dataclasses.asdict(cfg))


def test_every_shipped_config_replaces_an_old_one():
    shipped = {shipped_name(p) for p in SHIPPED_CONFIGS.rglob("*.toml")}
    assert shipped == set(REPLACED.values()) | set(EXPERIMENTS) | set(ADDED)
    assert {p.relative_to(OLD).as_posix() for p in OLD.rglob("*.toml")} == set(REPLACED)


@pytest.mark.parametrize("old", sorted(REPLACED), ids=str)
def test_shipped_config_resolves_as_the_old_one(old):
    stage2 = old.startswith("stage2/")
    before, after = resolved(OLD / old, stage2), resolved(find_config(REPLACED[old]), stage2)
    changed = CHANGED.get(old, {})
    assert {k: after[k] for k in changed} == changed
    assert {k: v for k, v in after.items() if k not in changed} == {k: v for k, v in before.items() if k not in changed}


@pytest.mark.parametrize("name", sorted(EXPERIMENTS | ADDED), ids=str)
def test_experiment_config_is_its_old_set_chain(name):
    """Same config, same digest: a run the Makefile made with the --set chain resumes under the named config (an
    added config: it is exactly its base with what it declares)."""
    base, sets = (EXPERIMENTS | ADDED)[name]
    if name.startswith("stage2/"):
        assert load_stage2_config(name) == load_stage2_config(base, sets)
    else:
        new, old = load_config(name), load_config(base, sets)
        assert new == old and new.digest() == old.digest()


def test_no_shipped_config_reads_the_shared_folder():
    for path in SHIPPED_CONFIGS.rglob("*.toml"):
        assert "../shared" not in path.read_text(encoding="utf-8"), path


def test_a_name_finds_the_shipped_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./quick.toml here: the package's
    assert find_config("quick") == SHIPPED_CONFIGS / "quick" / "quick.toml"
    assert find_config("stage2/stories") == SHIPPED_CONFIGS / "stage2" / "stories.toml"
    assert find_config("tiny.toml") == SHIPPED_CONFIGS / "quick" / "tiny.toml"
    (tmp_path / "quick").write_text('name = "mine"\n')  # a file of that name wins over the shipped config
    assert load_config("quick").name == "mine"
    with pytest.raises(ConfigError, match="no such config file, nor a shipped config"):
        find_config("no_such_config")


def test_merge_tables_merges_tables_and_replaces_lists():
    base = {"a": 1, "t": {"x": 1, "y": [1, 2], "u": {"k": 1}}}
    over = {"b": 2, "t": {"y": [3], "u": {"j": 2}}}
    assert merge_tables(base, over) == {"a": 1, "b": 2, "t": {"x": 1, "y": [3], "u": {"k": 1, "j": 2}}}
    assert base == {"a": 1, "t": {"x": 1, "y": [1, 2], "u": {"k": 1}}}  # untouched


def test_base_chain_overrides_key_by_key(tmp_path):
    a = 'name = "a"\n[train]\nlr = 0.1\nbatch_size = 4\n[data]\ngroup_sizes = [1, 1, 1, 1]\n'
    (tmp_path / "a.toml").write_text(a)
    (tmp_path / "b.toml").write_text('base = "a"\nname = "b"\n[train]\nlr = 0.2\n')
    (tmp_path / "c.toml").write_text('base = "b.toml"\n[data]\ngroup_sizes = [3, 3, 3, 3]\n')
    assert read_with_bases(tmp_path / "c.toml") == {
        "name": "b",
        "train": {"lr": 0.2, "batch_size": 4},
        "data": {"group_sizes": [3, 3, 3, 3]},
    }
    cfg = load_config(tmp_path / "c.toml", ["train.lr=0.3"])  # --set goes on top of the whole chain
    assert (cfg.name, cfg.train.lr, cfg.train.batch_size, cfg.data.group_sizes) == ("b", 0.3, 4, [3, 3, 3, 3])


def test_base_may_name_a_shipped_config(tmp_path):
    (tmp_path / "mine.toml").write_text('base = "reduced_balanced"\n[federation]\nrounds = 3\n')
    cfg, shipped = load_config(tmp_path / "mine.toml"), load_config("reduced_balanced")
    assert cfg.federation.rounds == 3 and cfg.name == "reduced_balanced"
    assert dataclasses.replace(cfg, federation=shipped.federation) == shipped


def test_base_cycle_is_an_error(tmp_path):
    (tmp_path / "a.toml").write_text('base = "b"\n')
    (tmp_path / "b.toml").write_text('base = "a.toml"\n')
    cycle = r"a\.toml: its `base` chain is a cycle .*a\.toml -> .*b\.toml -> .*a\.toml"
    with pytest.raises(ConfigError, match=cycle):
        load_config(tmp_path / "a.toml")


def test_missing_base_names_the_file(tmp_path):
    (tmp_path / "a.toml").write_text('base = "nowhere"\n')
    with pytest.raises(ConfigError, match=r"a\.toml: base = 'nowhere': nowhere: no such config file"):
        load_config(tmp_path / "a.toml")


def test_stage2_configs_compose_too(tmp_path):
    (tmp_path / "s.toml").write_text('base = "stage2/stories"\n[dpo]\nsteps = 7\n')
    cfg = load_stage2_config(tmp_path / "s.toml")
    assert cfg.dpo.steps == 7 and cfg.dpo.lr == load_stage2_config("stage2/stories").dpo.lr
