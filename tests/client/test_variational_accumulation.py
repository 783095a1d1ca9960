"""A FedVPA-GP client's local steps: train.grad_accumulation micro-batches per AdamW step."""

import io

import pytest
from rich.console import Console

from fedpref.client import trainer as trainer_module
from fedpref.client import worker as worker_module
from fedpref.config import load_config
from fedpref.experiments.experiment import run_experiment

SETS = ["algorithm.methods=['FedVPA-GP']", "federation.rounds=1", "personalization.steps=[0]"]


def local_work(tmp_path, monkeypatch, accumulation: int) -> tuple[int, int]:
    """(batches drawn, AdamW steps taken) by the clients of a one-round FedVPA-GP run."""
    drawn, stepped = [], []
    real_next, real_train = trainer_module.BatchStream.next, worker_module.train_variational

    def counting_next(self):
        drawn.append(1)
        return real_next(self)

    def counting_train(task, client, trainer, generator):
        stepped.append(task.steps)
        return real_train(task, client, trainer, generator)

    monkeypatch.setattr(trainer_module.BatchStream, "next", counting_next)
    monkeypatch.setattr(worker_module, "train_variational", counting_train)
    cfg = load_config("tiny", [*SETS, f"train.grad_accumulation={accumulation}"])
    run_experiment(cfg, tmp_path / f"k{accumulation}", Console(file=io.StringIO()))
    return len(drawn), sum(stepped)


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_each_local_step_draws_grad_accumulation_micro_batches(tmp_path, monkeypatch):
    single = local_work(tmp_path, monkeypatch, 1)
    monkeypatch.undo()
    double = local_work(tmp_path, monkeypatch, 2)
    assert single[1] == double[1] == 3 * 2  # three clients a round, two local steps each
    assert (single[0], double[0]) == (6, 12)
