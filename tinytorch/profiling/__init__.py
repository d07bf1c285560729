"""Module 14: profiling. Latency (warm-up, median/min/max) and peak memory of a call."""

from tinytorch.profiling.latency import LatencyStats, measure_latency
from tinytorch.profiling.memory import MemoryStats, measure_peak_memory

__all__ = ["LatencyStats", "MemoryStats", "measure_latency", "measure_peak_memory"]
