"""What every benchmark measurement shares: timers, percentiles, peak memory, the turns file.

Used by :mod:`memory_bank.bench.worker` (one system at one size) and
:mod:`memory_bank.bench.scenarios` (many users, a forgetting pass over a million memories).
"""

from __future__ import annotations

import json
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memory_bank.bench.data import Turn

Spec = dict[str, Any]

#: Share of memories a benchmarked forgetting pass forgets: a daily pass in a store that gains
#: as many memories as it loses (0.1%: 1,000 of a million). ``forget_million`` adds a 1% pass.
FORGET_RATE = 0.001


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if len(values) else float("nan")


def rounds_summary(rounds: list[list[float]], scale: float = 1000.0) -> dict[str, Any]:
    """p50/p95 per round (in ms) and their medians over the rounds."""
    p50 = [pct(r, 50) * scale for r in rounds if r]
    p95 = [pct(r, 95) * scale for r in rounds if r]
    return {
        "p50": statistics.median(p50) if p50 else None,
        "p95": statistics.median(p95) if p95 else None,
        "rounds_p50": [round(x, 3) for x in p50],
        "n": sum(len(r) for r in rounds),
    }


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


class CpuClock:
    """Collects the CPU time of the calling thread next to wall times: on a machine whose cores
    are shared, CPU time is close to what the wall time would be on an idle machine."""

    def __init__(self) -> None:
        self.samples: list[float] = []

    def timed(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        start, cpu = time.perf_counter(), time.thread_time()
        out = fn()
        self.samples.append(time.thread_time() - cpu)
        return time.perf_counter() - start, out

    def p50_ms(self) -> float | None:
        return pct(self.samples, 50) * 1000 if self.samples else None


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def load_turns(path: Path, n: int, offset: int = 0) -> list[Turn]:
    import datetime as dt

    out: list[Turn] = []
    with path.open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i < offset:
                continue
            if len(out) == n:
                break
            q, r, at = json.loads(line)
            out.append(Turn(q, r, dt.datetime.fromisoformat(at)))
    return out


def set_threads(threads: int | None) -> None:
    if not threads:
        return
    import torch

    torch.set_num_threads(threads)
