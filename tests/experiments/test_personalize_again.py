"""`fedpref personalize`: a finished run's initializations personalized again, without the global phase."""

import json
import shutil

from fedpref.cli import main
from fedpref.reports.run_groups import load_run


def test_personalize_again_repeats_the_measured_steps_and_adds_longer_ones(tiny_every_method, tmp_path, capsys):
    run = tiny_every_method[0]
    out = tmp_path / "longer"
    methods = ["--method", "FL", "--method", "CL"]
    assert main(["personalize", str(run), "--steps", "0,2,6", "--out", str(out), *methods]) == 0
    before = json.loads((run / "results.json").read_text())["methods"]
    after = json.loads((out / "results.json").read_text())
    assert set(after["methods"]) == {"FL", "CL"}
    for name in ("FL", "CL"):
        old, new = before[name]["personalization"], after["methods"][name]["personalization"]
        assert new["steps"] == [0, 2, 6]
        for cid, accs in old["per_client"].items():  # steps 0 and 2: the run's own numbers, client by client
            assert new["per_client"][cid][:2] == accs, (name, cid)
        assert len(new["acc_mean"]) == 3
        assert after["methods"][name]["assignments"] == before[name]["assignments"]
    assert after["personalized_from"]["run"] == str(run)
    assert load_run(out).config["personalization"]["steps"] == [0, 2, 6]  # summarize groups it apart from the run
    assert (out / "models" / "FL.pt").is_file() and (out / "personalization.png").stat().st_size > 0
    assert "acc^6" in capsys.readouterr().out


def test_personalize_again_changes_only_personalization(tiny_every_method, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(tiny_every_method[0], run)
    assert main(["diagnose", str(run), "--method", "FL"]) == 0
    diagnostics = json.loads((run / "results.json").read_text())["methods"]["FL"]["diagnostics"]
    base = ["personalize", str(run), "--steps", "0,2", "--method", "FL"]
    assert main([*base, "--out", str(tmp_path / "same")]) == 0  # only the steps differ: still valid
    kept = json.loads((tmp_path / "same" / "results.json").read_text())["methods"]["FL"]["diagnostics"]
    assert kept == diagnostics and "GQ_mean" in kept
    out = tmp_path / "slower"
    args = [*base, "--out", str(out)]
    assert main([*args, "--set", "personalization.lr=1e-5"]) == 0
    after = json.loads((out / "results.json").read_text())["methods"]["FL"]
    assert after["diagnostics"] == {}  # computed with the run's personalization settings: no longer valid
    assert main([*args, "--set", "train.lr=1e-5", "--overwrite"]) == 2
    assert "only personalization.* settings" in capsys.readouterr().err
    assert main(["personalize", str(run), "--steps", "0,2", "--out", str(out)]) == 2  # not empty
    assert "not empty" in capsys.readouterr().err
    for steps in ("2,0", "0,x"):
        assert main(["personalize", str(run), "--steps", steps, "--out", str(tmp_path / "bad")]) == 2
    assert main(["personalize", str(run), "--steps", "0,2", "--out", str(run)]) == 2
    assert "new folder" in capsys.readouterr().err
    copy = tmp_path / "no_models"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("models"))
    assert main(["personalize", str(copy), "--steps", "0,2", "--out", str(tmp_path / "x"), "--method", "FL"]) == 2
    assert "FL.pt: missing" in capsys.readouterr().err
