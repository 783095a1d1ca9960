"""What a task costs the client that runs it: its compute seconds and the peak memory of its step.

Both are measured where the step runs and go back in the reply's metrics under `COST`, a dict of a few
scalars (raw data never leaves the client). A dict travels as configuration (JSON), not as a numeric metric,
so the byte counts (fedpref.engines.traffic) leave it out: measuring does not change what is measured.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import torch

from fedpref.protocol import COST, Reply

CUDA_MAX_ALLOCATED = "cuda_max_allocated"  # torch.cuda.max_memory_allocated since the task began
CPU_MAX_RSS = "cpu_max_rss"  # the process's peak resident set size (getrusage ru_maxrss)


def reset_peak_memory(device: torch.device) -> None:
    """Start a task's CUDA peak from what is allocated now (the CPU peak cannot be reset)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory(device: torch.device) -> dict[str, int | str]:
    """{"peak_memory_bytes", "peak_memory_kind"}: on CUDA the most memory allocated since `reset_peak_memory`,
    else the process's peak RSS; {} where neither can be read (no `resource` module).

    The RSS peak is a high-water mark of the whole process since it started, not of one step: it is the
    largest step so far or anything before it (loading the model, another method in the same process)."""
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device)
        return {"peak_memory_bytes": int(peak), "peak_memory_kind": CUDA_MAX_ALLOCATED}
    try:
        import resource
    except ImportError:  # not a Unix
        return {}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return {"peak_memory_bytes": int(peak) * scale, "peak_memory_kind": CPU_MAX_RSS}


def measured(run: Callable[[], Reply], device: torch.device) -> Reply:
    """`run()`'s reply with its cost in `metrics[COST]`: {"client_s", "peak_memory_bytes", "peak_memory_kind"}."""
    reset_peak_memory(device)
    start = time.perf_counter()
    reply = run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # the step's kernels are part of its time
    cost: dict[str, float | int | str] = {"client_s": time.perf_counter() - start, **peak_memory(device)}
    reply.metrics = {**reply.metrics, COST: cost}
    return reply
