"""User mistakes end in one clear line and a non-zero exit, never a traceback."""

import pytest

from fedpref.cli import main

TINY_FAST = ["--set", "algorithm.methods=['Local']", "--set", "personalization.steps=[0]"]


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_help_lists_every_option(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for key in ("federation.clients_per_round", "lora.top_layers", "algorithm.methods", "personalization.steps"):
        assert key in text


def test_config_error(capsys, tmp_path):
    code, out = run_cli(capsys, "run", "tiny", "--set", "federation.rounds=-1", "--out", tmp_path / "o")
    assert code == 2 and "federation.rounds" in out and "Traceback" not in out


def test_unknown_model_path(capsys, tmp_path):
    code, out = run_cli(
        capsys,
        "run",
        "tiny",
        "--set",
        f"model.backbone='{tmp_path}/nope'",
        "--out",
        tmp_path / "o",
        *TINY_FAST,
    )
    assert code == 2 and "cannot load" in out


ONE_PAIR = '{"prompt": "p", "chosen": "c", "rejected": "r", "client": "a"}\n'


def run_on_jsonl(capsys, tmp_path, text: str) -> tuple[int, str]:
    data = tmp_path / "pairs.jsonl"
    data.write_text(text)
    overrides = ["--set", "data.source='jsonl'", "--set", f"data.path='{data}'"]
    return run_cli(capsys, "run", "tiny", *overrides, "--out", tmp_path / "o", *TINY_FAST)


def test_malformed_jsonl(capsys, tmp_path):
    code, out = run_on_jsonl(capsys, tmp_path, ONE_PAIR + "not json\n")
    assert code == 2 and "pairs.jsonl:2: malformed JSON" in out


def test_client_with_too_few_pairs(capsys, tmp_path):
    code, out = run_on_jsonl(capsys, tmp_path, ONE_PAIR)
    assert code == 2 and "client 'a' has 1 pairs" in out


def test_refuses_to_overwrite(capsys, tmp_path):
    out_dir = tmp_path / "o"
    out_dir.mkdir()
    (out_dir / "results.json").write_text("{}")
    code, out = run_cli(capsys, "run", "tiny", "--out", out_dir, *TINY_FAST)
    assert code == 2 and "--overwrite" in out
    assert (out_dir / "results.json").read_text() == "{}"


def test_data_export_and_stats(capsys, tmp_path):
    from fedpref.data.pairs import read_jsonl

    out = tmp_path / "pairs.jsonl"
    code, text = run_cli(capsys, "data", "export", "tiny", "--out", out)
    assert code == 0
    pairs = read_jsonl(out)
    assert len(pairs) == 8 * 2 * 12 and {p.group for p in pairs} == {"G1", "G2", "G3", "G4"}
    code, text = run_cli(capsys, "data", "stats", "tiny")
    assert code == 0 and "8 clients" in text and "c007" in text


def test_version(capsys):
    from fedpref import __version__

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"fedpref {__version__}"


def test_set_typo_is_blamed_on_set(capsys, tmp_path):
    code, out = run_cli(capsys, "run", "tiny", "--set", "train.lrr=1", "--out", tmp_path / "o")
    assert code == 2 and "--set train.lrr=1: unknown key 'train.lrr' ([train] has: " in out and "tiny.toml" not in out


def test_failed_run_is_started_again_in_place(capsys, tmp_path):
    """A run that stopped before any progress (here: bad data) leaves nothing to protect: repeating the command
    runs again instead of demanding --overwrite."""
    for _ in range(2):
        code, out = run_on_jsonl(capsys, tmp_path, ONE_PAIR)
        assert code == 2 and "client 'a' has 1 pairs" in out and "--overwrite" not in out


def test_unfinished_run_points_at_resume(capsys, tmp_path):
    out_dir = tmp_path / "o"
    out_dir.mkdir()
    (out_dir / "config.toml").write_text("")
    (out_dir / "rounds.jsonl").write_text('{"round": 1}\n')
    code, out = run_cli(capsys, "run", "tiny", "--out", out_dir, *TINY_FAST)
    assert code == 2 and "unfinished run; pass --resume" in out


@pytest.mark.parametrize("device", ["cuda", "mps"])
def test_unavailable_device_before_any_weight(capsys, tmp_path, device):
    import torch

    if torch.cuda.is_available() if device == "cuda" else torch.backends.mps.is_available():
        pytest.skip(f"{device} is available here")
    code, out = run_cli(capsys, "run", "tiny", "--set", f"device={device}", "--out", tmp_path / "o")
    assert code == 2 and f"device = '{device}'" in out and "not available" in out
    assert not (tmp_path / "o").exists()


def test_head_backbone_mismatch_before_any_weight(capsys, tmp_path):
    """The folder holds only config.json: loading weights would fail with 'cannot load', so the message proves
    the mismatch is found from the config alone."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert", "architectures": ["BertModel"]}')
    sets = ["--set", f"model.backbone='{folder}'", "--set", "model.head=selector"]
    code, out = run_cli(capsys, "run", "tiny", *sets, "--out", tmp_path / "o")
    assert code == 2 and "model.head = 'selector' does not fit" in out and not (tmp_path / "o").exists()


def test_federation_refuses_to_overwrite_or_resume_nothing(capsys, tmp_path):
    fl = ["--clients-dir", tmp_path, "--set", "algorithm.methods=['FL']"]
    used = tmp_path / "used"
    (used / "checkpoints").mkdir(parents=True)
    code, out = run_cli(capsys, "federation", "tiny", "--out", used, *fl)
    assert code != 0 and "--resume" in out and "Traceback" not in out
    fresh = tmp_path / "fresh"
    code, out = run_cli(
        capsys,
        "federation",
        "tiny",
        "--clients-dir",
        tmp_path,
        "--out",
        fresh,
        *fl,
        "--resume",
    )
    assert code != 0 and "nothing to resume" in out


def test_list_methods_names_every_registered_method(capsys):
    from fedpref.algorithms.registry import methods

    assert main(["list", "methods"]) == 0
    out = capsys.readouterr().out
    for name in methods():
        assert f"\n{name} " in "\n" + out
    assert "algorithm.options." not in out  # a method's own options belong to `fedpref run --help`


def test_list_methods_names_each_methods_paper(capsys):
    from fedpref.algorithms.registry import methods

    assert all(spec.paper for spec in methods().values())
    assert main(["list", "methods"]) == 0
    rows = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()[1:] if line[:1].strip()}
    assert rows["FedGD"] == rows["Multi-CL"] == "FedGD" and rows["FedVPA-GP"] == rows["FedVPL+GB"] == "FedVPA-GP"
    assert rows["FedAvgM"] == "example"


def test_list_configs_reads_each_header(capsys, tmp_path):
    (tmp_path / "stage2").mkdir()
    (tmp_path / "a.toml").write_text("# Setting A (Sec. 5.1, App. D). Its second sentence.\nname = 'a'\n")
    (tmp_path / "stage2" / "b.toml").write_text("name = 'b'\n")
    assert main(["list", "configs", "--dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[0] == "a" and line.rstrip().endswith("Setting A (Sec. 5.1, App. D).") for line in lines)
    assert any(line.split() == ["b", "stage2"] for line in lines)  # name, group, no header


def test_list_configs_shows_the_shipped_ones_by_name_and_group(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the checkout: the package's own configs
    assert main(["list", "configs"]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    rows = {line.split()[0]: line.split()[1] for line in lines if line[:1].strip()}  # not a wrapped description
    assert rows["quick"] == "quick" and rows["tiny"] == "quick" and rows["stories"] == "stage2"
    assert rows["reduced_imbalanced"] == "fedgd" and rows["fedgd_imbalanced_qwen2"] == "paper"


def test_list_configs_without_a_folder(capsys, tmp_path):
    assert main(["list", "configs", "--dir", str(tmp_path / "missing")]) == 2
    assert "no configs folder" in capsys.readouterr().err


def test_export_pairs_and_its_deprecated_spelling_write_the_same_file(capsys, tmp_path):
    new, old = tmp_path / "new.jsonl", tmp_path / "old.jsonl"
    code, text = run_cli(capsys, "export", "pairs", "tiny", "--out", new)
    assert code == 0 and "deprecated" not in text
    code, text = run_cli(capsys, "data", "export", "tiny", "--out", old)
    assert code == 0 and "`fedpref data export` is deprecated; use `fedpref export pairs`" in text
    assert new.read_bytes() == old.read_bytes()


def test_old_export_spelling_is_export_model(capsys, tmp_path):
    from fedpref.cli import resolve_aliases

    argv = ["export", "runs/t", "--method", "FL", "--client", "c03", "--out", "x"]
    assert resolve_aliases(argv) == ["export", "model", *argv[1:]]
    assert "use `fedpref export model RUN`" in capsys.readouterr().err
    assert resolve_aliases(["export", "model", "runs/t"]) == ["export", "model", "runs/t"]
    assert resolve_aliases(["stage2-summary", "runs/s"]) == ["summarize", "runs/s"]
    assert resolve_aliases(["run", "tiny"]) == ["run", "tiny"]


def test_method_flag_sets_the_methods_on_every_running_command(capsys, tmp_path):
    from fedpref.cli import build_parser, method_overrides

    assert method_overrides(["FL", "Multi-CL"]) == ['algorithm.methods=["FL", "Multi-CL"]']
    assert method_overrides([]) == []
    parser = build_parser()
    for argv in (
        ["run", "c.toml"],
        ["sweep", "c.toml", "--out", "o"],
        ["federation", "c.toml", "--clients-dir", "d", "--out", "o"],
        ["estimate", "c.toml"],
    ):
        assert parser.parse_args([*argv, "--method", "FL", "--method", "CL"]).methods == ["FL", "CL"]
    code, text = run_cli(capsys, "run", "tiny", "--method", "FedAvgg")
    assert code == 2 and "unknown method(s) ['FedAvgg']" in text


def test_the_shared_flags_mean_the_same_on_every_command(capsys):
    """--out, --overwrite, --resume, --engine, --log, --set and --seeds: one help text wherever they appear."""
    parser = build_parser_actions()
    helps: dict[str, set[str]] = {}
    for command, actions in parser.items():
        for action in actions:
            for flag in action.option_strings:
                if flag in ("--overwrite", "--resume", "--engine", "--log", "--seeds") or (
                    flag == "--set" and command not in ("diagnose", "personalize")
                ):
                    helps.setdefault(flag, set()).add(action.help)
    assert {flag for flag in helps} == {"--overwrite", "--resume", "--engine", "--log", "--seeds", "--set"}
    assert all(len(texts) == 1 for flag, texts in helps.items() if flag != "--seeds"), helps
    assert len(helps["--seeds"]) == 2  # sweep's (its own cells) and that of run and stage2 (a sweep of seeds)


def build_parser_actions() -> dict[str, list]:
    import argparse

    from fedpref.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: p._actions for name, p in sub.choices.items()}


def test_run_seeds_is_a_sweep_of_seeds(capsys, tmp_path, monkeypatch):
    import fedpref.experiments.sweep as sweep_module

    ran = []
    monkeypatch.setattr(sweep_module, "run_cell", lambda cell, console, engine: ran.append((cell.seed, cell.folder)))
    out = tmp_path / "s"
    code, text = run_cli(capsys, "run", "tiny", *TINY_FAST, "--seeds", "0,1", "--out", out)
    assert code == 0 and ran == [(0, out / "seed=0"), (1, out / "seed=1")]
    assert (out / "sweep.json").is_file()
    code, text = run_cli(capsys, "run", "tiny", "--seeds", "0", "--resume")
    assert code == 2 and "drop --resume/--overwrite" in text
