"""Module 14: the one timing policy every benchmark in TinyTorch uses.

- Warm-up: untimed calls first (page faults, thread pools, caches, lazy builds).
- Per-call samples: each call is timed on its own, never averaged into a batch, so one scheduler
  stall shows up as one slow sample instead of skewing them all. A fast call is sampled until
  `min_time` has passed and at least `min_calls` calls were made; a slow one stops sooner.
- Interleaved rounds: several backends take turns (round r starts with backend r mod n), so a
  noisy moment hits them all alike; a pause after each sample lets spinning thread pools go idle.
- Summary: median (the figure), min (the best the machine did), spread (relative interquartile
  range, (q3 - q1) / median: how much the samples disagree).

Everything here takes its clock and its sleep as arguments, so tests drive it with fake ones.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from numbers import Integral
from typing import Any

Clock = Callable[[], float]
NOISY_SPREAD = 0.25  # samples disagreeing by more than this (relative IQR) make a figure "noisy"


@dataclass(frozen=True)
class Timing:
    """Seconds per call, one entry per timed call (or per round, for interleaved rounds)."""

    samples: tuple[float, ...]
    warmup: int = 0

    def __post_init__(self) -> None:
        if not self.samples:
            raise ValueError("Timing: samples must hold at least one time")

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    @property
    def spread(self) -> float | None:
        """(q3 - q1) / median of the samples; None with fewer than 3 samples (nothing to judge)."""
        return spread(self.samples)

    def rate(self, work: float) -> float:
        """work per second / 1e9 at the median time: GFLOP/s for flops, GB/s for bytes."""
        return work / self.median / 1e9


def spread(samples: tuple[float, ...] | list[float]) -> float | None:
    """Relative interquartile range (q3 - q1) / median; None with fewer than 3 samples."""
    if len(samples) < 3:
        return None
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    med = statistics.median(samples)
    return (q3 - q1) / med if med > 0 else None


def paired_speedup(fast: Timing, base: Timing, *, work_ratio: float = 1.0) -> float | None:
    """How many times the rate of `fast` exceeds that of `base`, round by round: the median over
    rounds r of work_ratio * base.samples[r] / fast.samples[r].

    Both timings must come from the same `interleaved` rounds (sample r of each was taken in
    round r, moments apart), so a slow stretch of the machine slows both samples of its round
    and divides out; a ratio of the two medians compares samples from different moments
    instead. `work_ratio` is fast's work over base's when they differ (bytes of bias+GELU over
    bytes of a copy); 1 for the same problem. A round where either sample is missing (NaN, as a
    failed torch request gives) or not positive is left out; None when no round is left.
    """
    if len(fast.samples) != len(base.samples):
        raise ValueError(
            f"paired_speedup: fast and base need one sample per round each, got "
            f"{len(fast.samples)} and {len(base.samples)}"
        )
    if not work_ratio > 0:
        raise ValueError(f"paired_speedup: work_ratio must be > 0, got {work_ratio!r}")
    ratios = [
        work_ratio * b / f
        for f, b in zip(fast.samples, base.samples, strict=True)
        if f > 0 and b > 0  # False for NaN too
    ]
    return statistics.median(ratios) if ratios else None


def checked_count(value: object, name: str, low: int) -> int:
    # Integral, not int: counts computed with NumPy arrive as np.int64.
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def per_call(
    fn: Callable[[], Any],
    *,
    warmup: int = 1,
    min_time: float = 0.002,
    min_calls: int = 5,
    max_calls: int | None = None,
    slow_s: float | None = None,
    before: Callable[[int], None] | None = None,
    after: Callable[[int, Any], None] | None = None,
    clock: Clock = time.perf_counter,
) -> Timing:
    """Time fn() call by call: `warmup` untimed calls, then samples until the budget is met.

    Stops once `min_time` seconds have passed and `min_calls` samples were taken, or after
    10 x min_time whatever the count (a slow kernel needs few samples), or at `max_calls`.
    `before(i)` runs untimed before sample i (rotate inputs); `after(i, result)` runs untimed
    after it (check the output; it may raise). With `slow_s`, a warm-up call slower than that is
    kept as the only sample: a kernel taking seconds is timed once.
    """
    if not callable(fn):
        raise TypeError(f"per_call: fn must be callable, got {type(fn).__name__}")
    warmup = checked_count(warmup, "per_call: warmup", 0)
    min_calls = checked_count(min_calls, "per_call: min_calls", 1)
    if max_calls is not None:
        max_calls = max(checked_count(max_calls, "per_call: max_calls", 1), 1)
    samples: list[float] = []
    for i in range(warmup):
        if before:
            before(-1 - i)
        start = clock()
        result = fn()
        took = clock() - start
        if after:
            after(-1 - i, result)
        if slow_s is not None and took > slow_s:
            return Timing((took,), warmup=i + 1)
    began = clock()
    while True:
        elapsed = clock() - began
        if samples and (
            (max_calls is not None and len(samples) >= max_calls)
            or (elapsed >= min_time and len(samples) >= min_calls)
            or (min_time > 0 and elapsed >= 10 * min_time)
        ):
            break
        i = len(samples)
        if before:
            before(i)
        start = clock()
        result = fn()
        samples.append(clock() - start)
        if after:
            after(i, result)
    return Timing(tuple(samples), warmup=warmup)


def interleaved(
    fns: Mapping[str, Callable[[], float]],
    rounds: int,
    *,
    settle: Mapping[str, float] | None = None,
    default_settle: float = 0.005,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Timing]:
    """Each fn returns one sample (seconds) per round; round r starts with backend r mod n.

    `settle[name]` seconds of sleep follow that backend's samples (`default_settle` otherwise),
    so the thread pool it leaves spinning (OpenBLAS ~0.2 s, libgomp ~7 ms) is idle before the
    next backend starts.
    """
    rounds = checked_count(rounds, "interleaved: rounds", 1)
    names = list(fns)
    samples: dict[str, list[float]] = {n: [] for n in names}
    pause = dict(settle or {})
    for r in range(rounds):
        for i in range(len(names)):
            name = names[(r + i) % len(names)]
            samples[name].append(float(fns[name]()))
            sleep(pause.get(name, default_settle))
    return {n: Timing(tuple(s)) for n, s in samples.items()}


def interleaved_calls(
    fns: Mapping[str, Callable[[], Any]],
    rounds: int,
    *,
    warmup: int = 1,
    settle: Mapping[str, float] | None = None,
    default_settle: float = 0.005,
    sleep: Callable[[float], None] = time.sleep,
    clock: Clock = time.perf_counter,
) -> dict[str, Timing]:
    """`interleaved` rounds of single calls: `warmup` untimed calls of each fn first, then each
    round times one call of each (per_call's clock), so sample r of every fn shares round r's load.
    """
    warmup = checked_count(warmup, "interleaved_calls: warmup", 0)
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    one_call = {
        name: lambda fn=fn: (
            per_call(fn, warmup=0, min_time=0.0, min_calls=1, max_calls=1, clock=clock).min
        )
        for name, fn in fns.items()
    }
    return interleaved(one_call, rounds, settle=settle, default_settle=default_settle, sleep=sleep)
