"""A wheel built from the checkout carries the shipped configs: installed into a fresh venv in an empty folder,
`fedpref list configs` and a short `fedpref run quick` work with no checkout in sight."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_ships_the_configs(tmp_path):
    wheels, source = tmp_path / "wheels", tmp_path / "source"  # a copy: the build leaves build/ beside its source
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        source.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)]
    subprocess.run(build, check=True, capture_output=True)
    (wheel,) = wheels.glob("fedpref-*.whl")
    env_dir, work = tmp_path / "venv", tmp_path / "empty"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # the dependencies (torch, transformers, ...) from this interpreter, as plain paths: the checkout's editable
    # install of fedpref there is a .pth hook, which a plain path does not run
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
    )
    work.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ""}
    fedpref = [python, "-m", "fedpref.cli"]
    where = subprocess.run(
        [python, "-c", "import fedpref; print(fedpref.__file__)"],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert where.startswith(str(site)), where  # the wheel's fedpref, not the checkout's
    listed = subprocess.run(
        [*fedpref, "list", "configs"], cwd=work, env=env, check=True, capture_output=True, text=True
    )
    assert "quick" in listed.stdout and "stage2" in listed.stdout and "fedgd_imbalanced_qwen2" in listed.stdout
    short = ["federation.rounds=1", "train.local_steps=1", "personalization.steps=[0]", "algorithm.methods=['FL']"]
    run = [*fedpref, "run", "quick", "--out", "out", *(a for s in short for a in ("--set", s))]
    subprocess.run(run, cwd=work, env=env, check=True, capture_output=True, text=True)
    results = json.loads((work / "out" / "results.json").read_text())
    assert list(results["methods"]) == ["FL"] and "config_version = 1" in (work / "out" / "config.toml").read_text()
