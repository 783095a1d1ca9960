"""A Stage 2 run's checkpoints: phase states kept as snapshots, the run's clock, and an interrupted tiny run
resumed (twice) to the very results of the uninterrupted one."""

import json
from pathlib import Path

import pytest
import torch

from fedpref.errors import FedprefError
from fedpref.stage2 import pipeline
from fedpref.stage2.checkpoints import Stage2Checkpoints
from fedpref.stage2.config import load_stage2_config

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "src/fedpref/configs/stage2/stories.toml"
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


AGREEMENT = {
    "helpful": {"win_rate": 58.5, "ci95": [48.7, 67.67]},
    "harmless": {"win_rate": 49.0, "ci95": [39.42, 58.65]},
}


def test_the_judges_state_keeps_the_reward_models_and_every_agreement_apart():
    class Trained:  # a reward-model judge as build_judges makes it: its trained states in margins.states
        margins = type("Margins", (), {"states": {"helpful": {"w": torch.ones(1)}}})()

    agreements = {"reward_model": AGREEMENT, "lm": AGREEMENT}
    states, measured = pipeline.restored_judges(pipeline.judges_state({"reward_model": Trained()}, agreements))
    assert measured == agreements and torch.equal(states["helpful"]["w"], torch.ones(1))
    assert pipeline.restored_judges(None) == (None, {})


def test_an_older_judges_checkpoint_gives_its_states_and_leaves_the_overwritten_agreement_to_measure_again():
    older = {"reward_model": {"helpful": {"w": torch.ones(1)}}, "lm": AGREEMENT, "torch_rng": torch.zeros(2)}
    states, measured = pipeline.restored_judges(older)  # "reward_model" held the states, not the agreement
    assert measured == {"lm": AGREEMENT} and torch.equal(states["helpful"]["w"], torch.ones(1))


def test_a_saved_state_is_a_snapshot_and_comes_back_on_resume(tmp_path):
    checkpoints = Stage2Checkpoints(tmp_path / "checkpoints", {"seed": 0})
    history = [{"step": 0}]
    checkpoints.save("dpo", {"history": history, "w": torch.ones(2)})
    history.append({"step": 1})  # the run goes on changing its objects after the save
    assert checkpoints.saved("dpo")["history"] == [{"step": 0}]
    assert not checkpoints.done("dpo") and checkpoints.saved("feddpo") is None

    resumed = Stage2Checkpoints(tmp_path / "checkpoints", {"seed": 0}, resume=True)
    assert resumed.saved("dpo")["history"] == [{"step": 0}]
    assert torch.equal(resumed.saved("dpo")["w"], torch.ones(2))


def test_spans_count_the_time_of_every_process_that_ran_a_phase(tmp_path):
    checkpoints = Stage2Checkpoints(tmp_path / "c", {})
    checkpoints.earlier_s = 100.0  # as if an interrupted process had saved at 100 s on the run's clock
    checkpoints.begin("stage1")
    checkpoints.begin("stage1")  # a second begin keeps the first start
    start = checkpoints.spans["stage1"][0]
    assert start >= 100.0
    checkpoints.save("stage1", {}, done=True)
    took = checkpoints.took_s("stage1")
    assert 0.0 <= took == round(checkpoints.spans["stage1"][1] - start, 1)
    assert checkpoints.took_s("stage1") == took  # frozen once the phase is done


def test_resume_refuses_another_config_and_an_empty_folder(tmp_path):
    Stage2Checkpoints(tmp_path / "c", {"seed": 0}).save("stage1", {}, done=True)
    with pytest.raises(FedprefError, match="belongs to a different Stage 2 config"):
        Stage2Checkpoints(tmp_path / "c", {"seed": 1}, resume=True)
    with pytest.raises(FedprefError, match="nothing to resume"):
        Stage2Checkpoints(tmp_path / "other", {"seed": 0}, resume=True)
    with pytest.raises(ValueError, match="unknown Stage 2 phase 'dpo2'"):
        Stage2Checkpoints(tmp_path / "c", {"seed": 0}).save("dpo2", {})


def _stop_at(monkeypatch, reporter: str, when: int) -> None:
    """Raise KeyboardInterrupt from the pipeline's `reporter` progress callback after step/round `when`."""
    real = getattr(pipeline, reporter)

    def stopping(*args):
        report = real(*args)

        def callback(*values):
            report(*values)
            done = values[0] if reporter == "step_reporter" else values[0]["round"]
            if done == when:
                raise KeyboardInterrupt

        return callback

    monkeypatch.setattr(pipeline, reporter, stopping)


@pytest.mark.slow  # three more tiny Stage 2 processes beside the fixture's: minutes on 2 busy cores
def test_an_interrupted_run_resumes_to_the_results_of_an_uninterrupted_one(
    stage2_tiny, stage2_tiny_overrides, tmp_path, monkeypatch
):
    cfg = load_stage2_config(CONFIG, stage2_tiny_overrides)
    out, quiet = tmp_path / "run", lambda line: None
    with monkeypatch.context() as patch:  # stopped in conditional DPO's second step of three
        _stop_at(patch, "step_reporter", 1)
        with pytest.raises(KeyboardInterrupt):
            pipeline.run_stage2(cfg, out, overwrite=False, log=quiet)
    with pytest.raises(FedprefError, match="holds an unfinished Stage 2 run; pass --resume"):
        pipeline.run_stage2(cfg, out, overwrite=False, log=quiet)
    lines = []
    with monkeypatch.context() as patch:  # resumed, then stopped in FedDPO's second round of three
        _stop_at(patch, "round_reporter", 1)
        with pytest.raises(KeyboardInterrupt):
            pipeline.run_stage2(cfg, out, overwrite=False, log=lines.append, resume=True)
    assert "stage 1: done (resumed)" in lines and "conditional DPO: from step 1 of 3 (resumed)" in lines
    lines.clear()
    pipeline.run_stage2(cfg, out, overwrite=False, log=lines.append, resume=True)
    assert "FedDPO: from round 1 of 3 (resumed)" in lines

    resumed, whole = (json.loads((d / "results.json").read_text()) for d in (out, stage2_tiny))
    assert resumed["status"] == "finished"
    for part in ("stage1", "stage2", "feddpo", "task"):
        assert resumed[part] == whole[part], part
    assert set(resumed["timing"]) == set(whole["timing"])
