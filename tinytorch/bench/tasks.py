"""Part B timings, run INSIDE a child process (see part_b), registered in TASKS.

Each task returns JSON-able data: {"status", "ms", "min_ms", "samples", "spread", "load",
"load_source", "detail"}. The timing policy, the problems and the NumPy baseline come from
tinytorch.profiling (Module 14); nothing here has its own timing loop.

Every result is checked against a float64 reference first: a bundled kernel that disagrees is
"mismatch" (our bug) and not timed. A student kernel is timed on inputs ROTATED among several
buffers whose contents change on every sample, and every sample's output is spot-checked: a
kernel that remembers its last answer, by input identity or otherwise, gets "wrong".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from tinytorch import profiling
from tinytorch.compare import ELEMENTWISE_TOL, GEMM_TOL, compare
from tinytorch.extensions import TORCH_MISSING
from tinytorch.profiling import LoadMeter, Timing, per_call

SLOW_S = 2.0  # a first call slower than this is timed once, not `repeats` times
BUDGET_S = 0.1  # keep sampling a fast kernel up to this long (at most MAX_SAMPLES calls)
MAX_SAMPLES = 25
CHECKED_ROWS = 64  # rows of a big GEMM checked against float64 (a full float64 GEMM costs more)
ROTATE = 3  # input buffers a student kernel is timed on, in turn
SPOT = 2048  # elements of an elementwise output checked on every sample
# Passes over memory of each GELU that Part B times, counted in the code: one per elementwise
# operation (each reads its operands and writes one whole array). The reference's counts
# (tinytorch/perf/acceleration.py) are printed as the reference's, beside the student's rows, never
# as theirs; tests/test_part_b_report.py counts the reference's ufunc calls again.
GELU_PASSES = {
    "unfused_gelu": 9,  # x*x*x (2), *c, +x, *k, tanh, 0.5*x, 1+th, * : each into a new array
    "fused_gelu": 9,  # clip, t*t, *=, +=, *=, exp, 1+e, /=, *=x: in place, into 2 buffers
    "numpy_bias_gelu": 9,  # profiling.numpy_bias_gelu: the add, then 8 in-place ufuncs
    "c++": 1,  # extensions/simd's fused kernel: reads x (and bias) once, writes y once
}


class WrongOutput(Exception):
    """A sample's output disagreed with the float64 reference."""


@cache
def _gemm(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, checked row indices, float64 reference of those rows) for an n x n x n GEMM."""
    a, b = profiling.gemm(n).inputs(seed=7)
    rng = np.random.default_rng([7, n])
    rows = np.unique(np.r_[0, n - 1, rng.integers(0, n, CHECKED_ROWS)])  # both edges + a sample
    return a, b, rows, a[rows].astype(np.float64) @ b.astype(np.float64)


@cache
def _bias_gelu(m: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, bias, float64 gelu(x + bias)) for an m x n bias+GELU."""
    p = profiling.bias_gelu(m, n)
    x, bias = p.inputs(seed=11)
    return x, bias, p.reference(x, bias)


class PassMeter:
    """One pass over memory (a copy of the problem's array), timed between a row's own samples,
    so the fusion lesson divides each row's time by a pass measured in the same rounds."""

    def __init__(self, copy: Callable[[], Any]) -> None:
        self.copy = copy
        self.seconds: list[float] = []

    def __call__(self, _i: int) -> None:  # a `before` hook: untimed for the kernel
        start = time.perf_counter()
        self.copy()
        self.seconds.append(time.perf_counter() - start)

    def ms(self) -> float | None:
        """The median pass in ms (None when no sample ran)."""
        return float(np.median(self.seconds)) * 1e3 if self.seconds else None


def _result(
    timing: Timing, load: Any, detail: str, one_pass: PassMeter | None = None
) -> dict[str, Any]:
    extra = {"pass_ms": one_pass.ms()} if one_pass is not None and one_pass.ms() else {}
    return {
        **extra,
        "status": "ok",
        "ms": timing.median * 1e3,
        "min_ms": timing.min * 1e3,
        "samples": len(timing.samples),
        "spread": timing.spread,
        "load": load.cores,
        "load_source": load.source,
        "detail": detail,
    }


def _time(fn: Callable[[], Any], repeats: int, **hooks: Any) -> tuple[Timing, Any]:
    """The one policy for Part B: one warm-up (the first check), then >= repeats samples."""
    with LoadMeter() as meter:
        timing = per_call(
            fn,
            warmup=1,
            min_time=BUDGET_S,
            min_calls=repeats,
            max_calls=MAX_SAMPLES,
            slow_s=SLOW_S,
            **hooks,
        )
    return timing, meter.load


def _baseline(
    fn: Callable[[], Any],
    repeats: int,
    ref: np.ndarray,
    tol: tuple,
    native: bool,
    detail: str,
    rows=None,
    one_pass: PassMeter | None = None,
) -> dict[str, Any]:
    """Check one call against the reference, then time the kernel (ours or a library's);
    one_pass, when given, times one pass over memory before each sample."""
    out = np.asarray(fn())
    if rows is not None and out.ndim == 2 and out.shape[0] > int(rows.max()):
        out = out[rows]
    got = compare(out, ref, rtol=tol[0], atol=tol[1])
    if not got.ok:
        why = f"disagrees with the float64 reference: {got.detail}"
        if native:
            return _unavailable(f"{why}. A bug in the bundled kernel, not credited", "mismatch")
        return _unavailable(f"wrong result: {why}", "wrong")
    hooks = {"before": one_pass} if one_pass is not None else {}
    timing, load = _time(fn, repeats, **hooks)
    return _result(timing, load, detail, one_pass)


def _unavailable(why: str, status: str = "unavailable") -> dict[str, Any]:
    return {"status": status, "ms": None, "detail": why}


def _data(out: Any) -> np.ndarray:
    return np.asarray(getattr(out, "data", out))


# ---- the student's child: only the student's kernels run there ----------------------------------
def _student(
    fn: Callable[[int], Any],
    before: Callable[[int], None],
    check: Callable[[int, np.ndarray], str],
    repeats: int,
    detail: str,
    one_pass: PassMeter | None = None,
) -> dict[str, Any]:
    """Time fn(buffer) on rotated, freshly written inputs; every sample's output spot-checked;
    one_pass, when given, times one pass over memory before each sample."""
    current = [0]

    def prepare(i: int) -> None:
        current[0] = i
        before(i)
        if one_pass is not None:
            one_pass(i)

    def after(i: int, out: Any) -> None:
        why = check(i, _data(out))
        if why:
            raise WrongOutput(f"sample {i + 2 if i >= 0 else 1}: {why}")

    try:
        timing, load = _time(lambda: fn(current[0]), repeats, before=prepare, after=after)
    except WrongOutput as exc:
        why = f"wrong result on rotated inputs ({exc}); a kernel must compute every call"
        return _unavailable(why, "wrong")
    return _result(timing, load, detail, one_pass)


def _scale(i: int) -> int:
    """A distinct power-of-two exponent per sample (exact in float32): -20..20, 41 apart."""
    return (i * 7) % 41 - 20


def student_gemm(module: Any, *, n: int, repeats: int, tile_size: int = 64) -> dict[str, Any]:
    """Your tiled_matmul on n x n x n; sample i multiplies (A * 2^e_i) @ B, e_i new each time."""
    from tinytorch.core.tensor import Tensor

    if module is None or not callable(getattr(module, "tiled_matmul", None)):
        return _unavailable("tiled_matmul not loaded")
    a, b, rows, ref = _gemm(n)
    pairs = [(Tensor(a.copy()), Tensor(b.copy())) for _ in range(ROTATE)]  # built untimed

    def before(i: int) -> None:
        ta, _ = pairs[i % ROTATE]
        np.multiply(a, np.float32(2.0 ** _scale(i)), out=ta.data)

    def check(i: int, out: np.ndarray) -> str:
        if out.shape != (n, n):
            return f"shape {out.shape}, expected {(n, n)}"
        got = compare(out[rows] * 2.0 ** -_scale(i), ref, rtol=GEMM_TOL[0], atol=GEMM_TOL[1])
        return "" if got.ok else got.detail

    return _student(
        lambda i: module.tiled_matmul(*pairs[i % ROTATE], tile_size=tile_size),
        before,
        check,
        repeats,
        f"your tiled_matmul, tile_size={tile_size}",
    )


def _student_gelu(
    module: Any, fn_name: str, m: int, n: int, repeats: int, what: str, passes: bool = False
) -> dict:
    """Your fused_gelu / unfused_gelu on gelu(x + bias) rolled by a new offset every sample;
    passes: also time one pass over the array (a copy) before each sample, in the same rounds."""
    from tinytorch.core.tensor import Tensor

    fn = getattr(module, fn_name, None) if module is not None else None
    if not callable(fn):
        missing = "not loaded" if module is None else "not in this module"
        return _unavailable(f"{fn_name} {missing}")
    x, bias, ref = _bias_gelu(m, n)
    base = (x + bias).ravel()  # the bias add is done up front: the student's kernel is GELU only
    ref_flat = ref.ravel()
    size = base.size
    spots = np.unique(np.r_[0, size - 1, np.random.default_rng(3).integers(0, size, SPOT)])
    bufs = [Tensor(x.copy()) for _ in range(ROTATE)]

    def shift(i: int) -> int:
        return ((i + 2) * 7919) % size

    def before(i: int) -> None:
        d, s = bufs[i % ROTATE].data.reshape(-1), shift(i)
        d[: size - s], d[size - s :] = base[s:], base[:s]  # d[j] = base[(j + s) % size]

    def check(i: int, out: np.ndarray) -> str:
        if out.shape != (m, n):
            return f"shape {out.shape}, expected {(m, n)}"
        want = ref_flat[(spots + shift(i)) % size]
        got = compare(
            out.reshape(-1)[spots], want, rtol=ELEMENTWISE_TOL[0], atol=ELEMENTWISE_TOL[1]
        )
        return "" if got.ok else got.detail

    one_pass = None
    if passes:  # NumPy's copy, one thread like the student's NumPy: one pass over the array
        src, dst = base.copy(), np.empty_like(base)
        one_pass = PassMeter(lambda: np.copyto(dst, src))
    return _student(lambda i: fn(bufs[i % ROTATE]), before, check, repeats, what, one_pass)


def student_bias_gelu(module: Any, *, m: int, n: int, repeats: int) -> dict[str, Any]:
    what = "your fused_gelu on x + bias (the add not timed)"
    return _student_gelu(module, "fused_gelu", m, n, repeats, what)


def student_fused_gelu(module: Any, *, m: int, n: int, repeats: int) -> dict[str, Any]:
    what = "your fused_gelu (its passes over memory: the fusion lesson below, from its time)"
    return _student_gelu(module, "fused_gelu", m, n, repeats, what, passes=True)


def student_unfused_gelu(module: Any, *, m: int, n: int, repeats: int) -> dict[str, Any]:
    what = "your unfused_gelu (its passes over memory: the fusion lesson below, from its time)"
    return _student_gelu(module, "unfused_gelu", m, n, repeats, what, passes=True)


def reference_passes() -> str:
    """What the reference's GELUs do, for comparison beside the student's rows (never as theirs)."""
    fused, unfused = GELU_PASSES["fused_gelu"], GELU_PASSES["unfused_gelu"]
    return (
        f"the reference's unfused_gelu makes {unfused} passes over memory, each into a new array "
        f"({unfused - 1} temporaries); its fused_gelu {fused} in-place passes into 2 buffers"
    )


# ---- the baseline child (never loaded the student's code): NumPy and the C++ kernels --------------
def numpy_gemm(module: Any, *, n: int, repeats: int) -> dict[str, Any]:
    a, b, rows, ref = _gemm(n)
    out = np.empty((n, n), dtype=np.float32)
    return _baseline(
        lambda: np.matmul(a, b, out=out), repeats, ref, GEMM_TOL, False, "np.matmul (BLAS)", rows
    )


def numpy_bias_gelu(module: Any, *, m: int, n: int, repeats: int) -> dict[str, Any]:
    x, bias, ref = _bias_gelu(m, n)
    out, tmp = np.empty_like(x), np.empty_like(x)
    what = (
        f"in-place ufuncs into reused buffers: {GELU_PASSES['numpy_bias_gelu']} passes over memory"
    )
    return _baseline(
        lambda: profiling.numpy_bias_gelu(x, bias, out=out, tmp=tmp),
        repeats,
        ref,
        ELEMENTWISE_TOL,
        False,
        what,
    )


def ceilings(
    module: Any, *, quick: bool, rounds: int = 1, copy_floats: int | None = None
) -> dict[str, Any]:
    """One round of the machine's ceilings (profiling's one method), measured in this child;
    Part B takes several, spread between its rows (profiling.combine_rounds), and copies an array
    the size of its smallest memory-bound problem (those rows run from cache, and so does it)."""
    from tinytorch.profiling import measure_ceilings

    return measure_ceilings(quick=quick, rounds=rounds, copy_floats=copy_floats).to_dict()


def simd_status(module: Any) -> dict[str, Any]:
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


def _simd() -> tuple[Any, str]:
    try:
        from tinytorch.extensions import simd
    except ImportError as exc:
        return None, f"tinytorch.extensions.simd not importable: {exc}"
    ok, reason = simd.available()
    if not ok:
        return None, f"not built: {reason}"
    info = simd.build_info() if hasattr(simd, "build_info") else {}
    omp = "OpenMP" if info.get("openmp") else "no OpenMP"
    return simd, f"{info.get('isa', '?')}, {omp}, {info.get('threads', '?')} threads"


def simd_gemm(module: Any, *, n: int, repeats: int) -> dict[str, Any]:
    simd, why = _simd()
    if simd is None:
        return _unavailable(why)
    a, b, rows, ref = _gemm(n)
    out = np.empty((n, n), dtype=np.float32)
    return _baseline(lambda: simd.matmul(a, b, out=out), repeats, ref, GEMM_TOL, True, why, rows)


def simd_bias_gelu(module: Any, *, m: int, n: int, repeats: int) -> dict[str, Any]:
    simd, why = _simd()
    if simd is None:
        return _unavailable(why)
    x, bias, ref = _bias_gelu(m, n)
    out = np.empty_like(x)
    what = f"{why}; {GELU_PASSES['c++']} pass over memory (reads x and bias once, writes y once)"
    return _baseline(
        lambda: simd.fused_bias_gelu(x, bias, out=out), repeats, ref, ELEMENTWISE_TOL, True, what
    )


def simd_fused_gelu(module: Any, *, m: int, n: int, repeats: int) -> dict[str, Any]:
    """The C++ kernel on the fusion lesson's problem: gelu(x + bias) with the add done up front."""
    simd, why = _simd()
    if simd is None:
        return _unavailable(why)
    x, bias, ref = _bias_gelu(m, n)
    y, zero, out = x + bias, np.zeros(n, dtype=np.float32), np.empty_like(x)
    what = f"C++ fused kernel ({why}): {GELU_PASSES['c++']} pass over memory (reads x once, writes y once)"
    scratch = np.empty_like(y)  # one pass: the C++ parallel copy, the kernel's own threads
    return _baseline(
        lambda: simd.fused_bias_gelu(y, zero, out=out), repeats, ref, ELEMENTWISE_TOL, True, what,
        one_pass=PassMeter(lambda: simd.copy(y, out=scratch)),
    )  # fmt: skip


# ---- the torch child: torch, MPS and Triton (torch's libgomp would skew the C++ timings) ---------
def _torch() -> tuple[Any, str]:
    try:
        import torch
    except ImportError:
        return None, TORCH_MISSING  # the words `tito info` uses
    return torch, ""


def torch_gemm(module: Any, *, n: int, repeats: int) -> dict[str, Any]:
    torch, why = _torch()
    if torch is None:
        return _unavailable(why)
    a, b, rows, ref = _gemm(n)
    ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.empty(n, n)
    what = f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    return _baseline(
        lambda: torch.mm(ta, tb, out=tc).numpy(), repeats, ref, GEMM_TOL, False, what, rows
    )


def torch_bias_gelu(module: Any, *, m: int, n: int, repeats: int) -> dict[str, Any]:
    torch, why = _torch()
    if torch is None:
        return _unavailable(why)
    x, bias, ref = _bias_gelu(m, n)
    tx, tb = torch.from_numpy(x), torch.from_numpy(bias)
    gelu = torch.nn.functional.gelu
    what = "F.gelu(x + bias, approximate='tanh')"
    return _baseline(
        lambda: gelu(tx + tb, approximate="tanh").numpy(),
        repeats,
        ref,
        ELEMENTWISE_TOL,
        False,
        what,
    )


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


def accel_status(module: Any) -> list[dict[str, Any]]:
    torch, why = _torch()
    rows = [
        {
            "name": "torch-cpu",
            "available": torch is not None,
            "reason": why or f"torch {torch.__version__}",
        }
    ]
    for name, label in (("mps", "mps"), ("triton_kernels", "triton")):
        mod, reason = _backend(name)
        rows.append({"name": label, "available": mod is not None, "reason": reason})
    return rows


def mps_gemm(module: Any, *, n: int, repeats: int) -> dict[str, Any]:
    """torch on Apple's "mps" device, data resident there; each sample ends in a synchronize."""
    mps, why = _backend("mps")
    if mps is None:
        return _unavailable(why)
    import torch

    a, b, rows, ref = _gemm(n)
    ta, tb = torch.from_numpy(a).to("mps"), torch.from_numpy(b).to("mps")

    def run() -> Any:
        out = ta @ tb
        torch.mps.synchronize()  # MPS is asynchronous: without this we would time the launch
        return out

    got = compare(run().cpu().numpy()[rows], ref, rtol=GEMM_TOL[0], atol=GEMM_TOL[1])
    if not got.ok:
        return _unavailable(f"disagrees with NumPy: {got.detail}", "mismatch")
    timing, load = _time(run, repeats)
    return _result(timing, load, f"torch on 'mps', data on the device ({why})")


def triton_bias_gelu(module: Any, *, m: int, n: int, repeats: int) -> dict[str, Any]:
    triton, why = _backend("triton_kernels")
    if triton is None:
        return _unavailable(why)
    x, bias, ref = _bias_gelu(m, n)
    what = f"@triton.jit kernel ({why}), includes host copies"
    return _baseline(
        lambda: np.asarray(triton.fused_bias_gelu(x, bias)),
        repeats,
        ref,
        ELEMENTWISE_TOL,
        True,
        what,
    )


TASKS: dict[str, Callable[..., Any]] = {
    fn.__name__: fn
    for fn in (
        student_gemm,
        student_bias_gelu,
        student_fused_gelu,
        student_unfused_gelu,
        numpy_gemm,
        numpy_bias_gelu,
        ceilings,
        simd_status,
        simd_gemm,
        simd_bias_gelu,
        simd_fused_gelu,
        accel_status,
        torch_gemm,
        torch_bias_gelu,
        mps_gemm,
        triton_bias_gelu,
    )
}
