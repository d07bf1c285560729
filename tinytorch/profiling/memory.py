"""Module 14: peak memory allocated during one call, through tracemalloc.

NumPy reports its array buffers to tracemalloc, so the peak includes every temporary array the
call creates, not just Python objects.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MemoryStats:
    """Bytes allocated during the call: the peak above the starting point, and what remained."""

    peak_bytes: int
    retained_bytes: int

    @property
    def peak_mib(self) -> float:
        return self.peak_bytes / 2**20


def measure_peak_memory(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> MemoryStats:
    """Run fn(*args, **kwargs) once and report the peak of traced allocations during it."""
    if not callable(fn):
        raise TypeError(f"measure_peak_memory: fn must be callable, got {type(fn).__name__}")
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start, _ = tracemalloc.get_traced_memory()
        result = fn(*args, **kwargs)
        end, peak = tracemalloc.get_traced_memory()
        del result
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return MemoryStats(peak_bytes=max(0, peak - start), retained_bytes=max(0, end - start))
