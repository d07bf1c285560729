"""Module 14: wall-clock latency with warm-up, reported as median / min / max of the repeats."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral
from typing import Any


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
    # Integral, not int: counts computed with NumPy arrive as np.int64.
    if isinstance(warmup, bool) or not isinstance(warmup, Integral) or warmup < 0:
        raise ValueError(f"measure_latency: warmup must be an int >= 0, got {warmup!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, Integral) or repeats < 1:
        raise ValueError(f"measure_latency: repeats must be an int >= 1, got {repeats!r}")
    warmup, repeats = int(warmup), int(repeats)
    for _ in range(warmup):
        fn(*args, **kwargs)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args, **kwargs)
        samples.append(time.perf_counter() - start)
    return LatencyStats(
        median_s=statistics.median(samples),
        min_s=min(samples),
        max_s=max(samples),
        mean_s=statistics.fmean(samples),
        repeats=repeats,
        warmup=warmup,
        samples=tuple(samples),
    )
