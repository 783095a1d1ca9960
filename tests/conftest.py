"""Shared fixtures: paths to ../shared (skipped where absent) and a tiny config."""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = (ROOT / ".." / "shared").resolve()
STORIES = SHARED / "models" / "stories260K" / "hf"


@pytest.fixture(scope="session")
def stories_path() -> Path:
    if not STORIES.is_dir():
        pytest.skip(f"stories260K not found at {STORIES} (the shared models folder is absent on this machine)")
    return STORIES


@pytest.fixture
def tiny_config():
    from fedpref.config import load_config

    return load_config("tiny")


# Runs shared by the end-to-end tests and tests/test_pinned_numbers.py: each is made once per session, through
# the command line (the interface that stays when the code behind it moves).
EVERY_METHOD = [
    "Local", "CL", "Multi-CL", "FL", "FL_target", "FedGD", "FedBiscuit", "Soft-FL",
    "FedVPL", "FedVPL+Ortho", "FedVPL+GB", "FedVPA-GP", "FedAvgM",
]  # fmt: skip
FEDERATED_METHODS = ["FL", "FL_target", "FedGD", "FedBiscuit", "Soft-FL", "FedVPL", "FedVPA-GP", "FedAvgM"]
# docs/extending.md's worked example runs with a momentum of its own, so that it differs from FedAvg's numbers
EXAMPLE_OPTIONS = ["algorithm.options.FedAvgM.momentum=0.5"]
STAGE2_TINY = [
    "task.prompts_per_client=24",
    "task.eval_prompts=4",
    "stage1.rounds=1",
    "stage1.local_steps=1",
    "stage1.val_pairs=1",
    "stage1.test_pairs=2",
    "generation.max_new_tokens=16",
    "dpo.lr=1e-3",  # the shipped config's lr before it became 1e-4: keeps the pinned tiny-run numbers
    "dpo.steps=3",
    "dpo.prompts_per_step=4",
    "feddpo.rounds=3",
    "feddpo.local_steps=2",
]


def run_cli(argv: list[str]) -> str:
    """`fedpref ARGV` in this process; returns what it printed (the command must succeed)."""
    import contextlib
    import io

    from fedpref.cli import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(argv)
    assert code == 0, printed.getvalue()[-2000:]
    return printed.getvalue()


def _sets(items: list[str]) -> list[str]:
    return [arg for item in items for arg in ("--set", item)]


@pytest.fixture(scope="session")
def tiny_every_method(tmp_path_factory) -> tuple[Path, str]:
    """(run folder, printed output) of configs/quick/tiny.toml with every method, in-process."""
    out = tmp_path_factory.mktemp("tiny_every_method") / "run"
    methods = [f"algorithm.methods={EVERY_METHOD!r}", *EXAMPLE_OPTIONS]
    printed = run_cli(["run", "tiny", "--out", str(out), *_sets(methods)])
    return out, printed


@pytest.fixture(scope="session")
def tiny_flower(tmp_path_factory) -> Path:
    """Run folder of configs/quick/tiny.toml with every federated method on Flower's Simulation Engine. Every message
    the server sends or receives is kept, serialized as on the wire, in `<run>/../messages/` (for
    tests/engines/test_flower_messages.py)."""
    pytest.importorskip("ray", reason="the Flower Simulation Engine needs flwr[simulation] (Ray)")
    out = tmp_path_factory.mktemp("tiny_flower") / "run"
    methods = [f"algorithm.methods={FEDERATED_METHODS!r}", *EXAMPLE_OPTIONS]
    with recording_messages(out.parent / "messages"):
        run_cli(["run", "tiny", "--engine", "flower", "--out", str(out), *_sets(methods)])
    return out


@contextlib.contextmanager
def recording_messages(folder: Path):
    """Write every Message the simulation's server grid pushes or pulls to `folder` as protobuf bytes."""
    from flwr.common.serde import message_to_proto
    from flwr.superlink.grid.inmemory_grid import InMemoryGrid

    folder.mkdir(parents=True)
    count = itertools.count()
    push, pull = InMemoryGrid.push_messages, InMemoryGrid.pull_messages

    def keep(messages):
        for msg in messages:
            (folder / f"{next(count):06d}.pb").write_bytes(message_to_proto(msg).SerializeToString())
        return messages

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(InMemoryGrid, "push_messages", lambda self, msgs: push(self, keep(list(msgs))))
        patch.setattr(InMemoryGrid, "pull_messages", lambda self, ids: keep(list(pull(self, ids))))
        yield


@pytest.fixture(scope="session")
def message_recorder():
    """`recording_messages`, for test modules elsewhere (several folders have a conftest, so none imports by name)."""
    return recording_messages


@pytest.fixture(scope="session")
def stage2_tiny_overrides(stories_path) -> list[str]:
    """The `--set` values of the tiny Stage 2 run: STAGE2_TINY with the stories260K policy."""
    return [f"policy_path='{stories_path}'", *STAGE2_TINY]


@pytest.fixture(scope="session")
def stage2_tiny(tmp_path_factory, stage2_tiny_overrides) -> Path:
    """Run folder of `fedpref stage2 configs/stage2/stories.toml` shrunk to seconds (STAGE2_TINY)."""
    out = tmp_path_factory.mktemp("stage2_tiny") / "run"
    config = str(ROOT / "src/fedpref/configs/stage2/stories.toml")
    run_cli(["stage2", config, "--out", str(out), *_sets(stage2_tiny_overrides)])
    return out
