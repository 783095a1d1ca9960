"""The committed reference pages are what the code generates today."""

from pathlib import Path

from fedpref.config import ExperimentConfig
from fedpref.reference import config_rows, pages
from fedpref.stage2.config import Stage2Config

DOCS = Path(__file__).resolve().parents[1] / "docs" / "reference"


def test_committed_reference_pages_are_current():
    stale = [name for name, text in pages().items() if (DOCS / name).read_text(encoding="utf-8") != text]
    assert not stale, f"docs/reference/{stale} stale: run `python -m fedpref.reference docs/reference`"


def test_config_rows_carry_type_default_and_help():
    rows = {key: (kind, default) for key, kind, default, _ in config_rows(Stage2Config)}
    assert rows["generation.eos_token_id"] == ("int", "1")
    assert rows["eval.judges"] == ("list[str]", "['oracle', 'selector']")
    for cls in (ExperimentConfig, Stage2Config):  # every option documents itself
        assert [key for key, _, _, text in config_rows(cls) if not text] == []
