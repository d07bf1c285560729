"""Part A, the pass gate: the 30 registry cases and the deeper checks, against the student's module."""

from __future__ import annotations

import inspect
import secrets
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from tinytorch.milestone07.calls import StudentCalls, failure_text
from tinytorch.milestone07.cases import FUNCTIONS, GEMM_TOL, LESSONS, Case, select_cases
from tinytorch.milestone07.checks import run_checks
from tinytorch.milestone07.compare import compare
from tinytorch.milestone07.diagnose import lesson_for
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
    # stubbed places besides the five graded names (listed as `function` or `Class.method`)
    "vectorized_matmul": "vectorized_matmul(a, b): batched, broadcast A @ B in one call",
    "unfused_gelu": "unfused_gelu(x): GELU one NumPy operation at a time (the fusion baseline)",
    "Im2colConv2dFunction.forward": (
        "Im2colConv2dFunction.forward(self, x, weight, bias=None): im2col, then one GEMM"
    ),
    "Im2colConv2dFunction.backward": (
        "Im2colConv2dFunction.backward(self, grad_output): grad x (via col2im), grad weight, "
        "grad bias"
    ),
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
    case: Case, reply: dict[str, Any], args: list[Any], kwargs: dict[str, Any]
) -> CaseResult:
    """Turn one sandbox reply into a CaseResult: compare with the float64 reference, name the lesson."""
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
        return result(status, None, None, detail, case.lesson)
    out = reply["output"]
    got = compare(out, reference(case, args, kwargs), rtol=case.rtol, atol=case.atol)
    if got.ok:
        return result("pass", got.max_error, got.where, got.detail, "")
    lesson = case.lesson
    if got.reason in ("tolerance", "shape", "nonfinite") and out.dtype.kind == "f":
        lesson = lesson_for(case, args, kwargs, out)
    return result("fail", got.max_error, got.where, got.detail, lesson)


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


def resolve_seed(seed: int | None, grading: bool) -> int:
    """The data seed: as given; else 0 in practice (reproducible), a fresh secret one when grading."""
    if seed is None:
        return secrets.randbits(63) if grading else 0
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"run_part_a: seed must be an int >= 0 or None, got {seed!r}")
    return seed


def open_sandbox(impl: str, *, grading: bool, memory_limit: int | None) -> Sandbox:
    """A Sandbox in the given mode, with the memory limit (MB) where the Sandbox takes limits."""
    accepts = inspect.signature(Sandbox).parameters
    if "grading" not in accepts:  # a Sandbox before K1's grading/limits: run it as it is
        return Sandbox(impl)
    limits = None if memory_limit is None else {"memory_mb": int(memory_limit)}
    return Sandbox(impl, grading=grading, limits=limits)


def run_part_a(
    impl: str = DEFAULT_IMPL,
    *,
    seed: int | None = None,
    timeout: float = 5.0,
    cases: Sequence[str] | None = None,
    checks: bool = True,
    grading: bool = False,
    budget: float | None = None,
    memory_limit: int | None = None,
) -> PartAResult:
    """Grade `impl` (a module name or a .py path). Never raises for student misbehaviour.

    Practice (grading=False): seed 0 unless given, the published cases only. Grading: a fresh
    secret seed (recorded in the result), hidden cases besides the published ones.
    """
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"run_part_a: timeout must be a number of seconds > 0, got {timeout!r}")
    if budget is not None and not (isinstance(budget, (int, float)) and budget > 0):
        raise ValueError(f"run_part_a: budget must be seconds > 0 or None, got {budget!r}")
    if memory_limit is not None and not (isinstance(memory_limit, int) and memory_limit > 0):
        raise ValueError(f"run_part_a: memory_limit must be MB > 0 or None, got {memory_limit!r}")
    seed = resolve_seed(seed, grading)
    selected = select_cases(cases)
    start = time.perf_counter()
    with open_sandbox(impl, grading=grading, memory_limit=memory_limit) as box:
        info = box.start()
        done = _graded_run(
            box, info, selected, impl, seed=seed, timeout=float(timeout), checks=checks
        )
        done.restarts = box.restarts
        done.isolation = dict(getattr(box, "isolation", None) or {})
    done.grading = bool(grading)
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
    stub_of: dict[str, str] = {}  # graded function -> the stubbed place its probe ran into
    for fn in FUNCTIONS:
        if fn not in unwritten:
            args, kwargs = _PROBES[fn]
            reply = calls.call(
                fn,
                [a.copy() if isinstance(a, np.ndarray) else a for a in args],
                kwargs,
                label="probe",
            )
            if reply["status"] == "not_implemented" and reply.get("stub"):
                stub_of[fn] = reply["stub"]
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
    missing = _missing_places(unwritten, stub_of, calls.seen.not_implemented, info)
    verdict = verdict_of(results, found, missing)
    return PartAResult(verdict, who, seed, results, found, missing, 0.0, timeout)


def _missing_places(
    unwritten: dict[str, str],
    stub_of: dict[str, str],
    not_implemented: dict[str, str],
    info: dict[str, Any],
) -> list[str]:
    """One line per unwritten place (`function` or `Class.method`), each starting with its name:
    graded functions first, then stubs met at run time (a backward), then stubs in the source."""
    places: dict[str, str] = {}
    for f in FUNCTIONS:
        if f in unwritten:
            places.setdefault(stub_of.get(f, f), unwritten[f])
    for place, msg in not_implemented.items():
        if place not in FUNCTIONS:
            places.setdefault(place, f"raises {msg}")
    for place in info.get("stubs", []):
        places.setdefault(place, "still raises NotImplementedError")
    return [f"{TODO[p]} ({why})" if p in TODO else f"{p}(...) ({why})" for p, why in places.items()]


def check_matmul_grid(
    impl: str,
    shapes: Sequence[tuple[int, int, int]],
    tile_sizes: Sequence[int],
    *,
    seed: int = 0,
    timeout: float = 5.0,
) -> list[CaseResult]:
    """tiled_matmul on each (M, K, N) x tile_size, shape-major, in one child (the notebook heatmap)."""
    grid = [
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
                    case, calls.call("tiled_matmul", args, kwargs, label=case.name), args, kwargs
                )
            )
        return out
