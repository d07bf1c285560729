"""Part B timings, run INSIDE a child process (see part_b): one function per (backend, problem).

Each returns {"status", "ms", "detail"}. Inputs are built before the clock starts. Every result is
checked with the one comparison helper against a float64 reference first: a native kernel that
disagrees is reported as "mismatch" (our bug) and not timed.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from tinytorch.milestone07.cases import ELEMENTWISE_TOL, GEMM_TOL
from tinytorch.milestone07.compare import compare
from tinytorch.milestone07.references import ref_gelu

SLOW_S = 2.0  # a first call slower than this is timed once, not `repeats` times
BUDGET_S = 0.1  # keep sampling a fast kernel up to this long (at most MAX_SAMPLES calls)
MAX_SAMPLES = 25
CHECKED_ROWS = 64  # rows of a big GEMM checked against float64 (a full float64 GEMM costs more)


@cache
def gemm_problem(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, checked row indices, float64 reference of those rows) for an n x n x n GEMM."""
    rng = np.random.default_rng([7, n])
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    rows = np.unique(np.r_[0, n - 1, rng.integers(0, n, CHECKED_ROWS)])  # both edges + a sample
    return a, b, rows, a[rows].astype(np.float64) @ b.astype(np.float64)


@cache
def gelu_problem(m: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, bias, float64 reference gelu(x + bias)) for an m x n bias+GELU."""
    rng = np.random.default_rng([11, m, n])
    x = (2.0 * rng.standard_normal((m, n))).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    return x, bias, ref_gelu(x.astype(np.float64) + bias)


def _timed(
    fn: Callable[[], Any],
    repeats: int,
    ref: np.ndarray,
    tol: tuple,
    native: bool,
    rows: np.ndarray | None = None,
) -> dict:
    """Check once (that call is the warm-up), then time at least `repeats` calls: median ms.

    A fast kernel is sampled for up to BUDGET_S, so that a few scheduler stalls on a shared
    machine do not become the median; the best time is reported too.
    """
    start = time.perf_counter()
    out = np.asarray(fn())
    first = time.perf_counter() - start
    if rows is not None and out.ndim == 2 and out.shape[0] > int(rows.max()):
        out = out[rows]
    got = compare(out, ref, rtol=tol[0], atol=tol[1])
    if not got.ok:
        if native:
            why = f"disagrees with NumPy: {got.detail}. A bug in the bundled kernel, not credited"
            return {"status": "mismatch", "ms": None, "detail": why}
        return {"status": "wrong", "ms": first * 1e3, "detail": f"wrong result: {got.detail}"}
    samples = [first] if first > SLOW_S else []
    began = time.perf_counter()
    while not samples or (
        len(samples) < MAX_SAMPLES
        and (len(samples) < repeats or time.perf_counter() - began < BUDGET_S)
    ):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return {
        "status": "ok",
        "ms": statistics.median(samples) * 1e3,
        "min_ms": min(samples) * 1e3,
        "samples": len(samples),
        "detail": "",
    }


def _unavailable(why: str) -> dict:
    return {"status": "unavailable", "ms": None, "detail": why}


# ---- the student's child (student, NumPy) and the native child (C++ SIMD, torch never imported) ---
def student_gemm(module: Any, *, n: int, repeats: int, tile_size: int = 64) -> dict:
    from tinytorch.core.tensor import Tensor

    if module is None or not callable(getattr(module, "tiled_matmul", None)):
        return _unavailable("tiled_matmul not loaded")
    a, b, rows, ref = gemm_problem(n)
    ta, tb = Tensor(a), Tensor(b)
    res = _timed(
        lambda: module.tiled_matmul(ta, tb, tile_size=tile_size).data,
        repeats,
        ref,
        GEMM_TOL,
        False,
        rows,
    )
    res["detail"] = res["detail"] or f"your tiled_matmul, tile_size={tile_size}"
    return res


def student_bias_gelu(module: Any, *, m: int, n: int, repeats: int) -> dict:
    from tinytorch.core.tensor import Tensor

    if module is None or not callable(getattr(module, "fused_gelu", None)):
        return _unavailable("fused_gelu not loaded")
    x, bias, ref = gelu_problem(m, n)
    tx = Tensor(x + bias)  # the bias add is done up front: the student's kernel is GELU only
    res = _timed(lambda: module.fused_gelu(tx).data, repeats, ref, ELEMENTWISE_TOL, False)
    res["detail"] = res["detail"] or "your fused_gelu on x + bias (the add not timed)"
    return res


def numpy_gemm(module: Any, *, n: int, repeats: int) -> dict:
    a, b, rows, ref = gemm_problem(n)
    return _timed(lambda: a @ b, repeats, ref, GEMM_TOL, False, rows) | {
        "detail": "np.matmul (BLAS)"
    }


def numpy_bias_gelu(module: Any, *, m: int, n: int, repeats: int) -> dict:
    x, bias, ref = gelu_problem(m, n)
    k, kc = np.float32(np.sqrt(2.0 / np.pi)), np.float32(np.sqrt(2.0 / np.pi) * 0.044715)

    def run() -> np.ndarray:
        y = x + bias  # (M, N) the only allocation besides u
        u = y * y
        u *= kc
        u += k
        u *= y  # sqrt(2/pi) (y + 0.044715 y^3)
        np.tanh(u, out=u)
        u += 1.0
        u *= 0.5
        u *= y
        return u

    return _timed(run, repeats, ref, ELEMENTWISE_TOL, False) | {"detail": "in-place ufuncs, tanh"}


def simd_status(module: Any) -> dict:
    try:
        from tinytorch.extensions import simd
    except ImportError as exc:
        return {"name": "c++ simd", "available": False, "reason": f"not importable: {exc}"}
    try:
        ok, reason = simd.available()
        info = dict(simd.build_info()) if hasattr(simd, "build_info") else {}
    except Exception as exc:  # noqa: BLE001 (report any build failure as a reason)
        return {"name": "c++ simd", "available": False, "reason": f"{type(exc).__name__}: {exc}"}
    if ok and info.get("built"):
        omp = "OpenMP" if info.get("openmp") else "no OpenMP (1 thread)"
        compiler = info.get("compiler_version") or info.get("compiler") or "?"
        reason = f"built: {info.get('isa')}, {omp}, {info.get('threads')} threads, {compiler}"
    elif not ok:
        reason = f"not built: {reason}"
    return {"name": "c++ simd", "available": bool(ok), "reason": str(reason), "build": info}


def _simd_detail(simd: Any) -> str:
    info = simd.build_info() if hasattr(simd, "build_info") else {}
    omp = "OpenMP" if info.get("openmp") else "no OpenMP"
    return f"{info.get('isa', '?')}, {omp}, {info.get('threads', '?')} threads"


def _simd() -> tuple[Any, str]:
    try:
        from tinytorch.extensions import simd
    except ImportError as exc:
        return None, f"tinytorch.extensions.simd not importable: {exc}"
    ok, reason = simd.available()
    return (simd, "") if ok else (None, f"not built: {reason}")


def simd_gemm(module: Any, *, n: int, repeats: int) -> dict:
    simd, why = _simd()
    if simd is None:
        return _unavailable(why)
    a, b, rows, ref = gemm_problem(n)
    res = _timed(lambda: simd.matmul(a, b), repeats, ref, GEMM_TOL, True, rows)
    return res | {"detail": res["detail"] or _simd_detail(simd)}


def simd_bias_gelu(module: Any, *, m: int, n: int, repeats: int) -> dict:
    simd, why = _simd()
    if simd is None:
        return _unavailable(why)
    x, bias, ref = gelu_problem(m, n)
    res = _timed(lambda: simd.fused_bias_gelu(x, bias), repeats, ref, ELEMENTWISE_TOL, True)
    return res | {"detail": res["detail"] or _simd_detail(simd)}


# ---- the torch child: torch, MPS and Triton (torch's libgomp would skew the C++ timings) ---------
def _torch() -> tuple[Any, str]:
    try:
        import torch
    except ImportError as exc:
        return None, f"torch not installed ({exc}); pip install torch"
    return torch, ""


def torch_gemm(module: Any, *, n: int, repeats: int) -> dict:
    torch, why = _torch()
    if torch is None:
        return _unavailable(why)
    a, b, rows, ref = gemm_problem(n)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    res = _timed(lambda: (ta @ tb).numpy(), repeats, ref, GEMM_TOL, False, rows)
    return res | {
        "detail": res["detail"] or f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    }


def torch_bias_gelu(module: Any, *, m: int, n: int, repeats: int) -> dict:
    torch, why = _torch()
    if torch is None:
        return _unavailable(why)
    x, bias, ref = gelu_problem(m, n)
    tx, tb = torch.from_numpy(x), torch.from_numpy(bias)
    gelu = torch.nn.functional.gelu
    res = _timed(
        lambda: gelu(tx + tb, approximate="tanh").numpy(), repeats, ref, ELEMENTWISE_TOL, False
    )
    return res | {"detail": res["detail"] or "F.gelu(x + bias, approximate='tanh')"}


def _backend(name: str) -> tuple[Any, str]:
    import importlib

    try:
        mod = importlib.import_module(f"tinytorch.extensions.{name}")
    except ImportError as exc:
        return None, f"tinytorch.extensions.{name} not importable: {exc}"
    try:
        ok, reason = mod.available()
    except Exception as exc:  # noqa: BLE001 (a probe that fails is a reason, not a crash)
        return None, f"available() raised {type(exc).__name__}: {exc}"
    return (mod, str(reason)) if ok else (None, str(reason))


def accel_status(module: Any) -> list[dict]:
    rows = []
    torch, why = _torch()
    rows.append(
        {
            "name": "torch-cpu",
            "available": torch is not None,
            "reason": why or f"torch {torch.__version__}",
        }
    )
    for name, label in (("mps", "mps"), ("triton_kernels", "triton")):
        mod, reason = _backend(name)
        rows.append({"name": label, "available": mod is not None, "reason": reason})
    return rows


def mps_gemm(module: Any, *, n: int, repeats: int) -> dict:
    mps, why = _backend("mps")
    if mps is None:
        return _unavailable(why)
    a, b, rows, ref = gemm_problem(n)
    res = _timed(lambda: np.asarray(mps.matmul(a, b)), repeats, ref, GEMM_TOL, True, rows)
    return res | {"detail": res["detail"] or f"torch on 'mps' ({why})"}


def triton_bias_gelu(module: Any, *, m: int, n: int, repeats: int) -> dict:
    triton, why = _backend("triton_kernels")
    if triton is None:
        return _unavailable(why)
    x, bias, ref = gelu_problem(m, n)
    res = _timed(
        lambda: np.asarray(triton.fused_bias_gelu(x, bias)), repeats, ref, ELEMENTWISE_TOL, True
    )
    return res | {"detail": res["detail"] or f"@triton.jit kernel ({why}), includes host copies"}
