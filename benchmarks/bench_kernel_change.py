"""A change to kernels.cpp against a git revision, and both against their anchors, paired.

    python benchmarks/bench_kernel_change.py [--base HEAD] [--sizes 512,1024,2048]
                                             [--gelu 4096x4096] [--threads 1,2] [--rounds 9]

Builds the C++ kernels twice with this machine's flags (extensions/build.py, ISA from
$TINYTORCH_SIMD_ISA): once from the working tree and once from extensions/kernels.cpp and csrc/ as
they were at git revision BASE (default HEAD, so an uncommitted change is measured against the
last commit; `--base HEAD~1` measures the last commit). Both libraries get the same cache blocks (simd.prepare). Then, in
tinytorch.profiling's interleaved rounds:
- GEMM n x n x n for each of --sizes: base, change and np.matmul (OpenBLAS) take turns;
- bias+GELU on the --gelu shape ("none" skips it): base, change and the copy kernel on the same
  array (the bandwidth bound tito bench compares it with) take turns.
Each ratio is the median of the rounds' own ratios (profiling.paired_speedup): on a machine whose
speed wanders by 15-20% from minute to minute, a ratio of medians taken minutes apart would mostly
measure the wandering. Every result is checked against the float64 reference before anything is
timed.

`tito bench` is the report on one build; this is the tool for deciding whether a change helps.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits
from tinytorch.extensions import build, simd

from tinytorch import profiling
from tinytorch.bench.native import blas_info, check, gemm_atol, settle_pauses

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Case:
    """One problem timed three ways: `calls` maps base, change and the anchor to one call each."""

    label: str  # "gemm 1024", "bias+gelu 4096x4096"
    unit: str  # "GFLOP/s" or "GB/s"
    work: float  # flops or bytes of one base/change call
    anchor: str  # "OpenBLAS", "copy"
    anchor_work: float  # flops or bytes of one anchor call
    calls: dict[str, Callable[[], object]]  # "base", "change", "anchor"
    pool: Callable[[], object] | None = None  # context manager around the anchor's calls


def base_library(rev: str, workdir: Path) -> ctypes.CDLL:
    """The kernels library built from kernels.cpp (and its csrc/ parts, where that revision has
    them) as they were at git revision `rev`."""

    def git(*args: str) -> bytes:
        try:
            return subprocess.run(
                ["git", "-C", str(REPO), *args], capture_output=True, check=True
            ).stdout
        except (OSError, subprocess.CalledProcessError) as exc:
            err = getattr(exc, "stderr", b"") or b""
            raise SystemExit(f"--base {rev!r}: git cannot show extensions/kernels.cpp there: "
                             f"{err.decode(errors='replace').strip() or exc}") from None  # fmt: skip

    names = git("ls-tree", "-r", "--name-only", rev, "--", "extensions/kernels.cpp",
                f"extensions/{build.PARTS}").decode().split()  # fmt: skip
    if "extensions/kernels.cpp" not in names:
        git("show", f"{rev}:extensions/kernels.cpp")  # raises SystemExit with git's own words
    for name in names:
        path = workdir / Path(name).relative_to("extensions")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(git("show", f"{rev}:{name}"))
    lib, _ = build.build(source=workdir / "kernels.cpp")
    simd.prepare(lib)
    return lib


def sgemm(lib: ctypes.CDLL, a: np.ndarray, b: np.ndarray, c: np.ndarray, threads: int) -> None:
    """C = A @ B through one library's tt_sgemm: a (m, k), b (k, n), c (m, n), all C-contiguous."""
    (m, k), n = a.shape, b.shape[1]
    if lib.tt_sgemm(a.ctypes.data, b.ctypes.data, c.ctypes.data, m, n, k, k, n, n, None, threads):
        raise MemoryError("tt_sgemm could not allocate its packing buffers")


def _check(name: str, got: np.ndarray, ref: np.ndarray, atol: float) -> None:
    result = check(name, got, ref, atol)
    if not result["ok"]:
        err = result["max_abs_err"]
        raise SystemExit(f"{name}: max abs error {err:.2e} > {atol:.1e}; not timing a wrong kernel")


def gemm_case(libs: dict[str, ctypes.CDLL], n: int, threads: int) -> Case:
    """GEMM n x n x n through each library, against np.matmul at the same thread count."""
    problem = profiling.gemm(n)
    a, b = problem.inputs()  # (n, n) each
    ref = problem.reference(a, b)
    outs = {name: np.empty_like(a) for name in [*libs, "anchor"]}  # (n, n) each
    calls: dict[str, Callable[[], object]] = {
        name: (lambda lib=lib, c=outs[name]: sgemm(lib, a, b, c, threads))
        for name, lib in libs.items()
    }
    for name, call in calls.items():
        call()
        _check(f"{name}: gemm {n}", outs[name], ref, gemm_atol(n))
    calls["anchor"] = lambda: np.matmul(a, b, out=outs["anchor"])
    return Case(f"gemm {n}", "GFLOP/s", problem.flops, "OpenBLAS", problem.flops, calls,
                pool=lambda: threadpool_limits(threads))  # fmt: skip


def bias_gelu_case(libs: dict[str, ctypes.CDLL], rows: int, cols: int, threads: int) -> Case:
    """bias+GELU on (rows, cols) through each library, against the change's copy kernel on the
    same array (read + write of x: the bound a streaming kernel is held to)."""
    problem = profiling.bias_gelu(rows, cols)
    x, bias = problem.inputs()  # (rows, cols), (cols,)
    ref = problem.reference(x, bias)
    outs = {name: np.empty_like(x) for name in [*libs, "anchor"]}  # (rows, cols) each

    def run(lib: ctypes.CDLL, y: np.ndarray) -> None:
        if lib.tt_bias_gelu(x.ctypes.data, bias.ctypes.data, y.ctypes.data, rows, cols, threads):
            raise RuntimeError("tt_bias_gelu failed")

    calls: dict[str, Callable[[], object]] = {
        name: (lambda lib=lib, y=outs[name]: run(lib, y)) for name, lib in libs.items()
    }
    for name, call in calls.items():
        call()
        _check(f"{name}: bias+gelu {rows}x{cols}", outs[name], ref, 1e-6)
    copy = libs["change"]
    calls["anchor"] = lambda: copy.tt_copy(
        x.ctypes.data, outs["anchor"].ctypes.data, x.size, threads
    )
    return Case(f"bias+gelu {rows}x{cols}", "GB/s", problem.bytes, "copy", 2.0 * x.nbytes, calls)


def compare(case: Case, threads: int, rounds: int) -> dict[str, float]:
    """Rates of base, change and the anchor in the same interleaved rounds, and paired ratios."""

    def anchor() -> float:
        if case.pool is None:
            return profiling.per_call(case.calls["anchor"]).median
        with case.pool():
            return profiling.per_call(case.calls["anchor"]).median

    fns: dict[str, Callable[[], float]] = {
        name: (lambda call=case.calls[name]: profiling.per_call(call).median)
        for name in ("base", "change")
    }
    fns["anchor"] = anchor
    # settle_pauses keys its pauses by thread count, and "numpy" for OpenBLAS's pool
    names = [f"{'numpy' if n == 'anchor' and case.pool else n} {threads}t" for n in fns]
    timings = profiling.interleaved(
        dict(zip(names, fns.values(), strict=True)), rounds, settle=settle_pauses(names)
    )
    base, change, ref = (timings[name] for name in names)
    per = case.work / case.anchor_work  # work of one kernel call over one anchor call
    return {
        "base": base.rate(case.work),
        "change": change.rate(case.work),
        "anchor": ref.rate(case.anchor_work),
        "change / base": profiling.paired_speedup(change, base),
        "base / anchor": profiling.paired_speedup(base, ref, work_ratio=per),
        "change / anchor": profiling.paired_speedup(change, ref, work_ratio=per),
    }


def _shape(text: str) -> tuple[int, int] | None:
    if text.strip().lower() == "none":
        return None
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(
            f"expected ROWSxCOLS (e.g. 4096x4096) or none, got {text!r}"
        )
    return int(parts[0]), int(parts[1])


def _ints(text: str) -> list[int]:
    if text.strip().lower() == "none":
        return []
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
    ap.add_argument(
        "--sizes", type=_ints, default=[512, 1024, 2048], help="GEMM n x n x n sizes, or none"
    )
    ap.add_argument("--gelu", type=_shape, default=(4096, 4096),
                    help="bias+GELU shape ROWSxCOLS, or none (default 4096x4096)")  # fmt: skip
    ap.add_argument("--threads", type=_ints, default=[1, 2], help="thread counts")
    ap.add_argument("--rounds", type=int, default=9, help="interleaved rounds per figure")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error(f"--rounds must be >= 1, got {args.rounds}")
    ok, why = simd.available()
    if not ok:
        raise SystemExit(f"the C++ kernels are not available here: {why}")
    with tempfile.TemporaryDirectory(prefix="tt-base-") as tmp:
        libs = {"base": base_library(args.base, Path(tmp)), "change": simd.library()}
    info = simd.build_info()
    blocks = {k: v for k, v in (info["blocks"] or {}).items() if k != "source"}
    print(f"base: {args.base} | change: the working tree | {info['microkernel']} | {blocks}")
    # NumPy's OpenBLAS picks its kernels at load time, from OPENBLAS_CORETYPE if the environment
    # sets it: a Haswell-held anchor beside the AVX-512 path is not like for like (tito bench sets
    # it per path; this tool keeps the caller's environment and says what ran).
    kernels = ", ".join(f"{b['internal_api']} kernels {b['architecture']}" for b in blas_info())
    held = os.environ.get("OPENBLAS_CORETYPE")
    print(f"anchor: NumPy's BLAS, {kernels or 'none seen'}"
          + (f" (OPENBLAS_CORETYPE={held} from the environment)" if held else ""))  # fmt: skip
    print(
        f"{'kernel':>22} | {'threads':>7} | {'base':>6} | {'change':>6} | {'anchor':>14} | "
        f"{'change/base':>11} | {'base/anchor':>11} | {'change/anchor':>13}  (ratios paired)"
    )
    cases = [lambda t, n=n: gemm_case(libs, n, t) for n in args.sizes]
    if args.gelu is not None:
        cases.append(lambda t: bias_gelu_case(libs, *args.gelu, t))
    for make in cases:
        for t in args.threads:
            case = make(t)
            r = compare(case, t, args.rounds)
            anchor = f"{case.anchor} {r['anchor']:.1f}"
            print(f"{case.label:>22} | {t:>7} | {r['base']:>6.1f} | {r['change']:>6.1f} | "
                  f"{anchor:>14} | {r['change / base']:>10.3f}x | {r['base / anchor']:>10.3f}x | "
                  f"{r['change / anchor']:>12.3f}x  {case.unit}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
