"""Milestone 07, Custom Kernels, as a library: the case registry, the gate and its results.

Data flows one way: cases (registry) -> part_a (results) -> tinytorch.render (terminal, JSON,
platforms). Part B's timings live in tinytorch.bench. The CLI (`tito milestone run 07`), the
notebook and the headless grader all call these functions. Nothing here imports the renderers or
the benchmarks: they import this.
"""

from tinytorch.compare import Comparison, compare
from tinytorch.milestone07.cases import (
    CASES,
    DEFAULT_IMPL,
    FUNCTIONS,
    GROUP_INTRO,
    GROUPS,
    LESSONS,
    Case,
    select_cases,
)
from tinytorch.milestone07.part_a import check_matmul_grid, run_part_a
from tinytorch.milestone07.results import (
    BenchRow,
    CaseResult,
    CheckResult,
    PartAResult,
    PartBResult,
)

__all__ = [
    "CASES",
    "DEFAULT_IMPL",
    "FUNCTIONS",
    "GROUPS",
    "GROUP_INTRO",
    "LESSONS",
    "BenchRow",
    "Case",
    "CaseResult",
    "CheckResult",
    "Comparison",
    "PartAResult",
    "PartBResult",
    "check_matmul_grid",
    "compare",
    "run_part_a",
    "select_cases",
]
