"""Module 14: wall-clock latency with warm-up, reported as median / min / max of the repeats.

A fixed number of repeats on top of the one timing policy (`tinytorch.profiling.timing`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tinytorch.profiling.timing import checked_count, per_call


@dataclass(frozen=True)
class LatencyStats:
    """Seconds per call over `repeats` timed calls (after `warmup` untimed ones)."""

    median_s: float
    min_s: float
    max_s: float
    mean_s: float
    repeats: int
    warmup: int
    samples: tuple[float, ...]

    @property
    def median_ms(self) -> float:
        return self.median_s * 1e3


def measure_latency(
    fn: Callable[..., Any],
    *args: Any,
    warmup: int = 2,
    repeats: int = 10,
    **kwargs: Any,
) -> LatencyStats:
    """Call fn(*args, **kwargs) `warmup` times untimed, then `repeats` times timed."""
    if not callable(fn):
        raise TypeError(f"measure_latency: fn must be callable, got {type(fn).__name__}")
    warmup = checked_count(warmup, "measure_latency: warmup", 0)
    repeats = checked_count(repeats, "measure_latency: repeats", 1)
    timing = per_call(
        lambda: fn(*args, **kwargs),
        warmup=warmup,
        min_time=0.0,
        min_calls=repeats,
        max_calls=repeats,
        clock=time.perf_counter,
    )
    return LatencyStats(
        median_s=timing.median,
        min_s=timing.min,
        max_s=timing.max,
        mean_s=statistics.fmean(timing.samples),
        repeats=repeats,
        warmup=warmup,
        samples=timing.samples,
    )
