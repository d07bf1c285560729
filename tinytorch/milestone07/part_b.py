"""Part B, context and never the verdict: the same GEMM and bias+GELU on the student's kernels,
NumPy, torch and the bundled native kernels.

Two child processes: the first (student, NumPy, C++ SIMD) never imports torch, because torch's
bundled libgomp can cost the C++ library its OpenMP scaling in the same process; the second runs
torch, MPS and Triton.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from tinytorch.milestone07.impl import DEFAULT_IMPL
from tinytorch.milestone07.results import BenchRow, PartBResult
from tinytorch.milestone07.sandbox import Sandbox

TASKS = "tinytorch.milestone07.bench_tasks"
SIZES = {
    # (GEMM n for n x n x n, repeats), ((bias+GELU M, N), repeats)
    "default": ([(256, 5), (1024, 3)], [((512, 1024), 5), ((2048, 2048), 3)]),
    "quick": ([(256, 3)], [((512, 1024), 3)]),
}
CHILD_1 = (("student", "student"), ("numpy", "numpy"), ("c++ simd", "simd"))
CHILD_2 = (("torch-cpu", "torch"), ("mps", "mps"), ("triton", "triton"))
GEMM_BACKENDS = ("student", "numpy", "torch-cpu", "c++ simd", "mps")
GELU_BACKENDS = ("student", "numpy", "torch-cpu", "c++ simd", "triton")


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
    )


def _task(box: Sandbox, name: str, timeout: float, **kwargs: Any) -> dict[str, Any]:
    return box.request({"task": f"{TASKS}:{name}", "kwargs": kwargs}, timeout)


def _skipped(fn: str) -> dict[str, Any]:
    why = f"not timed: your {fn} did not finish in Part A"
    return {"status": "ok", "value": {"status": "unavailable", "ms": None, "detail": why}}


def _open(impl: str | None) -> Sandbox:
    """A started child; without the student's module if importing it kills the interpreter."""
    box = Sandbox(impl)
    if box.start().get("status") in ("import_crash", "import_timeout"):
        box.close()
        box = Sandbox(None)
        box.start()
    return box


def run_part_b(
    impl: str = DEFAULT_IMPL,
    *,
    sizes: str = "default",
    timeout: float = 60.0,
    skip_student: Collection[str] = (),
) -> PartBResult:
    """Time every backend on the GEMM and bias+GELU problems; unavailable backends say why.

    skip_student: student functions not to time (e.g. those that hung or crashed in Part A).
    """
    if sizes not in SIZES:
        raise ValueError(f"run_part_b: sizes must be one of {sorted(SIZES)}, got {sizes!r}")
    start = time.perf_counter()
    gemms, gelus = SIZES[sizes]
    replies: dict[tuple[str, str], dict[str, Any]] = {}
    backends: list[dict[str, Any]] = []
    for impl_or_none, group in ((impl, CHILD_1), (None, CHILD_2)):
        box = _open(impl_or_none)
        try:
            if impl_or_none is None:
                status = _task(box, "accel_status", timeout)
                backends += status.get("value", []) if status["status"] == "ok" else []
            else:
                status = _task(box, "simd_status", timeout)
                if status["status"] == "ok":
                    backends.append(status["value"])
            for backend, prefix in group:
                for n, reps in gemms:
                    if backend in GEMM_BACKENDS:
                        key = (backend, f"gemm {n}x{n}x{n}")
                        replies[key] = (
                            _skipped("tiled_matmul")
                            if backend == "student" and "tiled_matmul" in skip_student
                            else _task(box, f"{prefix}_gemm", timeout, n=n, repeats=reps)
                        )
                for (m, n), reps in gelus:
                    if backend in GELU_BACKENDS:
                        name = "gelu" if prefix == "student" else "bias_gelu"
                        key = (backend, f"bias+gelu {m}x{n}")
                        replies[key] = (
                            _skipped("fused_gelu")
                            if backend == "student" and "fused_gelu" in skip_student
                            else _task(box, f"{prefix}_{name}", timeout, m=m, n=n, repeats=reps)
                        )
        finally:
            box.close()
    rows = []
    for n, _ in gemms:  # 2 n^3 FLOPs
        problem = f"gemm {n}x{n}x{n}"
        for backend in GEMM_BACKENDS:
            rows.append(_row(problem, "gemm", backend, replies[(backend, problem)], 2.0 * n**3))
    for (m, n), _ in gelus:  # read x (4MN) and bias (4N), write y (4MN) bytes
        problem = f"bias+gelu {m}x{n}"
        for backend in GELU_BACKENDS:
            work = 4.0 * (2 * m * n + n)
            rows.append(_row(problem, "bias_gelu", backend, replies[(backend, problem)], work))
    return PartBResult(rows, backends, time.perf_counter() - start)
