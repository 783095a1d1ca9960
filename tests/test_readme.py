"""The README's `fedpref` commands run as written: the short ones here, the long ones listed with their reason."""

import re
import shlex
from pathlib import Path

import pytest

from fedpref.cli import main

ROOT = Path(__file__).resolve().parents[1]

# Commands too long for the test suite (minutes each on 2 cores); each names what it needs.
LONG = {
    "sweep quick": "three quick runs, about 15 minutes",
    "summarize runs/sq": "reads the sweep above",
}


def readme_commands() -> list[list[str]]:
    """Every `.venv/bin/fedpref ...` line of the README's bash blocks, as argv without the program."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = [line for block in re.findall(r"```bash\n(.*?)```", text, re.S) for line in block.splitlines()]
    return [shlex.split(line.split("#")[0])[1:] for line in lines if line.startswith(".venv/bin/fedpref ")]


def is_long(argv: list[str]) -> bool:
    return any(" ".join(argv).startswith(prefix) for prefix in LONG)


def test_readme_has_short_and_long_commands():
    commands = readme_commands()
    assert any(is_long(argv) for argv in commands)  # the list above names commands the README still shows
    assert sum(not is_long(argv) for argv in commands) >= 3


@pytest.mark.parametrize("argv", [a for a in readme_commands() if not is_long(a)], ids=" ".join)
def test_readme_command_runs(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)  # the README's paths are relative to the checkout
    if "--out" in argv:  # the run folder goes to a temporary place, not the checkout's runs/
        argv = list(argv)
        at = argv.index("--out") + 1
        argv[at] = str(tmp_path / argv[at])
    try:
        code = main(argv)
    except SystemExit as e:  # --help exits through argparse
        code = e.code
    assert code == 0, capsys.readouterr().err
