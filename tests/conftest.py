"""Shared fixtures: paths to ../shared (skipped where absent) and a tiny config."""

from __future__ import annotations

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

    return load_config(ROOT / "configs" / "tiny.toml")
