"""Result types: what Part A and Part B produce, and what the renderers and JSON read."""

from __future__ import annotations

from dataclasses import dataclass, field

VERDICTS = ("PASS", "NOT_PASSED", "INCOMPLETE")
CASE_STATUSES = ("pass", "fail", "error", "timeout", "crash", "incomplete")
CHECK_STATUSES = (
    "pass", "fail", "not_observed", "not_run", "error", "timeout", "crash", "incomplete",
)  # fmt: skip
BENCH_STATUSES = ("ok", "unavailable", "mismatch", "wrong", "error", "timeout")


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

    @property
    def ok(self) -> bool:
        """Holds, or could not be observed: not_observed is reported but does not fail the gate."""
        return self.status in ("pass", "not_observed")


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

    def passed(self) -> int:
        """Number of gate cases passed."""
        return sum(c.status == "pass" for c in self.cases)

    def failing(self) -> list[CaseResult]:
        return [c for c in self.cases if c.status != "pass"]

    def failing_checks(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.ok]

    def stalled(self) -> set[str]:
        """Groups with a case that hung, crashed or is unwritten: Part B does not time them."""
        return {c.group for c in self.cases if c.status in ("timeout", "crash", "incomplete")}

    def blamed(self) -> set[str]:
        """Every student function some failing case or check points at."""
        return {f for r in [*self.failing(), *self.failing_checks()] for f in r.blame}


@dataclass
class BenchRow:
    """One timed (or unavailable) backend on one problem."""

    problem: str
    kind: str  # "gemm" | "bias_gelu"
    backend: str  # "student" | "numpy" | "torch-cpu" | "c++ simd" | "mps" | "triton"
    status: str
    ms: float | None
    gflops: float | None
    gbps: float | None
    detail: str
    min_ms: float | None = None  # the best sample (ms is the median)
    samples: int = 0


@dataclass
class PartBResult:
    """Context, never the verdict: timings beside the bundled native kernels."""

    rows: list[BenchRow]
    backends: list[dict]
    seconds: float
