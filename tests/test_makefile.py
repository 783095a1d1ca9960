"""The Makefile: `make help` lists every target with a time, and every config a target runs is a shipped one."""

import fnmatch
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fedpref.config import find_config

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


def make(*args: str) -> str:
    return subprocess.run(["make", "-s", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def targets() -> set[str]:
    """Every explicit target of the Makefile (from make's database), but files and make's own."""
    database = subprocess.run(["make", "-pRrq", "-f", "Makefile", ":"], cwd=ROOT, capture_output=True, text=True)
    names = set()
    for block in database.stdout.split("\n\n"):
        lines = block.splitlines()
        if "# Not a target:" in lines or not lines:
            continue
        rule = next((line for line in lines if re.match(r"^[A-Za-z0-9.][^ =:]*:(?!=)", line)), None)
        if rule:
            names.update(rule.split(":", 1)[0].split())
    return {n for n in names if not n.startswith(".") and "%" not in n and "/" not in n and n != "Makefile"}


def help_rows() -> tuple[dict[str, str], dict[str, str]]:
    """({target or pattern: its time}, {alias: the target it runs}): the Makefile's `#: NAME | WHAT | TIME` lines,
    each checked to be a line of `make help`, and the aliases `make help` prints."""
    text = make("help")
    listed, aliases = text.split("\nOld names, kept as aliases:\n")
    printed = {line.split()[0]: line for line in listed.splitlines()[1:]}
    rows = {}
    for line in (ROOT / "Makefile").read_text().splitlines():
        if line.startswith("#: "):
            name, what, time = (part.strip() for part in line[3:].split(" | "))
            assert printed[name].split(None, 1)[1].replace(what, "", 1).strip() == time, name
            rows[name] = time
    assert set(printed) == set(rows)
    pointed = {line.split()[0]: line.split()[3] for line in aliases.splitlines() if line.strip()}
    return rows, pointed


def test_help_lists_every_target_with_a_time():
    rows, aliases = help_rows()
    assert rows["run"] == "4 min 47 s" and rows["reproduce-fedgd-table3-boundary"].startswith("70 min")
    assert all(rows.values()), [name for name, time in rows.items() if not time]
    missing = [t for t in targets() if t not in aliases and not any(fnmatch.fnmatch(t, row) for row in rows)]
    assert not missing
    assert aliases["reproduce-k80"] == "reproduce-fedgd-table5-6-acc80" and aliases["reproduce-rung2b-f8"]


def test_aliases_point_at_listed_targets():
    rows, aliases = help_rows()
    assert {"reproduce-rung2b-f8", "reproduce-f9d", "reproduce-k80", "reproduce-tldr240"} <= set(aliases)
    assert all(any(fnmatch.fnmatch(new, row) for row in rows) for new in aliases.values())


def test_every_config_a_target_runs_is_shipped():
    rows, _ = help_rows()
    names = [n for n in rows if "*" not in n and n not in ("help", "docs", "clean-venv", "figures", "test", "lint")]
    commands = make("-n", *names)
    configs = set(re.findall(r"fedpref (?:run|sweep|stage2|estimate) (\S+)", commands))
    assert {"quick", "reduced_imbalanced_40r_t2", "stage2/stories_stage1_paper", "vpa_hh_k100"} <= configs
    for name in configs:
        assert find_config(name).is_relative_to(ROOT / "src" / "fedpref" / "configs"), name


def test_a_target_declares_the_runs_it_reads():
    """reproduce-fedgd-table5-6-acc80 personalizes the K runs again: run first, it makes them first."""
    commands = make("-n", "reproduce-fedgd-table5-6-acc80")
    assert commands.index("fedpref sweep reduced_imbalanced_40r_t2") < commands.index("fedpref summarize")
    assert "--grid algorithm.num_models=4" in commands and "FedBiscuit','Soft-FL" in commands
