"""Part A, the pass gate: the 30 registry cases and the deeper checks, against the student's module."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from tinytorch.milestone07.calls import StudentCalls, failure_text
from tinytorch.milestone07.cases import FUNCTIONS, GEMM_TOL, LESSONS, Case, select_cases
from tinytorch.milestone07.checks import run_checks
from tinytorch.milestone07.compare import compare
from tinytorch.milestone07.diagnose import failure_lesson, lesson_for
from tinytorch.milestone07.evidence import case_evidence
from tinytorch.milestone07.impl import DEFAULT_IMPL, describe
from tinytorch.milestone07.references import make_call, reference
from tinytorch.milestone07.results import CaseResult, CheckResult, PartAResult
from tinytorch.milestone07.sandbox import Sandbox

TODO = {
    "tiled_matmul": "tiled_matmul(a, b, tile_size=64): a blocked C = A @ B covering ragged tiles",
    "fused_gelu": "fused_gelu(x): the tanh-approximation GELU in float32",
    "im2col": "im2col(x, kernel_size, stride=1, padding=0): windows as rows of (N*oh*ow, C*k*k)",
    "im2col_conv2d": "im2col_conv2d(x, weight, bias=None, stride=1, padding=0): conv as one GEMM",
    "col2im": "col2im(cols, x_shape, kernel_size, stride=1, padding=0): the scatter-add adjoint",
}

# Tiny valid calls that tell a stub (raise NotImplementedError) from a written function.
_PROBES: dict[str, tuple[list[Any], dict[str, Any]]] = {
    "tiled_matmul": ([np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)], {"tile_size": 2}),
    "fused_gelu": ([np.ones(3, np.float32)], {}),
    "im2col": ([np.ones((1, 1, 3, 3), np.float32), 2], {}),
    "im2col_conv2d": (
        [np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 2, 2), np.float32), None],
        {},
    ),
    "col2im": ([np.ones((4, 4), np.float32), (1, 1, 3, 3), 2], {}),
}


def grade_case(
    case: Case,
    reply: dict[str, Any],
    args: list[Any],
    kwargs: dict[str, Any],
    *,
    evidence: bool = True,
) -> CaseResult:
    """Turn one sandbox reply into a CaseResult: compare with the float64 reference, name the lesson.

    evidence=True also keeps, for a wrong answer, the small data that draws where it is wrong.
    """
    seconds = float(reply.get("seconds", 0.0))
    blame = [case.group]

    def result(status: str, err: float | None, where: Any, detail: str, lesson: str) -> CaseResult:
        lesson = "" if status == "pass" else lesson
        return CaseResult(
            case.name, case.group, case.title, status, err, where, detail, lesson, seconds,
            [] if status == "pass" else blame,
        )  # fmt: skip

    if reply["status"] != "ok":
        status, detail = failure_text(reply)
        return result(status, None, None, detail, failure_lesson(reply, case.lesson))
    out = reply["output"]
    ref = reference(case, args, kwargs)
    got = compare(out, ref, rtol=case.rtol, atol=case.atol)
    if got.ok:
        return result("pass", got.max_error, got.where, got.detail, "")
    lesson = case.lesson
    if got.reason in ("tolerance", "shape", "nonfinite") and out.dtype.kind == "f":
        lesson = lesson_for(case, args, kwargs, out)
    failed = result("fail", got.max_error, got.where, got.detail, lesson)
    if evidence:
        try:
            failed.evidence = case_evidence(case, args, kwargs, out, ref)
        except (ValueError, IndexError, FloatingPointError, np.linalg.LinAlgError):
            pass  # a drawing is a bonus, never a crash
    return failed


def _all_cases(
    selected: Sequence[Case], status: str, detail: str, lesson: str = ""
) -> list[CaseResult]:
    return [
        CaseResult(c.name, c.group, c.title, status, None, None, detail, lesson, 0.0, [c.group])
        for c in selected
    ]


def verdict_of(cases: list[CaseResult], checks: list[CheckResult], missing: list[str]) -> str:
    """INCOMPLETE if anything is unwritten; PASS only if every case and every check holds."""
    if missing:
        return "INCOMPLETE"
    if all(c.status == "pass" for c in cases) and all(c.ok for c in checks):
        return "PASS"
    return "NOT_PASSED"


def run_part_a(
    impl: str = DEFAULT_IMPL,
    *,
    seed: int = 0,
    timeout: float = 5.0,
    cases: Sequence[str] | None = None,
    checks: bool = True,
) -> PartAResult:
    """Grade `impl` (a module name or a .py path). Never raises for student misbehaviour."""
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"run_part_a: timeout must be a number of seconds > 0, got {timeout!r}")
    selected = select_cases(cases)
    start = time.perf_counter()
    with Sandbox(impl) as box:
        info = box.start()
        done = _graded_run(
            box, info, selected, impl, seed=seed, timeout=float(timeout), checks=checks
        )
        done.restarts = box.restarts
    done.seconds = time.perf_counter() - start
    return done


def _graded_run(
    box: Sandbox,
    info: dict[str, Any],
    selected: Sequence[Case],
    impl: str,
    *,
    seed: int,
    timeout: float,
    checks: bool,
) -> PartAResult:
    who = describe(impl)
    status = info.get("status")
    if status in ("not_found", "not_implemented"):
        why = "not found" if status == "not_found" else "raises NotImplementedError on import"
        missing = [f"the module {who} ({why}: {info['error']})"]
        missing += [TODO[f] for f in FUNCTIONS]
        cases = _all_cases(selected, "incomplete", f"module {why}")
        return PartAResult("INCOMPLETE", who, seed, cases, [], missing, 0.0, timeout)
    if status != "ok":
        detail = f"importing {who} failed: {info.get('error', status)}"
        cases = _all_cases(selected, "error", detail, "Fix the module so that it imports.")
        return PartAResult("NOT_PASSED", who, seed, cases, [], [], 0.0, timeout)

    calls = StudentCalls(box, timeout)
    unwritten = {f: f"{f} is {state}" for f, state in info["functions"].items() if state != "ok"}
    for fn in FUNCTIONS:
        if fn not in unwritten:
            args, kwargs = _PROBES[fn]
            calls.call(
                fn,
                [a.copy() if isinstance(a, np.ndarray) else a for a in args],
                kwargs,
                label="probe",
            )
    for fn, msg in calls.seen.not_implemented.items():
        unwritten.setdefault(fn, f"{fn} raises {msg}")

    results = []
    for case in selected:
        if case.group in unwritten:
            results.append(_all_cases([case], "incomplete", unwritten[case.group], "")[0])
            continue
        _fn, args, kwargs = make_call(case, seed)
        reply = calls.call(case.group, args, kwargs, label=case.name)
        results.append(grade_case(case, reply, args, kwargs))
    found = run_checks(calls, seed, set(unwritten)) if checks else []
    for fn, msg in calls.seen.not_implemented.items():  # unwritten for some inputs only
        unwritten.setdefault(fn, f"{fn} raises {msg} on some inputs")
    missing = [f"{TODO[f]} ({unwritten[f]})" for f in FUNCTIONS if f in unwritten]
    verdict = verdict_of(results, found, missing)
    return PartAResult(verdict, who, seed, results, found, missing, 0.0, timeout)


def grid_cases(shapes: Sequence[tuple[int, int, int]], tile_sizes: Sequence[int]) -> list[Case]:
    """One tiled_matmul case per (M, K, N) x tile_size, shape-major (the notebook heatmap's grid)."""
    return [
        Case(
            name=f"grid/{m}x{k}x{n}/tile{t}",
            group="tiled_matmul",
            title=f"{m}x{k} @ {k}x{n}, tile {t}",
            lesson=LESSONS["ragged"],
            params={"m": int(m), "k": int(k), "n": int(n), "tile_size": int(t)},
            rtol=GEMM_TOL[0],
            atol=GEMM_TOL[1],
        )
        for (m, k, n) in shapes
        for t in tile_sizes
    ]


def check_matmul_grid(
    impl: str,
    shapes: Sequence[tuple[int, int, int]],
    tile_sizes: Sequence[int],
    *,
    seed: int = 0,
    timeout: float = 5.0,
) -> list[CaseResult]:
    """tiled_matmul on each (M, K, N) x tile_size, shape-major, in one child (the notebook heatmap)."""
    grid = grid_cases(shapes, tile_sizes)
    with Sandbox(impl) as box:
        info = box.start()
        if info.get("status") != "ok" or info["functions"].get("tiled_matmul") != "ok":
            why = info.get("error") or "tiled_matmul is missing"
            return _all_cases(grid, "incomplete", why)
        calls = StudentCalls(box, timeout)
        out = []
        for case in grid:
            _fn, args, kwargs = make_call(case, seed)
            out.append(
                grade_case(
                    case,
                    calls.call("tiled_matmul", args, kwargs, label=case.name),
                    args,
                    kwargs,
                    evidence=False,  # the heatmap reads only status and max_error
                )
            )
        return out
