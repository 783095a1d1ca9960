"""fedpref.embedded: a hub GGUF file named 'owner/repo/path.gguf' is fetched once and converted like a local one."""

from pathlib import Path

import pytest

from fedpref import embedded
from fedpref.errors import FedprefError


def test_hub_gguf_names():
    assert embedded.hub_gguf("ggml-org/models/tinyllamas/stories260K.gguf") == (
        "ggml-org/models",
        "tinyllamas/stories260K.gguf",
    )
    assert embedded.hub_gguf("owner/repo/model.gguf") == ("owner/repo", "model.gguf")
    for local in ("./a/b/c.gguf", "/a/b/c.gguf", "~/a/b.gguf", "repo/model.gguf", "a//b.gguf"):
        assert embedded.hub_gguf(local) is None, local


def test_a_hub_gguf_is_downloaded_then_converted(monkeypatch, tmp_path):
    fetched = tmp_path / "stories260K.gguf"
    calls = []
    monkeypatch.setattr(embedded, "download_gguf", lambda repo, name: calls.append((repo, name)) or fetched)
    monkeypatch.setattr(embedded, "gguf_folder", lambda path: f"converted:{Path(path).name}")
    assert embedded.resolve_backbone("ggml-org/models/tinyllamas/stories260K.gguf") == "converted:stories260K.gguf"
    assert calls == [("ggml-org/models", "tinyllamas/stories260K.gguf")]
    assert embedded.resolve_backbone("Qwen/Qwen2-0.5B") == "Qwen/Qwen2-0.5B"  # a hub id stays one


def test_an_unreachable_hub_gguf_says_how_to_go_local(monkeypatch):
    import huggingface_hub

    def offline(repo, filename):
        raise OSError("no network")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    with pytest.raises(FedprefError, match=r"owner/repo/m\.gguf: cannot fetch .* \(OSError\); give a local copy"):
        embedded.resolve_backbone("owner/repo/m.gguf")
