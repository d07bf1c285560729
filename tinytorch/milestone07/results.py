"""Result types: what Part A and Part B produce, and what the renderers and JSON read."""

from __future__ import annotations

from dataclasses import dataclass, field

VERDICTS = ("PASS", "NOT_PASSED", "INCOMPLETE", "ERROR")  # ERROR: the grader itself failed
CASE_STATUSES = ("pass", "fail", "error", "timeout", "crash", "protocol", "incomplete")
CHECK_STATUSES = (
    "pass",
    "fail",
    "not_observed",
    "error",
    "timeout",
    "crash",
    "protocol",
    "incomplete",
    "not_run",
)
BENCH_STATUSES = ("ok", "unavailable", "mismatch", "wrong", "error", "timeout")
EXIT_PASS, EXIT_NOT_PASSED, EXIT_USAGE, EXIT_ERROR = 0, 1, 2, 3


def exit_code(verdict: str) -> int:
    """The exit status of a verdict: the one mapping, so the code and the result file agree (and
    whoever runs the milestone checks that they do: tinytorch.classroom.runner). Here, below the
    CLI and the class runner, so both import it downwards."""
    codes = {"PASS": EXIT_PASS, "NOT_PASSED": EXIT_NOT_PASSED, "INCOMPLETE": EXIT_NOT_PASSED}
    return codes.get(verdict, EXIT_ERROR)


@dataclass
class CaseResult:
    """One gate case's outcome; `blame` names the student function(s) a failure points at."""

    name: str
    group: str
    title: str
    status: str
    max_error: float | None
    where: list[int] | None
    detail: str
    lesson: str
    seconds: float
    blame: list[str] = field(default_factory=list)
    evidence: dict | None = None  # where it is wrong, for drawing (milestone07/evidence.py)


@dataclass
class CheckResult:
    """A deeper check (tiling audit, im2col layout, col2im coverage, no mutation, dtype/finite)."""

    name: str
    status: str
    detail: str
    lesson: str
    blame: list[str] = field(default_factory=list)
    evidence: dict | None = None  # where it is wrong, for drawing (milestone07/evidence.py)
    names_cause: bool = True  # False: it saw a failure but named no cause (a generic lesson)

    @property
    def ok(self) -> bool:
        """Holds. "not_observed" fails: what the audit could not see, it cannot vouch for."""
        return self.status == "pass"


@dataclass
class PartAResult:
    """The pass gate: the verdict, every case and every deeper check."""

    verdict: str
    impl: str
    seed: int
    cases: list[CaseResult]
    checks: list[CheckResult]
    missing: list[str]
    seconds: float
    timeout: float = 5.0
    restarts: int = 0  # child processes restarted after a timeout or crash
    hidden: list[CaseResult] = field(default_factory=list)  # grading mode: the "hidden/..." cases
    grading: bool = False  # grading mode: a secret seed and hidden cases
    isolation: dict = field(default_factory=dict)  # the Sandbox's layers: {layer: {active, why}}
    warnings: list[str] = field(default_factory=list)  # reported, never the verdict
    error: str | None = None  # verdict ERROR: what broke in the grader itself
    load_error: str | None = None  # the module did not import: why (every case carries it too)

    def passed(self) -> int:
        """Number of gate cases passed."""
        return sum(c.status == "pass" for c in self.cases)

    def failing(self) -> list[CaseResult]:
        return [c for c in self.cases if c.status != "pass"]

    def failing_checks(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.ok]

    def stalled(self) -> set[str]:
        """Groups with a case that hung, crashed, broke the protocol or is unwritten: Part B does
        not time them."""
        every = [*self.cases, *self.hidden]
        stalled = ("timeout", "crash", "protocol", "incomplete")
        return {c.group for c in every if c.status in stalled}

    def blamed(self) -> set[str]:
        """Every student function some failing case or check points at."""
        hidden = [c for c in self.hidden if c.status != "pass"]
        return {f for r in [*self.failing(), *hidden, *self.failing_checks()] for f in r.blame}


@dataclass
class BenchRow:
    """One timed (or unavailable) backend on one problem."""

    problem: str
    kind: str  # "gemm" | "bias_gelu" | "gelu"
    backend: str  # "student" | "numpy" | "torch-cpu" | "c++ simd" | "mps" | "triton"
    status: str
    ms: float | None
    gflops: float | None
    gbps: float | None
    detail: str
    min_ms: float | None = None  # the best sample (ms is the median)
    samples: int = 0
    flags: list[str] = field(default_factory=list)  # "noisy" | "not_credible" | "incorrect"
    spread: float | None = None  # (q3 - q1) / median of the samples
    load: float | None = None  # cores other processes kept busy while this row was timed
    flops: float | None = None  # work of one call, from tinytorch.profiling's problem
    bytes: float | None = None  # compulsory traffic of one call
    pass_ms: float | None = None  # one pass over the array (a copy), timed between its samples


@dataclass
class PartBResult:
    """Context, never the verdict: timings beside the bundled native kernels."""

    rows: list[BenchRow]
    backends: list[dict]
    seconds: float
    warnings: list[str] = field(default_factory=list)  # e.g. the machine was busy: rerun
    ceilings: dict | None = None  # tinytorch.profiling.Ceilings.to_dict(), measured in Part B
