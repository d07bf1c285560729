"""Part B, context and never the verdict: the same GEMM and bias+GELU on the student's kernels,
NumPy, torch and the bundled native kernels.

Three child processes, so that no thread pool disturbs another's timings:
  - the student's module and NumPy (OpenBLAS with its usual threads);
  - the C++ SIMD library, without torch (torch's bundled libgomp can cost it its OpenMP scaling);
  - torch, MPS and Triton.
In the last two OpenBLAS runs on one thread: it only computes the float64 check there, and its
threads would otherwise spin beside the kernels being timed.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from tinytorch.milestone07.impl import DEFAULT_IMPL
from tinytorch.milestone07.results import BenchRow, PartAResult, PartBResult
from tinytorch.milestone07.sandbox import Sandbox

TASKS = "tinytorch.milestone07.bench_tasks"
SIZES = {
    # ([(GEMM n for n x n x n, min repeats)], [((bias+GELU M, N), min repeats)])
    "default": ([(256, 5), (1024, 3)], [((512, 1024), 5), ((2048, 2048), 3)]),
    "quick": ([(256, 3)], [((512, 1024), 3)]),
}
QUIET_BLAS = {"OPENBLAS_NUM_THREADS": "1"}
CHILDREN = (  # (load the student's module?, extra env, status task, (backend, task prefix) ...)
    (True, {}, None, (("student", "student"), ("numpy", "numpy"))),
    (False, QUIET_BLAS, "simd_status", (("c++ simd", "simd"),)),
    (
        False,
        QUIET_BLAS,
        "accel_status",
        (("torch-cpu", "torch"), ("mps", "mps"), ("triton", "triton")),
    ),
)
GEMM_BACKENDS = ("student", "numpy", "torch-cpu", "c++ simd", "mps")
GELU_BACKENDS = ("student", "numpy", "torch-cpu", "c++ simd", "triton")
STUDENT_FN = {"gemm": "tiled_matmul", "bias_gelu": "fused_gelu"}


def _row(problem: str, kind: str, backend: str, reply: dict[str, Any], work: float) -> BenchRow:
    """work: FLOPs (GEMM) or bytes moved (bias+GELU) per call."""
    if reply["status"] != "ok":  # the task raised, hung or crashed
        status = "timeout" if reply["status"] == "timeout" else "error"
        return BenchRow(problem, kind, backend, status, None, None, None, reply.get("error", ""))
    value = reply["value"]
    ms = value.get("ms")
    rate = work / (ms * 1e-3) / 1e9 if ms and value["status"] in ("ok", "wrong") else None
    return BenchRow(
        problem,
        kind,
        backend,
        value["status"],
        ms,
        rate if kind == "gemm" else None,
        rate if kind == "bias_gelu" else None,
        value.get("detail", ""),
        value.get("min_ms"),
        int(value.get("samples", 0)),
    )


def _task(box: Sandbox, name: str, timeout: float, **kwargs: Any) -> dict[str, Any]:
    return box.request({"task": f"{TASKS}:{name}", "kwargs": kwargs}, timeout)


def _skipped(fn: str) -> dict[str, Any]:
    why = f"not timed: your {fn} did not finish in Part A"
    return {"status": "ok", "value": {"status": "unavailable", "ms": None, "detail": why}}


def _open(impl: str | None, env: dict[str, str]) -> Sandbox:
    """A started child; without the student's module if importing it kills the interpreter."""
    box = Sandbox(impl, env)
    if box.start().get("status") in ("import_crash", "import_timeout"):
        box.close()
        box = Sandbox(None, env)
        box.start()
    return box


def _problems(sizes: str) -> list[tuple[str, str, dict[str, int], float]]:
    """(problem, kind, task kwargs, work per call) in display order."""
    gemms, gelus = SIZES[sizes]
    out = []
    for n, reps in gemms:  # 2 n^3 FLOPs
        out.append((f"gemm {n}x{n}x{n}", "gemm", {"n": n, "repeats": reps}, 2.0 * n**3))
    for (m, n), reps in gelus:  # read x (4MN) and bias (4N), write y (4MN) bytes
        kwargs = {"m": m, "n": n, "repeats": reps}
        out.append((f"bias+gelu {m}x{n}", "bias_gelu", kwargs, 4.0 * (2 * m * n + n)))
    return out


def run_part_b(
    impl: str = DEFAULT_IMPL,
    *,
    sizes: str = "default",
    timeout: float = 60.0,
    skip_student: Collection[str] = (),
    part_a: PartAResult | None = None,
) -> PartBResult:
    """Time every backend on the GEMM and bias+GELU problems; unavailable backends say why.

    skip_student: student functions not to time. part_a: the gate's result for this impl; the
    functions that hung, crashed or are unwritten there are skipped, and the per-task timeout
    scales with the gate's per-case one (a student kernel may be slow, but not unboundedly).
    """
    if part_a is not None:
        skip_student = set(skip_student) | part_a.stalled()
        timeout = max(30.0, 6 * part_a.timeout)
    if sizes not in SIZES:
        raise ValueError(f"run_part_b: sizes must be one of {sorted(SIZES)}, got {sizes!r}")
    start = time.perf_counter()
    problems = _problems(sizes)
    replies: dict[tuple[str, str], dict[str, Any]] = {}
    backends: list[dict[str, Any]] = []
    for with_student, env, status_task, group in CHILDREN:
        box = _open(impl if with_student else None, env)
        try:
            if status_task:
                status = _task(box, status_task, timeout)
                value = status.get("value") if status["status"] == "ok" else None
                backends += value if isinstance(value, list) else [value] if value else []
            for backend, prefix in group:
                for problem, kind, kwargs, _work in problems:
                    if backend not in (GEMM_BACKENDS if kind == "gemm" else GELU_BACKENDS):
                        continue
                    if backend == "student" and STUDENT_FN[kind] in skip_student:
                        replies[(backend, problem)] = _skipped(STUDENT_FN[kind])
                        continue
                    task = f"{prefix}_gemm" if kind == "gemm" else f"{prefix}_bias_gelu"
                    replies[(backend, problem)] = _task(box, task, timeout, **kwargs)
        finally:
            box.close()
    rows = [
        _row(problem, kind, backend, replies[(backend, problem)], work)
        for problem, kind, _kwargs, work in problems
        for backend in (GEMM_BACKENDS if kind == "gemm" else GELU_BACKENDS)
    ]
    return PartBResult(rows, backends, time.perf_counter() - start)
