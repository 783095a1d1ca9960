"""The results schema: v0 run folders upgrade on read, summaries stay byte-identical, the writer's statuses."""

import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from fedpref.cli import main
from fedpref.config import load_config
from fedpref.experiments import experiment, orchestrator
from fedpref.reports.summary import summarize, to_csv
from fedpref.results import (
    FAILED,
    FINISHED,
    INTERRUPTED,
    RESULTS_FILE,
    RUN,
    SCHEMA_VERSION,
    STAGE2,
    Cost,
    Curves,
    MethodResult,
    Provenance,
    ResultsError,
    ResultsWriter,
    RunResults,
    fields_markdown,
    load_results,
    upgrade,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FINISHED_RUN, INTERRUPTED_RUN = FIXTURES / "run_tiny_v0", FIXTURES / "run_tiny_v0_interrupted"
ROOT = Path(__file__).resolve().parents[1]


def test_v0_fixtures_upgrade_on_read():
    done, stopped = load_results(FINISHED_RUN), load_results(INTERRUPTED_RUN)
    assert "schema_version" not in json.loads((FINISHED_RUN / RESULTS_FILE).read_text())  # written before the schema
    assert (done.schema_version, done.status, done.kind) == (SCHEMA_VERSION, FINISHED, RUN)
    assert (stopped.schema_version, stopped.status, stopped.kind) == (SCHEMA_VERSION, INTERRUPTED, RUN)
    assert list(done.methods) == ["Local", "CL", "Multi-CL", "FL"] and list(stopped.methods) == ["Local", "CL"]
    assert done.provenance.config_hash == "6850a5a23631" and done.seed == 0 and done.timing == {"wall_s": 17.1}
    fl = done.methods["FL"]
    assert fl.curves.steps == [0, 2] and fl.curves.acc_mean == [58.33, 60.42]
    assert fl.curves.by_group["G1"] == [33.33, 41.67] and fl.assignments == [] and fl.diagnostics == {}


@pytest.mark.parametrize("run", [FINISHED_RUN, INTERRUPTED_RUN], ids=["finished", "interrupted"])
def test_v0_round_trip_keeps_every_key(run):
    """Writing a v0 file back adds the schema's three keys and changes nothing else."""
    written = load_results(run).to_dict()
    assert {k: written.pop(k) for k in ("schema_version", "status", "kind")}["schema_version"] == SCHEMA_VERSION
    assert written == json.loads((run / RESULTS_FILE).read_text())


def test_summary_of_the_v0_fixture_is_unchanged(tmp_path, monkeypatch):
    """What `fedpref summarize tests/fixtures/run_tiny_v0 --out ... --csv ...` wrote before the schema (92273ec)."""
    monkeypatch.chdir(ROOT)  # the Markdown names the run by the path given
    md, csv = tmp_path / "s.md", tmp_path / "s.csv"
    assert main(["summarize", "tests/fixtures/run_tiny_v0", "--out", str(md), "--csv", str(csv)]) == 0
    assert md.read_bytes() == (FIXTURES / "run_tiny_v0.summary.md").read_bytes()
    assert csv.read_bytes() == (FIXTURES / "run_tiny_v0.summary.csv").read_bytes()
    markdown, rows = summarize([Path("tests/fixtures/run_tiny_v0")])  # the same through the library
    assert markdown == (FIXTURES / "run_tiny_v0.summary.md").read_text(encoding="utf-8")
    assert to_csv(rows) == (FIXTURES / "run_tiny_v0.summary.csv").read_text(encoding="utf-8")


def test_summary_leaves_the_interrupted_fixture_out(capsys):
    assert main(["summarize", str(FIXTURES)]) == 0
    assert f"Left out 1 unfinished run(s): `{INTERRUPTED_RUN}`" in capsys.readouterr().out


def test_resuming_the_interrupted_v0_fixture_finishes_it(tmp_path):
    run = shutil.copytree(INTERRUPTED_RUN, tmp_path / "run")
    assert main(["run", str(run / "config.toml"), "--out", str(run), "--resume"]) == 0
    resumed, reference = load_results(run), load_results(FINISHED_RUN)
    assert resumed.status == FINISHED and resumed.schema_version == SCHEMA_VERSION and resumed.error is None
    assert list(resumed.methods) == ["Local", "CL", "Multi-CL", "FL"]
    # the two methods the checkpoint held are kept as they were; the other two run as in the uninterrupted run
    for name in resumed.methods:
        assert resumed.methods[name].curves == reference.methods[name].curves, name


def test_round_trip_of_hand_written_results(tmp_path):
    curves = Curves(steps=[0, 5], acc_mean=[50.0, 75.0], acc_std=[1.0, 2.0], by_group={"G1": [50.0, 75.0]})
    curves.per_client = {"c000": [50.0, 75.0]}
    method = MethodResult(personalization=curves, diagnostics={}, assignments=[], timing={"wall_s": 1.5})
    method.partition_ari, method.extra = 1.0, {"future_key": [1, 2]}
    provenance = Provenance(fedpref_version="0.1.0", config_hash="abc", python="3.11.7", torch="2.4", versions={})
    results = RunResults(seed=3, provenance=provenance, data={"clients": 1}, methods={"FedGD": method})
    results.timing, results.extra = {"wall_s": 9.0}, {"note": "kept"}
    ResultsWriter(tmp_path).finish(results)
    expected = {
        "schema_version": SCHEMA_VERSION,
        "status": "finished",
        "kind": "run",
        "seed": 3,
        "fedpref_version": "0.1.0",
        "config_hash": "abc",
        "python": "3.11.7",
        "torch": "2.4",
        "versions": {},
        "data": {"clients": 1},
        "methods": {
            "FedGD": {
                "personalization": {
                    "steps": [0, 5],
                    "acc_mean": [50.0, 75.0],
                    "acc_std": [1.0, 2.0],
                    "by_group": {"G1": [50.0, 75.0]},
                    "per_client": {"c000": [50.0, 75.0]},
                },
                "diagnostics": {},
                "assignments": [],
                "timing": {"wall_s": 1.5},
                "partition_ari": 1.0,
                "future_key": [1, 2],
            }
        },
        "timing": {"wall_s": 9.0},
        "note": "kept",
    }
    assert json.loads((tmp_path / RESULTS_FILE).read_text()) == expected
    assert not list(tmp_path.glob("*.tmp"))  # written through a temporary file, then replaced
    assert load_results(tmp_path) == results


def test_stage2_results_upgrade_and_round_trip():
    v0 = {
        "config": {"seed": 1, "stage1": {"method": "FedVPL"}},
        "task": {"name": "stories", "types": ["G1", "G2"]},
        "stage1": {"by_group": {"G1": {"acc": 90.0}}},
        "stage2": {"reward": "selector", "training": {"steps": 3}, "win_rates": {"oracle": {"G1": {"win_rate": 60}}}},
        "timing": {"wall_s": 2.0},
    }
    results = RunResults.from_dict(v0)
    assert (results.kind, results.status) == (STAGE2, FINISHED)  # v0 Stage 2 files were written at the end only
    assert results.stage2.types == ("G1", "G2") and results.stage2.feddpo is None
    assert results.stage2.policy("stage2").win_rates["oracle"]["G1"]["win_rate"] == 60
    written = results.to_dict()
    assert {k: written.pop(k) for k in ("schema_version", "status", "kind")}["kind"] == STAGE2
    assert written == v0


def test_unreadable_and_newer_files_are_refused(tmp_path):
    (tmp_path / RESULTS_FILE).write_text("{not json")
    with pytest.raises(ResultsError, match="not readable as JSON"):
        load_results(tmp_path)
    with pytest.raises(ResultsError, match="newer fedpref"):
        upgrade({"schema_version": SCHEMA_VERSION + 1, "status": "finished"})
    with pytest.raises(ResultsError, match="status 'done'"):
        upgrade({"schema_version": SCHEMA_VERSION, "status": "done"})
    assert upgrade({})["status"] == INTERRUPTED and upgrade({"timing": {}})["status"] == FINISHED


def test_a_failing_method_writes_status_failed(tmp_path, monkeypatch):
    cfg = load_config("tiny", ["algorithm.methods=['Local','FL']", "personalization.steps=[0]"])
    real = orchestrator.execute_method

    def fail_on_fl(name, *args, **kwargs):
        if name == "FL":
            raise RuntimeError("boom in FL")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(orchestrator, "execute_method", fail_on_fl)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with pytest.raises(RuntimeError, match="boom in FL"):
        experiment.run_experiment(cfg, run_dir, Console(file=io.StringIO()))
    results = load_results(run_dir)
    assert results.status == FAILED and results.error == "RuntimeError: boom in FL"
    assert list(results.methods) == ["Local"] and results.timing is None  # what finished before is kept


def test_a_run_writes_running_before_its_first_method(tmp_path, monkeypatch):
    cfg = load_config("tiny", ["algorithm.methods=['Local']", "personalization.steps=[0]"])
    seen = []

    def look(name, *args, **kwargs):
        seen.append(load_results(tmp_path).status)
        raise KeyboardInterrupt

    monkeypatch.setattr(orchestrator, "execute_method", look)
    with pytest.raises(KeyboardInterrupt):
        experiment.run_experiment(cfg, tmp_path, Console(file=io.StringIO()))
    assert seen == ["running"] and load_results(tmp_path).status == INTERRUPTED  # Ctrl-C: resumable, not failed


def test_field_table_names_every_field():
    table = fields_markdown()
    for name in ("schema_version", "status", "methods", "personalization", "per_client", "win_rates", "git_commit"):
        assert f"| `{name}` |" in table


def test_a_method_without_cost_still_loads_and_one_with_it_reads_typed():
    """Files written before the cost accounting have no `cost`; a method's cost reads back as `Cost`."""
    done = load_results(FINISHED_RUN)
    assert all(r.cost is None for r in done.methods.values())
    assert all("cost" not in r.to_dict() for r in done.methods.values())
    cost = {"trainable_params": 28033, "peak_memory_bytes": 2**20, "peak_memory_kind": "cpu_max_rss", "note": 1}
    method = MethodResult.from_dict({"cost": cost | {"client_s_per_round": 0.5}})
    assert isinstance(method.cost, Cost) and method.cost.trainable_params == 28033
    assert method.cost.client_s_per_round == 0.5 and method.cost.server_s_per_round is None
    assert method.cost.extra == {"note": 1}  # a key the schema does not name is kept
    assert method.to_dict()["cost"] == cost | {"client_s_per_round": 0.5}
