"""A client measures each task where it runs: compute seconds and peak memory, sent back as a few scalars that the
byte counts leave out."""

from __future__ import annotations

import torch

from fedpref.client import cost as client_cost
from fedpref.client.cost import CPU_MAX_RSS, CUDA_MAX_ALLOCATED, measured
from fedpref.engines.traffic import reply_bytes
from fedpref.protocol import COST, Reply


def test_a_cpu_task_reports_its_seconds_and_the_peak_rss() -> None:
    reply = measured(lambda: Reply("a", 1, {"w": torch.zeros(2)}, {"train_loss": 0.5}), torch.device("cpu"))
    cost = reply.metrics[COST]
    assert cost["client_s"] >= 0 and cost["peak_memory_bytes"] > 0 and cost["peak_memory_kind"] == CPU_MAX_RSS
    assert reply_bytes(reply) == 2 * 4 + 8  # the state and train_loss: the cost travels as config, not counted


def test_a_cuda_task_reports_the_max_allocated_since_it_began(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(client_cost.torch.cuda, "reset_peak_memory_stats", lambda device: calls.append("reset"))
    monkeypatch.setattr(client_cost.torch.cuda, "synchronize", lambda device: calls.append("sync"))
    monkeypatch.setattr(client_cost.torch.cuda, "max_memory_allocated", lambda device: 3 * 2**20)

    def task() -> Reply:
        calls.append("task")
        return Reply("a", 1)

    cost = measured(task, torch.device("cuda")).metrics[COST]
    assert calls == ["reset", "task", "sync"]
    assert (cost["peak_memory_bytes"], cost["peak_memory_kind"]) == (3 * 2**20, CUDA_MAX_ALLOCATED)
