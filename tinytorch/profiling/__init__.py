"""Module 14: profiling. The one timing policy, the benchmark problems, the machine's ceilings,
the load seen while timing, and peak memory of a call."""

from tinytorch.profiling.ceilings import Ceilings, combine_rounds, measure_ceilings
from tinytorch.profiling.credible import CREDIBLE, above_ceiling
from tinytorch.profiling.latency import LatencyStats, measure_latency
from tinytorch.profiling.load import Load, LoadMeter
from tinytorch.profiling.memory import MemoryStats, measure_peak_memory
from tinytorch.profiling.problems import Problem, bias_gelu, gelu, gemm, numpy_bias_gelu
from tinytorch.profiling.timing import (
    NOISY_SPREAD,
    Timing,
    interleaved,
    interleaved_calls,
    paired_speedup,
    per_call,
    spread,
)

__all__ = [
    "CREDIBLE",
    "NOISY_SPREAD",
    "Ceilings",
    "LatencyStats",
    "Load",
    "LoadMeter",
    "MemoryStats",
    "Problem",
    "Timing",
    "above_ceiling",
    "bias_gelu",
    "combine_rounds",
    "gelu",
    "gemm",
    "interleaved",
    "interleaved_calls",
    "measure_ceilings",
    "measure_latency",
    "measure_peak_memory",
    "numpy_bias_gelu",
    "paired_speedup",
    "per_call",
    "spread",
]
