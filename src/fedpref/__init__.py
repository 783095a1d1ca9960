"""fedpref: federated, personalized reward modelling of language models."""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"  # keep equal to pyproject.toml's version (tests/test_api.py checks)

# Public names -> the module that defines them. Imported on first use (PEP 562), so that `import fedpref` and
# the command line do not pay for torch and transformers until a run needs them. By name through importlib:
# this package's own import would otherwise put every layer that reads __version__ above fedpref.api.
_LAZY = {"run": "fedpref.api", "RunResult": "fedpref.api", "load_config": "fedpref.config"}
__all__ = ["RunResult", "__version__", "load_config", "run"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'fedpref' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
