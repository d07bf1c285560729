"""A change to kernels.cpp against the revision before it, and both against OpenBLAS, paired.

    python benchmarks/bench_gemm_change.py [--base HEAD] [--sizes 512,1024,2048]
                                           [--threads 1,2] [--rounds 9]

Builds the C++ kernels twice with this machine's flags (extensions/build.py, ISA from
$TINYTORCH_SIMD_ISA): once from the working tree and once from `git show BASE:extensions/kernels.cpp`
(default HEAD, so an uncommitted change is measured against the last commit; `--base HEAD~1`
measures the last commit). Both libraries get the same cache blocks (simd.prepare). Each GEMM
n x n x n then runs in tinytorch.profiling's interleaved rounds, base, change and np.matmul
taking turns, and each ratio is the median of the rounds' own ratios (profiling.paired_speedup):
on a machine whose speed wanders by 15-20% from minute to minute, a ratio of medians taken
minutes apart would mostly measure the wandering. Both results are checked against the float64
reference before anything is timed.

`tito bench` is the report on one build; this is the tool for deciding whether a change helps.
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits
from tinytorch.extensions import build, simd
from tinytorch.extensions.benchmark import gemm_atol, settle_pauses

from tinytorch import profiling

REPO = Path(__file__).resolve().parents[1]


def base_library(rev: str, workdir: Path) -> ctypes.CDLL:
    """The kernels library built from kernels.cpp as it was at git revision `rev`."""
    try:
        src = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{rev}:extensions/kernels.cpp"],
            capture_output=True, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as exc:
        err = getattr(exc, "stderr", b"") or b""
        raise SystemExit(f"--base {rev!r}: git cannot show extensions/kernels.cpp there: "
                         f"{err.decode(errors='replace').strip() or exc}") from None  # fmt: skip
    path = workdir / "kernels.cpp"
    path.write_bytes(src)
    lib, _ = build.build(source=path)
    simd.prepare(lib)
    return lib


def sgemm(lib: ctypes.CDLL, a: np.ndarray, b: np.ndarray, c: np.ndarray, threads: int) -> None:
    """C = A @ B through one library's tt_sgemm: a (m, k), b (k, n), c (m, n), all C-contiguous."""
    (m, k), n = a.shape, b.shape[1]
    if lib.tt_sgemm(a.ctypes.data, b.ctypes.data, c.ctypes.data, m, n, k, k, n, n, None, threads):
        raise MemoryError("tt_sgemm could not allocate its packing buffers")


def compare(libs: dict[str, ctypes.CDLL], n: int, threads: int, rounds: int) -> dict[str, float]:
    """GFLOP/s of each library and of np.matmul on n x n x n, and the paired ratios."""
    problem = profiling.gemm(n)
    a, b = problem.inputs()  # (n, n) each
    ref = problem.reference(a, b)
    outs = {name: np.empty_like(a) for name in [*libs, "numpy"]}
    for name, lib in libs.items():
        sgemm(lib, a, b, outs[name], threads)
        err = float(np.abs(outs[name] - ref).max())
        if err > gemm_atol(n):
            raise SystemExit(f"{name}: GEMM {n} max abs error {err:.2e} > {gemm_atol(n):.1e}")

    fns: dict[str, Callable[[], float]] = {
        name: (lambda lib=lib, c=outs[name]: profiling.per_call(
            lambda: sgemm(lib, a, b, c, threads)).median)
        for name, lib in libs.items()
    }  # fmt: skip

    def blas() -> float:
        with threadpool_limits(threads):
            return profiling.per_call(lambda: np.matmul(a, b, out=outs["numpy"])).median

    fns["numpy"] = blas
    names = [f"{name} {threads}t" for name in fns]  # settle_pauses keys its pauses by thread count
    timings = profiling.interleaved(
        dict(zip(names, fns.values(), strict=True)), rounds, settle=settle_pauses(names)
    )
    base, change, numpy = (timings[name] for name in names)
    return {
        "base": base.rate(problem.flops),
        "change": change.rate(problem.flops),
        "numpy": numpy.rate(problem.flops),
        "change / base": profiling.paired_speedup(change, base),
        "base / numpy": profiling.paired_speedup(base, numpy),
        "change / numpy": profiling.paired_speedup(change, numpy),
    }


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD", help="git revision to compare with (default HEAD)")
    ap.add_argument("--sizes", type=_ints, default=[512, 1024, 2048], help="n of n x n x n")
    ap.add_argument("--threads", type=_ints, default=[1, 2], help="thread counts")
    ap.add_argument("--rounds", type=int, default=9, help="interleaved rounds per figure")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error(f"--rounds must be >= 1, got {args.rounds}")
    ok, why = simd.available()
    if not ok:
        raise SystemExit(f"the C++ kernels are not available here: {why}")
    with tempfile.TemporaryDirectory(prefix="tt-base-") as tmp:
        libs = {"base": base_library(args.base, Path(tmp)), "change": simd._load()}
    info = simd.build_info()
    blocks = {k: v for k, v in (info["blocks"] or {}).items() if k != "source"}
    print(f"base: {args.base} | change: the working tree | {info['microkernel']} | {blocks}")
    print(
        f"{'n':>5} | {'threads':>7} | {'base':>6} | {'change':>6} | {'OpenBLAS':>8} | "
        f"{'change/base':>11} | {'base/BLAS':>9} | {'change/BLAS':>11}  (GFLOP/s; ratios paired)"
    )
    for n in args.sizes:
        for t in args.threads:
            r = compare(libs, n, t, args.rounds)
            print(f"{n:>5} | {t:>7} | {r['base']:>6.1f} | {r['change']:>6.1f} | {r['numpy']:>8.1f}"
                  f" | {r['change / base']:>10.3f}x | {r['base / numpy']:>8.3f}x"
                  f" | {r['change / numpy']:>10.3f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
