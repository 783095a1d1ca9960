"""The tiny configuration's data and model, built once for the end-to-end algorithm tests."""

from __future__ import annotations

import pytest
from tiny_runs import tiny


@pytest.fixture(scope="session")
def tiny_setup():
    """Data, clients and reward model depend only on data/model/lora/seed, so all methods can share them."""
    from fedpref.experiments.setup import build_setup

    return build_setup(tiny(["FL"]))
