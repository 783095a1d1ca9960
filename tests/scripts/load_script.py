"""Import a repository script (scripts/, benchmarks/) as a module, for the tests of what it computes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_script(relative: str) -> ModuleType:
    """The script at ROOT / `relative`, imported under its file name (registered in sys.modules, so that its
    dataclasses and pickles resolve)."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module
