"""A node of a real federation reads only its own file: the same client as its partition of the pooled file."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("flwr")

from fedpref.cli import main  # noqa: E402
from fedpref.config import load_config  # noqa: E402
from fedpref.data.client_files import split_by_user  # noqa: E402
from fedpref.engines.flower import client_app  # noqa: E402

TINY = ["data.group_sizes=[1, 1, 1, 0]", "data.pairs_per_axis=6", "data.val_pairs=2", "data.test_pairs=2"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """(config over the pooled file, the pooled file, user -> own file)."""
    folder = tmp_path_factory.mktemp("local")
    pooled = folder / "pooled.jsonl"
    sets = [arg for item in TINY for arg in ("--set", item)]
    assert main(["data", "export", "tiny", *sets, "--out", str(pooled)]) == 0
    cfg = load_config("tiny", [*TINY, "data.source='jsonl'", f"data.path='{pooled}'"])
    return cfg, pooled, split_by_user(pooled, "client", folder / "clients")


def context(**node_config) -> SimpleNamespace:
    return SimpleNamespace(node_config=node_config)


def test_a_node_with_its_own_file_is_its_partition_of_the_pooled_file(files):
    cfg, _, own = files
    for partition, user in enumerate(sorted(own)):
        local = client_app.node_for(cfg, context(**{"data-path": str(own[user])}))
        pooled = client_app.node_for(cfg, context(**{"partition-id": partition, "num-partitions": len(own)}))
        assert local.info == pooled.info and local.info.client_id == user and local.info.true_group
        for split in ("train", "val", "test"):
            a, b = getattr(local.client, split), getattr(pooled.client, split)
            assert len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a.seqs, b.seqs))


def test_a_node_file_with_several_users_is_refused(files):
    cfg, pooled, _ = files
    with pytest.raises(ValueError, match="a node holds one client's pairs, found 3 users"):
        client_app.build_local_node(cfg, pooled)


def test_a_node_without_data_or_partition_says_what_to_set(files):
    with pytest.raises(ValueError, match="data-path"):
        client_app.node_for(files[0], context())
