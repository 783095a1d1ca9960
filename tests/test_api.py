"""The Python API: docs/api.md's example runs as written; configs, data and run folders are checked first."""

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import fedpref
from fedpref.errors import ConfigError, FedprefError

ROOT = Path(__file__).resolve().parents[1]
PAIR = {"prompt": "p", "chosen": "c", "rejected": "r", "user_id": "a"}


def docs_example() -> str:
    """The runnable block of docs/api.md (the one that starts with `import fedpref`)."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(encoding="utf-8"), re.S)
    (code,) = [b for b in blocks if b.startswith("import fedpref")]
    return code


def test_docs_example_runs_quietly(capsys):
    namespace: dict = {}
    exec(compile(docs_example(), "docs/api.md", "exec"), namespace)
    printed = capsys.readouterr()
    result = namespace["result"]
    assert isinstance(result, fedpref.RunResult)
    assert result.curves["FL"]["steps"] == [0, 2] and len(result.curves["FL"]["acc_mean"]) == 2
    assert list(result.groups.columns) == ["method", "group", "step", "acc"]
    assert set(result.groups["group"]) == {"long", "short"} and len(result.groups) == 4
    assert result.results["data"]["clients"] == 4 and result.config.data.source == "pairwise_jsonl"
    assert {"run_dir", "config", "results", "rounds", "table", "plot", "data"} <= set(result.paths)
    assert len(result.paths["data"].read_text().splitlines()) == 32
    # quiet: only the example's own prints (no progress bars, tables or "wrote ...")
    run_dir = result.paths["run_dir"]
    assert "preparing data" not in printed.out + printed.err and f"wrote {run_dir}" not in printed.out
    del namespace, result  # out=None: the temporary folder goes with the result
    assert not run_dir.exists()


def test_version_and_lazy_import():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert fedpref.__version__ == version
    assert {"run", "RunResult", "load_config", "__version__"} <= set(dir(fedpref))
    code = "import sys, fedpref; assert 'torch' not in sys.modules and 'fedpref.api' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(AttributeError):
        fedpref.nope  # noqa: B018


def test_config_errors_before_any_run(tmp_path):
    with pytest.raises(ConfigError, match=r"<dict>: unknown key 'train\.lrr'"):
        fedpref.run({"train": {"lrr": 1}}, out=tmp_path / "o")
    with pytest.raises(ConfigError, match=r"'algorithm\.methods' has unknown"):
        fedpref.run({"algorithm": {"methods": ["FedAvgg"]}}, data=[PAIR], out=tmp_path / "o")
    with pytest.raises(ConfigError, match=r"'user' \(data\.pairwise\.user_key\)"):
        fedpref.run({"data": {"pairwise": {"user_key": "user"}}}, data=[PAIR], out=tmp_path / "o")
    with pytest.raises(ConfigError, match="engine"):
        fedpref.run("tiny", engine="ray")
    assert not (tmp_path / "o").exists()


def test_data_as_dataframe_and_dataset(tmp_path):
    import datasets
    import numpy as np
    import pandas as pd

    from fedpref.api import _rows, _write_jsonl

    frame = pd.DataFrame([PAIR | {"user_id": np.int64(7), "score": np.float32(0.5)}])
    for data in (frame, datasets.Dataset.from_pandas(frame), frame.to_dict(orient="records")):
        _write_jsonl(_rows(data), tmp_path / "p.jsonl")
        row = json.loads((tmp_path / "p.jsonl").read_text())
        assert row["user_id"] == 7 and row["prompt"] == "p" and row["score"] == 0.5
    with pytest.raises(FedprefError, match="no preference pairs"):
        _rows([])
    with pytest.raises(FedprefError, match="row 0 is a str"):
        _rows(["x"])


def test_run_folder_refusals_name_the_arguments(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "config.toml").write_text("")
    (out / "rounds.jsonl").write_text("{}\n")
    with pytest.raises(FedprefError, match=r"unfinished run; pass resume=True"):
        fedpref.run("tiny", out=out)
    (out / "results.json").write_text('{"timing": {}}')
    with pytest.raises(FedprefError, match=r"not empty; pass overwrite=True"):
        fedpref.run("tiny", out=out)
    with pytest.raises(FedprefError, match="nothing to resume"):
        fedpref.run("tiny", out=tmp_path / "none", resume=True)
