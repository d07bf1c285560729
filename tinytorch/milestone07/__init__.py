"""Milestone 07, Custom Kernels, as a library: the registry, the gate, the timings and the reports.

Data flows one way: cases (registry) -> part_a / part_b (results) -> report / schema (renderers).
The CLI (`tito milestone run 07`), the notebook and the headless grader all call these functions.
"""

from tinytorch.milestone07.cases import (
    CASES,
    FUNCTIONS,
    GROUP_INTRO,
    GROUPS,
    LESSONS,
    Case,
    select_cases,
)
from tinytorch.milestone07.compare import Comparison, compare
from tinytorch.milestone07.impl import DEFAULT_IMPL
from tinytorch.milestone07.part_a import check_matmul_grid, run_part_a
from tinytorch.milestone07.part_b import run_part_b
from tinytorch.milestone07.report import render_part_a, render_part_b
from tinytorch.milestone07.results import (
    BenchRow,
    CaseResult,
    CheckResult,
    PartAResult,
    PartBResult,
)
from tinytorch.milestone07.schema import SCHEMA, SCHEMA_VERSION, to_json, validate

__all__ = [
    "CASES",
    "DEFAULT_IMPL",
    "FUNCTIONS",
    "GROUPS",
    "GROUP_INTRO",
    "LESSONS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "BenchRow",
    "Case",
    "CaseResult",
    "CheckResult",
    "Comparison",
    "PartAResult",
    "PartBResult",
    "check_matmul_grid",
    "compare",
    "render_part_a",
    "render_part_b",
    "run_part_a",
    "run_part_b",
    "select_cases",
    "to_json",
    "validate",
]
