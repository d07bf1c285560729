"""Part A, the pass gate: the 30 registry cases and the deeper checks, against the student's module."""

from __future__ import annotations

import os
import secrets
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tinytorch.compare import compare
from tinytorch.milestone07.boundary import open_sandbox
from tinytorch.milestone07.calls import StudentCalls, failure_text
from tinytorch.milestone07.cases import (
    CONV_FUNCTION,
    DEFAULT_IMPL,
    FUNCTIONS,
    GEMM_TOL,
    LESSONS,
    Case,
    hidden_cases,
    select_cases,
)
from tinytorch.milestone07.checks import audit_call, audit_inputs, run_checks
from tinytorch.milestone07.diagnose import failure_lesson, lesson_for
from tinytorch.milestone07.evidence import case_evidence
from tinytorch.milestone07.own_work import own_work_check, reference_use
from tinytorch.milestone07.references import make_call, reference
from tinytorch.milestone07.results import CaseResult, CheckResult, PartAResult
from tinytorch.sandbox.child.load import describe
from tinytorch.sandbox.parent import Sandbox

TODO = {
    "tiled_matmul": "tiled_matmul(a, b, tile_size=64): a blocked C = A @ B covering ragged tiles",
    "fused_gelu": "fused_gelu(x): the tanh-approximation GELU in float32",
    "im2col": "im2col(x, kernel_size, stride=1, padding=0): windows as rows of (N*oh*ow, C*k*k)",
    "im2col_conv2d": "im2col_conv2d(x, weight, bias=None, stride=1, padding=0): conv as one GEMM",
    "col2im": "col2im(cols, x_shape, kernel_size, stride=1, padding=0): the scatter-add adjoint",
    CONV_FUNCTION: (
        "class Im2colConv2dFunction(Function): forward and backward of the convolution, the "
        "differentiable path graded by the backward check (apply(x, weight, bias, stride=, "
        "padding=))"
    ),
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


class BudgetedCalls:
    """StudentCalls under a wall-clock budget for the whole run: past it every call is a timeout.

    Each call's limit is the per-case timeout or what is left of the budget, whichever is less,
    so sleeping just under the per-case timeout on every call cannot stretch a run without bound.
    """

    def __init__(self, calls: StudentCalls, budget: float | None, start: float) -> None:
        self.inner = calls
        self.budget = budget
        self.deadline = None if budget is None else start + budget
        self.spent_at: str | None = None  # the label of the first call the budget cut short

    @property
    def seen(self) -> Any:
        return self.inner.seen

    def _why(self) -> str:
        return f"not run: the run's budget of {self.budget:g} s was spent (--budget)"

    def call(self, fn: str, args: list[Any], kwargs: dict[str, Any], **opts: Any) -> dict[str, Any]:
        if self.deadline is None:
            return self.inner.call(fn, args, kwargs, **opts)
        left = self.deadline - time.perf_counter()
        if left <= 0:
            self.spent_at = self.spent_at or str(opts.get("label", fn))
            return {"status": "timeout", "error": self._why(), "skipped": True}
        per_case = self.inner.timeout
        self.inner.timeout = min(per_case, left)
        try:
            reply = self.inner.call(fn, args, kwargs, **opts)
        finally:
            self.inner.timeout = per_case
        if reply.get("status") == "timeout" and left < per_case:
            self.spent_at = self.spent_at or str(opts.get("label", fn))
            reply["error"] = f"cut short: the run's budget of {self.budget:g} s ran out (--budget)"
        return reply


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
    try:
        with open_sandbox(impl, grading=grading, memory_limit=memory_limit) as box:
            info = box.start()
            done = _graded_run(
                box,
                info,
                selected,
                impl,
                seed=seed,
                timeout=float(timeout),
                checks=checks,
                grading=grading,
                budget=BudgetedCalls(StudentCalls(box, float(timeout)), budget, start),
            )
            done.restarts = box.restarts
            done.isolation = dict(getattr(box, "isolation", None) or {})
        if memory_limit is not None and "limits" not in done.isolation:  # recorded, not applied
            why = f"--memory-limit {memory_limit} MB asked for; this Sandbox sets no limits"
            done.isolation["limits"] = {"active": False, "why": why}
    except Exception as exc:  # noqa: BLE001 (a bug of ours: the result says ERROR, never a traceback)
        done = error_result(impl, seed, selected, float(timeout), exc)
    done.grading = bool(grading)
    done.seconds = time.perf_counter() - start
    return done


def error_result(
    impl: str, seed: int, selected: Sequence[Case], timeout: float, exc: BaseException
) -> PartAResult:
    """The result of a run the grader itself broke: verdict ERROR, every case "error", nobody blamed."""
    where = traceback.extract_tb(exc.__traceback__)
    at = f" (at {os.path.basename(where[-1].filename)}:{where[-1].lineno})" if where else ""
    error = f"internal grader error: {type(exc).__name__}: {exc}{at}"
    cases = [
        CaseResult(c.name, c.group, c.title, "error", None, None, error, "", 0.0, [])
        for c in selected
    ]
    return PartAResult("ERROR", describe(impl), seed, cases, [], [], 0.0, timeout, error=error)


def _graded_run(
    box: Sandbox,
    info: dict[str, Any],
    selected: Sequence[Case],
    impl: str,
    *,
    seed: int,
    timeout: float,
    checks: bool,
    grading: bool = False,
    budget: BudgetedCalls | None = None,
) -> PartAResult:
    who = describe(impl)
    status = info.get("status")
    if status in ("not_found", "not_implemented"):
        why = "not found" if status == "not_found" else "raises NotImplementedError on import"
        missing = [f"the module {who} ({why}: {info['error']})"]
        missing += [TODO[f] for f in (*FUNCTIONS, CONV_FUNCTION)]
        cases = _all_cases(selected, "incomplete", f"module {why}")
        return PartAResult("INCOMPLETE", who, seed, cases, [], missing, 0.0, timeout)
    if status != "ok":
        detail = f"importing {who} failed: {info.get('error', status)}"
        # An import that did not finish in time is a timeout (the class grader regrades alone a
        # timeout seen beside other students), not an error of the module's.
        hung = "timeout" if status == "import_timeout" else "error"
        cases = _all_cases(selected, hung, detail, "Fix the module so that it imports.")
        unloaded = PartAResult("NOT_PASSED", who, seed, cases, [], [], 0.0, timeout)
        unloaded.load_error = detail  # one root cause, for the renderers to say once
        return unloaded

    calls = budget or BudgetedCalls(StudentCalls(box, timeout), None, time.perf_counter())
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

    results, hidden, audit_replies = _run_cases(calls, selected, unwritten, seed, grading, checks)
    failing = {c.group for c in results + hidden if c.status not in ("pass", "incomplete")}
    found = (
        run_checks(
            calls, seed, set(unwritten), grading, failing=failing, audit_replies=audit_replies
        )
        if checks
        else []
    )
    found += [own_work_check(info)] if grading else []
    warnings = []
    # Practice on the package's own Module 17 (the student edition's file, or the reference in a
    # full checkout) is not a borrowing: warn only when another file leans on it.
    if not grading and reference_use(info) and impl != DEFAULT_IMPL:
        warnings.append(f"{reference_use(info)} (a grading run would not pass it)")
    if calls.spent_at:
        warnings.append(
            f"budget: the run's {calls.budget:g} s were spent at {calls.spent_at}; "
            "every case and check after it is TIMEOUT"
        )
    for fn, msg in calls.seen.not_implemented.items():  # unwritten for some inputs only
        unwritten.setdefault(fn, f"{fn} raises {msg} on some inputs")
    places = _missing_places(unwritten, stub_of, calls.seen.not_implemented, info)
    missing = [
        f"{TODO[p]} ({why})" if p in TODO else f"{p}(...) ({why})" for p, why in places.items()
    ]
    warnings += [
        f"{place} still raises NotImplementedError; not graded (not a graded function, nor a "
        "method of the Function class your im2col_conv2d uses), so the run is not INCOMPLETE"
        for place in info.get("stubs", [])
        if place not in places
    ]
    verdict = verdict_of(results + hidden, found, missing)
    done = PartAResult(verdict, who, seed, results, found, missing, 0.0, timeout)
    done.hidden, done.warnings = hidden, warnings
    return done


_ORDER_STREAM = 0x4F524452  # "ORDR": grading mode's call order, apart from the data and cases


def _run_cases(
    calls: BudgetedCalls,
    selected: Sequence[Case],
    unwritten: dict[str, str],
    seed: int,
    grading: bool,
    checks: bool,
) -> tuple[list[CaseResult], list[CaseResult], list[dict[str, Any]] | None]:
    """The published cases, the hidden ones (grading) and, when grading, the tiling audit's calls.

    Practice calls them in the published order and leaves the audit to run_checks. Grading calls
    all of them in an order drawn from the secret seed, the audit's calls among the cases, so a
    kernel that counts its calls (right for the cases, another kernel after them) cannot know
    which calls are watched or graded. Returns (cases, hidden, the audit's replies or None).
    """
    hidden_set = list(hidden_cases(seed, {c.group for c in selected})) if grading else []
    todo: list[tuple[str, int, Any]] = [("case", i, c) for i, c in enumerate(selected)]
    todo += [("hidden", i, c) for i, c in enumerate(hidden_set)]
    problems = audit_inputs(seed, grading) if grading and checks else []
    if "tiled_matmul" in unwritten:
        problems = []
    todo += [("audit", i, p) for i, p in enumerate(problems)]
    if grading:
        np.random.default_rng([seed, _ORDER_STREAM]).shuffle(todo)  # type: ignore[arg-type]
    done: dict[tuple[str, int], Any] = {}
    for kind, i, item in todo:
        if kind == "audit":
            done[kind, i] = audit_call(calls, item)
        elif item.group in unwritten:
            done[kind, i] = _all_cases([item], "incomplete", unwritten[item.group], "")[0]
        else:
            _fn, args, kwargs = make_call(item, seed)
            reply = calls.call(item.group, args, kwargs, label=item.name)
            done[kind, i] = grade_case(item, reply, args, kwargs)
    cases = [done["case", i] for i in range(len(selected))]
    hidden = [done["hidden", i] for i in range(len(hidden_set))]
    audit = [done["audit", i] for i in range(len(problems))] if problems else None
    return cases, hidden, audit


def graded_places(info: dict[str, Any]) -> set[str]:
    """The places whose stub makes a run INCOMPLETE: the functions and methods of TODO, and the
    methods of the Function class the student's im2col_conv2d uses (load info "conv_methods")."""
    return set(TODO) | set(info.get("conv_methods", []))


def _missing_places(
    unwritten: dict[str, str],
    stub_of: dict[str, str],
    not_implemented: dict[str, str],
    info: dict[str, Any],
) -> dict[str, str]:
    """{place: why} per unwritten place (`function` or `Class.method`): graded functions first,
    then stubs met at run time (a backward), then the graded places still stubs in the source.
    Any other stub in the source (a student's abstract base, an unused helper) is not listed."""
    places: dict[str, str] = {}
    for f in (*FUNCTIONS, CONV_FUNCTION):
        if f in unwritten:
            places.setdefault(stub_of.get(f, f), unwritten[f])
    graded = graded_places(info)
    stubs = set(info.get("stubs", []))
    for place, msg in not_implemented.items():  # met at run time; source stubs in source order
        if place not in FUNCTIONS and place != CONV_FUNCTION and place not in stubs & graded:
            places.setdefault(place, f"raises {msg}")
    for place in info.get("stubs", []):
        if place in graded:
            places.setdefault(place, "still raises NotImplementedError")
    return places


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
    with open_sandbox(impl) as box:
        info = box.start()
        if info.get("status") != "ok" or info["functions"].get("tiled_matmul") != "ok":
            why = info.get("error") or "tiled_matmul is missing"
            return _all_cases(grid, "incomplete", why)
        calls = StudentCalls(box, timeout)

        def call(case: Case, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
            return calls.call("tiled_matmul", args, kwargs, label=case.name)

        return grade_grid(call, shapes, tile_sizes, seed=seed)


GridCall = Callable[[Case, list[Any], dict[str, Any]], dict[str, Any]]  # -> a sandbox-style reply


def grade_grid(
    call: GridCall,
    shapes: Sequence[tuple[int, int, int]],
    tile_sizes: Sequence[int],
    *,
    seed: int = 0,
) -> list[CaseResult]:
    """Grade tiled_matmul on each (M, K, N) x tile_size case, shape-major, through `call` (the
    sandbox for a student's kernel; in-process for our own example bugs)."""
    out = []
    for case in grid_cases(shapes, tile_sizes):
        _fn, args, kwargs = make_call(case, seed)
        reply = call(case, args, kwargs)
        out.append(grade_case(case, reply, args, kwargs, evidence=False))  # status + error only
    return out
