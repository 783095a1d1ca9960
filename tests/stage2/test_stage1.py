"""Stage 1's experiment config inside Stage 2: built as data, so that any pairs path works."""

from pathlib import Path

import pytest

from fedpref.errors import ConfigError
from fedpref.stage2.config import load_stage2_config
from fedpref.stage2.stage1 import stage1_config


def test_stage1_config_from_the_stage2_config():
    cfg = load_stage2_config(None, ["seed=3", "task.unseen_per_type=1", "stage1.rounds=7", "stage1.lr=0.002"])
    ecfg = stage1_config(cfg, Path("runs/x/stage1_pairs.jsonl"))
    assert (ecfg.seed, ecfg.device, ecfg.algorithm.methods) == (3, "cpu", ["FedVPA-GP"])
    assert (ecfg.data.source, ecfg.data.path, ecfg.data.cache_dir) == ("jsonl", "runs/x/stage1_pairs.jsonl", "")
    assert (ecfg.data.val_pairs, ecfg.data.test_pairs, ecfg.data.unseen_clients) == (5, 15, 2)
    assert (ecfg.federation.rounds, ecfg.federation.clients_per_round) == (7, 5)
    assert (ecfg.train.local_steps, ecfg.train.batch_size, ecfg.train.lr) == (30, 8, 0.002)


def test_a_pairs_path_with_quotes_is_taken_as_it_is():
    """Formatted into `--set data.path='...'`, a quote in the path ended the TOML string early."""
    path = Path('/tmp/it\'s a "quoted" folder/stage1_pairs.jsonl')
    assert stage1_config(load_stage2_config(), path).data.path == str(path)


def test_stage1_overrides_win_and_are_checked():
    cfg = load_stage2_config(None, ["stage1.overrides=['device=\"auto\"', 'train.lr=0.5']"])
    ecfg = stage1_config(cfg, Path("p.jsonl"))
    assert (ecfg.device, ecfg.train.lr) == ("auto", 0.5)
    bad = load_stage2_config(None, ["stage1.overrides=['algorithm.methods=[\"FedVPA-GPP\"]']"])
    with pytest.raises(ConfigError, match="unknown method"):
        stage1_config(bad, Path("p.jsonl"))
