"""Progress lines of a Stage 2 run: a line at every tenth of Stage 1's rounds, the DPO steps and FedDPO's rounds,
and one per FedDPO client."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

Log = Callable[[str], None]


def every_tenth(log: Log, what: str, total: int) -> Callable[[int, float | None], None]:
    """`report(done, loss)` logs `what done/total loss x elapsed Ns` at every tenth of `total` (a progress line)."""
    start, stride = time.perf_counter(), max(1, total // 10)

    def report(done: int, loss: float | None) -> None:
        if done <= total and (done % stride == 0 or done == total):
            shown = f" loss {loss:.4f}" if loss is not None else ""
            log(f"{what} {done}/{total}{shown} elapsed {time.perf_counter() - start:.0f}s")

    return report


def round_reporter(log: Log, what: str, rounds: int) -> Callable[[dict], None]:
    """A `run_rounds` callback: `every_tenth` of the rounds, with the round's mean client loss."""
    report = every_tenth(log, what, rounds)
    return lambda record: report(record["round"] + 1, record["train_loss"])


def step_reporter(log: Log, steps: int) -> Callable[[int, list[dict]], None]:
    """A `train_dpo` callback: `every_tenth` of the steps, with the step's mean DPO loss."""
    report = every_tenth(log, "conditional DPO step", steps)

    def on_step(step: int, records: list[dict]) -> None:
        losses = [r["loss"] for r in records if "loss" in r]
        report(step + 1, statistics.fmean(losses) if losses else None)

    return on_step


def client_reporter(log: Log, what: str, rounds: int) -> Callable[[int | str, str, int, list[float], float], None]:
    """A `run_feddpo` on_client callback: `what r/R client c: N local steps, loss x, Ns` per client (the mean
    loss of the steps that had one)."""

    def on_client(round_idx: int | str, client_id: str, steps: int, losses: list[float], seconds: float) -> None:
        shown = f", loss {statistics.fmean(losses):.4f}" if losses else ""
        log(
            f"{what} {round_idx + 1 if isinstance(round_idx, int) else round_idx}/{rounds} client {client_id}: "
            f"{steps} local steps{shown}, {seconds:.0f}s"
        )

    return on_client
