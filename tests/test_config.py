from pathlib import Path

import pytest

from fedpref.algorithms.registry import check_methods
from fedpref.config import ExperimentConfig, load_config, option_help
from fedpref.errors import ConfigError

SHIPPED = Path(__file__).resolve().parents[1] / "src" / "fedpref" / "configs"
CONFIGS = sorted(p for p in SHIPPED.rglob("*.toml") if p.parent.name != "stage2")  # stage2/: Stage 2 configs


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_shipped_config_loads_and_validates(path):
    cfg = load_config(path)
    check_methods(cfg, str(path))
    assert isinstance(cfg, ExperimentConfig)


def test_configs_exist():
    assert any(p.name == "quick.toml" for p in CONFIGS)


def test_overrides_parse_types():
    cfg = load_config(
        None,
        [
            "federation.rounds=7",
            "train.lr=3e-4",
            "data.group_sizes=[1,2,3,4]",
            "model.backbone=/some/folder",
            "lora.cache_frozen_prefix=false",
        ],
    )
    assert cfg.federation.rounds == 7
    assert cfg.train.lr == pytest.approx(3e-4)
    assert cfg.data.group_sizes == [1, 2, 3, 4]
    assert cfg.model.backbone == "/some/folder"
    assert cfg.lora.cache_frozen_prefix is False


def test_int_is_accepted_for_float():
    assert load_config(None, ["train.lr=1"]).train.lr == 1.0


def _write(tmp_path, text):
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return path


def test_unknown_key_names_key_and_file(tmp_path):
    path = _write(tmp_path, "[train]\nlearning_rate = 0.1\n")
    with pytest.raises(ConfigError, match=r"exp\.toml.*'train\.learning_rate'"):
        load_config(path)


def test_wrong_type_names_key(tmp_path):
    path = _write(tmp_path, '[federation]\nrounds = "ten"\n')
    with pytest.raises(ConfigError, match=r"exp\.toml.*'federation\.rounds' must be int"):
        load_config(path)


def test_bool_is_not_an_int(tmp_path):
    with pytest.raises(ConfigError, match="federation.rounds"):
        load_config(_write(tmp_path, "[federation]\nrounds = true\n"))


def test_more_sampled_clients_than_clients(tmp_path):
    path = _write(tmp_path, "[data]\ngroup_sizes = [1, 1, 1, 1]\n[federation]\nclients_per_round = 5\n")
    with pytest.raises(ConfigError, match=r"clients_per_round.*exceeds the number of clients \(4\)"):
        load_config(path)


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["model.head_init_scale=0.0"], "'model.head_init_scale' must be > 0"),
        (["model.head='selector'", "model.backbone='some/lm'", "model.head_init_scale=2.0"], "scalar head only"),
    ],
)
def test_bad_head_init_scale(sets, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, sets)


def test_unknown_method_lists_choices():
    cfg = load_config(None, ["algorithm.methods=['FedAvgg']"])  # the registry checks names, not the config layer
    with pytest.raises(ConfigError, match=r"<defaults>: 'algorithm.methods' has unknown .*FedAvgg.*choose from Local"):
        check_methods(cfg, "<defaults>")


def test_invalid_toml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(_write(tmp_path, "[train\n"))
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "nope.toml")


def test_bad_override_syntax():
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        load_config(None, ["federation.rounds"])


def test_every_option_has_help():
    rows = option_help()
    assert len(rows) > 30
    assert all(help_ for _, _, help_ in rows), [k for k, _, h in rows if not h]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("train.lrr=1", r"--set train\.lrr=1: unknown key 'train\.lrr' \(\[train\] has: .*lr"),
        ("trainn.lr=1", r"--set trainn\.lr=1: unknown key 'trainn' \(known here"),
        ("train.lr=fast", r"--set train\.lr=fast: 'train\.lr' must be float, got 'fast'"),
        ("federation.rounds=0", r"--set federation\.rounds=0: 'federation\.rounds' must be >= 1"),
        ("train.beta2=1.5", r"--set train\.beta2=1\.5: 'train\.beta1/beta2' must be in"),
        ("train=1", r"--set train=1: 'train' is a section"),
        ("train.lr.x=1", r"--set train\.lr\.x=1: 'train\.lr' is not a section"),
        ("data.cues=mixed", r"--set data\.cues=mixed: 'data\.cues' must be one of plain, composed"),
        (
            "personalization.adapt='lora'",
            r"'personalization\.adapt' must be one of all, head, adapters$",
        ),
    ],
)
def test_override_mistakes_are_blamed_on_set(tmp_path, item, message):
    path = _write(tmp_path, "[train]\nlr = 0.1\n")
    with pytest.raises(ConfigError, match=message) as e:
        load_config(path, [item])
    assert "exp.toml" not in str(e.value)


def test_file_mistakes_are_still_blamed_on_the_file(tmp_path):
    path = _write(tmp_path, "[federation]\nrounds = 0\n")
    with pytest.raises(ConfigError, match=r"exp\.toml: 'federation\.rounds'"):
        load_config(path, ["train.lr=1e-3"])
    assert load_config(None, ["algorithm.options.FedGD.anything=1"]).algorithm.options  # the method checks these


@pytest.mark.parametrize(
    "sets, message",
    [
        (["train.precision='bf16-frozen'", "lora.pack_sequences=false"], "'bf16-frozen' needs lora.pack_sequences"),
        (["train.precision='bf16-frozen'", "lora.dropout=0.05"], "'bf16-frozen' needs lora.dropout = 0"),
        (["train.precision='bf16-frozen'", "train.compile=true"], "'train.compile' cannot be combined"),
        (["train.precision='bf16-gemm'"], "must be one of auto, fp32, bf16, bf16-frozen"),
    ],
)
def test_bf16_frozen_refuses_what_it_cannot_run_with(sets, message):
    fits = ["train.precision='bf16-frozen'", "lora.dropout=0.0"]
    assert load_config(None, fits).train.precision == "bf16-frozen"
    with pytest.raises(ConfigError, match=message):
        load_config(None, ["lora.dropout=0.0", *sets])


def test_unseen_clients_with_multi_cl_is_a_config_error():
    with pytest.raises(ConfigError, match="cannot go with Multi-CL"):  # a rule Multi-CL declares itself
        check_methods(load_config(None, ["data.unseen_clients=2", "algorithm.methods=['FL','Multi-CL']"]))
    check_methods(load_config(None, ["data.unseen_clients=2", "algorithm.methods=['FL','CL']"]))


FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.mark.parametrize("run", ["run_tiny_v0", "run_tiny_v0_interrupted"])
def test_a_version_0_run_keeps_its_recorded_hash(run):
    """A run folder written before config_version: its config.toml loads (upgraded from version 0), and the hash
    its results and checkpoint recorded is still this config's, so resuming and sweeps find it."""
    import json

    from fedpref.config import digest_v0
    from fedpref.engines.checkpoint import CheckpointStore

    folder = FIXTURES / run
    assert "config_version" not in (folder / "config.toml").read_text()
    cfg = load_config(folder / "config.toml")
    recorded = json.loads((folder / "results.json").read_text())["config_hash"]
    assert recorded == "6850a5a23631" == digest_v0(cfg) and cfg.matches(recorded)
    assert CheckpointStore(folder / "checkpoints").load()["config_hash"] == recorded
    assert cfg.digest() != recorded and cfg.digests() == [cfg.digest(), recorded]
    assert not load_config(folder / "config.toml", ["seed=1"]).matches(recorded)


def test_config_toml_records_its_version_and_round_trips(tmp_path):
    from fedpref.config import CONFIG_VERSION, written_config
    from fedpref.experiments.outputs import write_config

    cfg = load_config("tiny", ["train.lr=0.002", "algorithm.options.FedAvgM.momentum=0.5"])
    write_config(cfg, tmp_path)
    assert written_config(cfg)["config_version"] == CONFIG_VERSION == 1
    assert "config_version = 1" in (tmp_path / "config.toml").read_text()
    again = load_config(tmp_path / "config.toml")
    assert again == cfg and again.digest() == cfg.digest()


def test_digest_leaves_out_only_what_changes_no_number():
    base = load_config("tiny")
    assert base.digest() == load_config("tiny", ["logging.backends=['csv']", "data.prefix_cache_mb=64"]).digest()
    for change in ["train.grad_accumulation=2", "federation.eval_every=1", "privacy.clip_norm=1.0", "seed=3"]:
        assert load_config("tiny", [change]).digest() != base.digest(), change


def test_a_newer_config_version_is_refused(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("config_version = 2\n")
    with pytest.raises(ConfigError, match=r"config\.toml: 'config_version' 2 is not one this fedpref reads \(0-1\)"):
        load_config(path)


def test_an_old_variational_table_with_the_study_keys_loads_into_vpa_diagnosis(tmp_path):
    """Run folders written before [vpa_diagnosis] have the study's switches in [variational]: they load to the same
    config, with the same digest, as the new table gives; set in both places, a key is an error."""
    old = load_config(FIXTURES / "run_tiny_v0" / "config.toml")  # every [variational] key, the study's included
    assert old.vpa_diagnosis == ExperimentConfig().vpa_diagnosis and "vpa_diagnosis" not in old.to_dict()
    path = tmp_path / "config.toml"
    path.write_text('config_version = 1\n[variational]\nassignment = "oracle"\nbeta = 0.5\n')
    moved = load_config(path)
    new = load_config(None, ["vpa_diagnosis.assignment='oracle'", "variational.beta=0.5"])
    assert moved == new and moved.digest() == new.digest() != load_config(None, ["variational.beta=0.5"]).digest()
    assert (moved.vpa_diagnosis.assignment, moved.variational.beta) == ("oracle", 0.5)
    assert new.to_dict()["vpa_diagnosis"]["assignment"] == "oracle" and "assignment" not in new.to_dict()["variational"]
    path.write_text('[variational]\nassignment = "oracle"\n[vpa_diagnosis]\nassignment = "all_clients"\n')
    with pytest.raises(ConfigError, match=r"assignment set in both \[variational\] and \[vpa_diagnosis\]"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"'variational.assignment' .*; a diagnosis switch: vpa_diagnosis"):
        load_config(None, ["variational.assignment='oracle'"])


def test_a_version_0_run_with_diagnosis_switches_keeps_its_recorded_hash():
    """The hash fedpref computed before [vpa_diagnosis] existed (measured with that version) for vpa_synthetic with
    two study switches in [variational]: the same switches set in [vpa_diagnosis] still match it."""
    from fedpref.config import digest_v0

    sets = ["vpa_diagnosis.latent_source='oracle'", "vpa_diagnosis.latent_warmup_rounds=3", "variational.beta=0.5"]
    cfg = load_config(FIXTURES / "configs_v0" / "vpa_synthetic.toml", sets)
    assert digest_v0(cfg) == "573fc45c1893" and cfg.matches("573fc45c1893")
