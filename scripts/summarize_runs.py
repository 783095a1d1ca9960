"""Superseded by `fedpref summarize` (fedpref.experiments.summary); kept so that old commands still work.

.venv/bin/python scripts/summarize_runs.py runs/red_imb_s0 runs/red_imb_s1 runs/red_imb_s2
"""

from __future__ import annotations

import sys

from fedpref.cli import main
from fedpref.experiments.summary import true_groups

__all__ = ["true_groups"]  # scripts/prototype_agreement.py imports it from here

if __name__ == "__main__":
    sys.exit(main(["summarize", *sys.argv[1:]]))
