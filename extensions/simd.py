"""C++ SIMD kernels (kernels.cpp) bound through ctypes: GEMM, bias+GELU and the fused GEMM epilogue.

Every argument is checked here, before a pointer reaches C++: wrong dtypes are converted to
float32 (or rejected with ValueError naming the argument), strided views are made contiguous, and
shapes are matched. The C++ side trusts what it gets, so this module is the only guard against a
segfault.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import numpy as np

from . import build as _build

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_result: _build.BuildResult | None = None
_error: str | None = None
_blocks: dict[str, Any] = {}
_MAX_THREADS = 512
BLOCKS_ENV = "TINYTORCH_GEMM_BLOCKS"  # "KC,MC,NC": overrides the cache-derived blocks (tuning)

_f32p = ctypes.c_void_p  # float*; passed as the integer address (cheaper than data_as)
_size = ctypes.c_size_t


def _load() -> ctypes.CDLL:
    """Build or load the library once per process; later calls reuse it (or its error)."""
    global _lib, _result, _error
    with _lock:
        if _lib is not None:
            return _lib
        if _error is not None:
            raise RuntimeError(_error)
        try:
            lib, res = _build.build()
        except _build.BuildError as exc:
            _error = str(exc)
            raise RuntimeError(_error) from None
        except Exception as exc:  # noqa: BLE001 - any failure means "not available", with the reason
            _error = f"{type(exc).__name__}: {exc}"
            raise RuntimeError(_error) from None
        try:
            blocks = prepare(lib)
        except RuntimeError as exc:
            _error = str(exc)
            raise
        _blocks.clear()
        _blocks.update(blocks)
        _lib, _result = lib, res
        return lib


def library() -> ctypes.CDLL:
    """This checkout's kernels library, built on first use and declared (prepare); RuntimeError
    with the reason when it cannot be built here."""
    return _load()


def prepare(lib: ctypes.CDLL) -> dict[str, Any]:
    """Declare the C signatures on a freshly loaded kernels library and set its GEMM blocks from
    this CPU's caches (gemm_blocks); returns the blocks it really uses. _load calls it, and so
    does benchmarks/bench_gemm_change.py on the library built from another revision."""
    lib.tt_isa.restype = ctypes.c_char_p
    lib.tt_openmp.restype = ctypes.c_int
    lib.tt_sgemm.restype = ctypes.c_int
    lib.tt_sgemm.argtypes = [_f32p, _f32p, _f32p, _size, _size, _size, _size, _size, _size,
                             _f32p, ctypes.c_int]  # fmt: skip
    lib.tt_bias_gelu.restype = ctypes.c_int
    lib.tt_bias_gelu.argtypes = [_f32p, _f32p, _f32p, _size, _size, ctypes.c_int]
    lib.tt_copy.restype = ctypes.c_int
    lib.tt_copy.argtypes = [_f32p, _f32p, _size, ctypes.c_int]
    lib.tt_team_size.restype = ctypes.c_int
    lib.tt_team_size.argtypes = [ctypes.c_int]
    lib.tt_fma_peak.restype = ctypes.c_double
    lib.tt_fma_peak.argtypes = [_size, ctypes.c_int]
    lib.tt_ukernel_gflops.restype = ctypes.c_double
    lib.tt_ukernel_gflops.argtypes = [_size, _size, _size]
    lib.tt_microkernel.restype = ctypes.c_char_p
    lib.tt_set_blocks.restype = ctypes.c_int
    lib.tt_set_blocks.argtypes = [_size, _size, _size]
    lib.tt_block.restype = ctypes.c_long
    lib.tt_block.argtypes = [ctypes.c_int]
    blocks = gemm_blocks(lib.tt_mr(), lib.tt_nr())
    if lib.tt_set_blocks(blocks["KC"], blocks["MC"], blocks["NC"]) != 0:
        raise RuntimeError(f"tt_set_blocks rejected {blocks}")
    # What the library really uses (it rounds MC and NC up to multiples of MR and NR).
    blocks.update(KC=lib.tt_block(0), MC=lib.tt_block(1), NC=lib.tt_block(2))
    return blocks


def gemm_blocks(
    mr: int, nr: int, caches: dict[str, tuple[int, str]] | None = None
) -> dict[str, Any]:
    """GEMM cache blocks for an MR x NR micro-kernel from the cache sizes (build.cache_sizes()):

    KC: the KC x NR sliver of B fills half of L1d (the A sliver and C take the rest), if that still
        gives KC >= 16 NR (the 6x16 kernel: 256 on a 32 KiB L1d, 384 on 48 KiB). Each micro-kernel
        call ends with a write-back of its MR x NR tile, whose lines come from L3 once C outgrows
        L2, and KC sets how often that is paid. The 14x32 AVX-512 kernel's sliver (128 floats a k)
        fits L1 only at KC = 128-192, too short: it streams from L2, so KC takes an eighth of L2
        for the sliver instead (1024 on a 1 MiB L2). Zen 4: KC = 128 ran 0.89-0.93x OpenBLAS at
        n = 1024-2048 and KC = 512 0.98-1.04x. Zen 5, paired (the C harness, then tito bench):
        KC = 1024 ran 1.05-1.06x KC = 512 at n = 1024 on 1 thread, 1.03x at 2048 and on 2
        threads, and 0.88-0.89 of the FMA peak (0.79-0.84 before); a hot C buffer gained 5% at
        KC = 512 and 1% at 1024. The 6x16 kernel, which writes C straight from its registers,
        ran 0.98x with KC = 1024 on the same Zen 5 (0.89-0.93x at 2048), so it keeps the L1 rule.
    MC: the MC x KC block of A fills a quarter of L2 (room for B slivers streaming through);
    NC: the KC x NC panel of B fills a quarter of L3 (shared with the other cores).
    $TINYTORCH_GEMM_BLOCKS="KC,MC,NC" overrides them (for tuning); "source" says which applied.
    """
    caches = _build.cache_sizes() if caches is None else caches
    l1d, l2, l3 = (caches[k][0] for k in ("l1d", "l2", "l3"))
    kc = l1d // 2 // (4 * nr) // 16 * 16
    if kc < 16 * nr:  # the sliver cannot sit in L1 at a useful depth: it streams from L2
        kc = l2 // 8 // (4 * nr) // 16 * 16
    kc = min(1024, max(64, 16 * nr, kc))
    mc = max(mr, l2 // 4 // (4 * kc) // mr * mr)
    nc = min(8192, max(8 * nr, l3 // 4 // (4 * kc) // nr * nr))
    source = ", ".join(
        f"{k} {caches[k][0] >> 10} KiB ({caches[k][1]})" for k in ("l1d", "l2", "l3")
    )
    env = os.environ.get(BLOCKS_ENV, "").strip()
    if env:
        parts = [p.strip() for p in env.split(",")]
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise RuntimeError(
                f"{BLOCKS_ENV} must be three positive integers KC,MC,NC, got {env!r}"
            )
        kc, mc, nc = (int(p) for p in parts)
        source = f"{BLOCKS_ENV}={env}"
    return {"MR": int(mr), "NR": int(nr), "KC": kc, "MC": mc, "NC": nc, "source": source}


def available() -> tuple[bool, str]:
    """(True, "avx2+fma, 6x16 avx2+fma asm, OpenMP, g++ 12.2") once the library for
    $TINYTORCH_SIMD_ISA builds and loads, else (False, why), e.g. "TINYTORCH_SIMD_ISA=avx512: the
    CPU lacks AVX512F"."""
    try:
        lib = _load()
    except RuntimeError as exc:
        return False, str(exc)
    assert _result is not None
    omp = "OpenMP" if _result.openmp else "single-thread (" + _result.openmp_reason + ")"
    kernel = lib.tt_microkernel().decode()
    return True, f"{lib.tt_isa().decode()}, {kernel}, {omp}, {_result.compiler_version}"


_cpus: int | None = None


def default_threads() -> int:
    """OMP_NUM_THREADS if set, else the CPUs this process may run on (looked up once)."""
    global _cpus
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if env.isdigit() and int(env) > 0:
        return min(int(env), _MAX_THREADS)
    if _cpus is None:
        try:
            _cpus = max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):
            _cpus = max(1, os.cpu_count() or 1)
    return _cpus


def build_info() -> dict[str, Any]:
    """built, isa (the path built), isa_requested ($TINYTORCH_SIMD_ISA), microkernel, blocks
    ({"MR","NR","KC","MC","NC","source"}), openmp, threads, compiler, flags, cache path, error
    (never raises)."""
    info: dict[str, Any] = {
        "built": False,
        "isa": None,
        "isa_requested": os.environ.get(_build.ISA_ENV, "").strip().lower() or "native",
        "microkernel": None,
        "blocks": None,
        "openmp": None,
        "threads": default_threads(),
        "compiler": None,
        "compiler_version": None,
        "flags": None,
        "cache_path": str(_build.cache_dir()),
        "library": None,
        "cached": None,
        "notes": [],
        "error": None,
    }
    try:
        lib = _load()
    except RuntimeError as exc:
        info["error"] = str(exc)
        cxx = _build.find_compiler()
        info["compiler"] = " ".join(cxx) if cxx else None
        return info
    res = _result
    assert res is not None
    info.update(
        built=True,
        isa=lib.tt_isa().decode(),
        isa_requested=res.isa,
        microkernel=lib.tt_microkernel().decode(),
        blocks=dict(_blocks),
        openmp=res.openmp,
        openmp_reason=res.openmp_reason,
        threads=default_threads() if res.openmp else 1,
        compiler=" ".join(res.compiler),
        compiler_version=res.compiler_version,
        flags=list(res.flags),
        library=str(res.library),
        cached=res.cached,
        notes=list(res.notes),
        omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"),  # libgomp defaults unless the user set
        gomp_spincount=os.environ.get("GOMP_SPINCOUNT"),  # these; they change 2-thread timings
    )
    return info


# --------------------------------------------------------------------------- argument checks


def _threads(threads: object) -> int:
    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)):
        raise ValueError(f"threads must be an int >= 1 or None, got {threads!r}")  # noqa: TRY004
    if not 1 <= int(threads) <= _MAX_THREADS:
        raise ValueError(f"threads must be in 1..{_MAX_THREADS}, got {threads!r}")
    return int(threads)


def _as_f32(x: object, name: str, ndim: int | None = None) -> np.ndarray:
    """A C-contiguous float32 copy/view of x; ValueError naming `name` if it is not numeric."""
    if type(x) is np.ndarray and x.dtype == np.float32 and x.flags.c_contiguous:
        # The common case, kept cheap: at n = 256 a GEMM is 0.4 ms, and every microsecond of
        # argument handling shows in its ratio to OpenBLAS.
        if ndim is not None and x.ndim != ndim:
            raise ValueError(f"{name} must be {ndim}-D, got shape {x.shape}")
        return x
    data = getattr(x, "data", None)
    if isinstance(data, np.ndarray) and not isinstance(x, np.ndarray):
        x = data  # a tinytorch Tensor (or anything wrapping an ndarray in .data)
    try:
        arr = np.asarray(x)
    except Exception as exc:  # noqa: BLE001 - ragged lists and the like
        raise ValueError(f"{name} is not array-like: {exc}") from None
    if arr.dtype.kind not in "fiub":  # float, int, uint, bool convert; complex and object do not
        raise ValueError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    return np.ascontiguousarray(arr, dtype=np.float32)


def _ptr(arr: np.ndarray) -> int:
    return arr.ctypes.data


# --------------------------------------------------------------------------- kernels


def matmul(
    a: object, b: object, *, threads: int | None = None, out: np.ndarray | None = None
) -> np.ndarray:
    """C = A @ B in float32: A (M, K), B (K, N) -> (M, N); written into `out` if given."""
    return _gemm(a, b, None, threads, out)


def matmul_bias_gelu(
    a: object,
    b: object,
    bias: object,
    *,
    threads: int | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """C = gelu(A @ B + bias), GELU in tanh form, applied as the micro-kernel writes C."""
    return _gemm(a, b, bias, threads, out)


def _out(out: object, shape: tuple[int, ...], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
    """A fresh float32 array, or `out` checked: float32, C-contiguous, writeable, right shape,
    sharing no memory with the inputs (the kernels read inputs while writing out)."""
    if out is None:
        return np.empty(shape, dtype=np.float32)
    if not isinstance(out, np.ndarray):
        raise ValueError(f"out must be a numpy.ndarray, got {type(out).__name__}")  # noqa: TRY004
    if out.dtype != np.float32 or out.shape != shape:
        raise ValueError(f"out must be float32 of shape {shape}, got {out.dtype} {out.shape}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be C-contiguous and writeable")
    for arr in inputs:
        # Every array here is C-contiguous, so overlapping address ranges are shared memory:
        # the cheap bounds test is exact (np.shares_memory solves an integer program).
        if np.may_share_memory(out, arr):
            raise ValueError("out overlaps an input; pass a separate buffer")
    return out


def _gemm(
    a: object, b: object, bias: object | None, threads: object, out: object = None
) -> np.ndarray:
    nt = _threads(threads)
    a32 = _as_f32(a, "a", ndim=2)  # (M, K)
    b32 = _as_f32(b, "b", ndim=2)  # (K, N)
    (m, k), (k2, n) = a32.shape, b32.shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: a is {a32.shape}, b is {b32.shape}")
    bias32 = None
    if bias is not None:
        bias32 = _as_f32(bias, "bias", ndim=1)  # (N,)
        if bias32.shape[0] != n:
            raise ValueError(f"bias must have length N={n} (columns of b), got {bias32.shape[0]}")
    lib = _load()
    inputs = (a32, b32) if bias32 is None else (a32, b32, bias32)
    out = _out(out, (m, n), inputs)  # (M, N)
    if m == 0 or n == 0:
        return out
    rc = lib.tt_sgemm(_ptr(a32), _ptr(b32), _ptr(out), m, n, k, max(k, 1), max(n, 1), n,
                      _ptr(bias32) if bias32 is not None else None, nt)  # fmt: skip
    if rc != 0:
        raise MemoryError("tt_sgemm could not allocate its packing buffers")
    return out


def fused_bias_gelu(
    x: object, bias: object, *, threads: int | None = None, out: np.ndarray | None = None
) -> np.ndarray:
    """y = gelu(x + bias) = u' * sigmoid(2 sqrt(2/pi) (u' + 0.044715 u'^3)), u' = x + bias.

    `out` may be x itself (in place, when x is float32 C-contiguous) or a separate buffer.
    """
    nt = _threads(threads)
    x32 = _as_f32(x, "x")  # (..., N)
    if x32.ndim == 0:
        raise ValueError("x must have at least 1 dimension, got a scalar")
    bias32 = _as_f32(bias, "bias", ndim=1)  # (N,)
    cols = x32.shape[-1]
    if bias32.shape[0] != cols:
        raise ValueError(
            f"bias must have length {cols} (the last dimension of x {x32.shape}), "
            f"got {bias32.shape[0]}"
        )
    lib = _load()
    same = isinstance(out, np.ndarray) and out is x32  # exactly in place: each y[j] reads x[j]
    out = _out(out, x32.shape, (bias32,) if same else (x32, bias32))
    if x32.size == 0:
        return out
    rows = x32.size // cols
    rc = lib.tt_bias_gelu(_ptr(x32), _ptr(bias32), _ptr(out), rows, cols, nt)
    if rc != 0:
        raise RuntimeError(f"tt_bias_gelu failed with code {rc}")
    return out


def copy(x: object, *, threads: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """A parallel memcpy of x: the bandwidth ceiling the benchmark divides bias+GELU by."""
    nt = _threads(threads)
    x32 = _as_f32(x, "x")
    out = _out(out, x32.shape, (x32,))
    if x32.size:
        _load().tt_copy(_ptr(x32), _ptr(out), x32.size, nt)
    return out


def team_size(threads: int) -> int:
    """How many threads an OpenMP region asking for `threads` actually gets in this process."""
    return int(_load().tt_team_size(_threads(threads)))


def ukernel_gflops(*, slivers: int = 1, flops: float = 2e9) -> float:
    """GFLOP/s of the GEMM micro-kernel alone on one thread, at the library's KC: `slivers` MR x KC
    slivers of A (1: in L1; MC / MR: one MC x KC block from L2) past one KC x NR sliver of B,
    about `flops` floating-point operations in all."""
    if not (isinstance(slivers, int) and slivers >= 1):
        raise ValueError(f"ukernel_gflops: slivers must be an int >= 1, got {slivers!r}")
    lib = _load()
    kc, mr, nr = int(lib.tt_block(0)), int(lib.tt_mr()), int(lib.tt_nr())
    reps = max(1, int(flops / (2 * mr * nr * kc * slivers)))
    return float(lib.tt_ukernel_gflops(kc, slivers, reps))


def fma_peak(*, threads: int | None = None, iters: int = 20_000_000) -> float:
    """GFLOP/s of 12 independent FMA chains per thread: the compute ceiling for GEMM."""
    nt = _threads(threads)
    return float(_load().tt_fma_peak(int(iters), nt))
