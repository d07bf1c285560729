"""The native-kernel benchmark behind `tito bench`, run in a child per ISA (see cli/bench.py).

`python -m tinytorch.bench.native --out PATH [--quick] [--rounds N]` measures, in this
process, with the ISA that TINYTORCH_SIMD_ISA selected (the parent sets it, and for the AVX2 path
on an AVX-512 CPU also OPENBLAS_CORETYPE=Haswell, before NumPy loads):
  - the machine's ceilings (tinytorch.profiling.measure_ceilings: FMA peak, copy bandwidth);
  - GEMM n x n x n, C++ vs OpenBLAS at 1 and 2 threads, and torch (in its own child);
  - bias+GELU GB/s, C++ vs NumPy vs torch, as a fraction of the copy bandwidth;
  - fused GEMM+bias+GELU vs GEMM then bias+GELU, on 2 threads.
Every figure is also a fraction of its ceiling at its own thread count (see _fractions), and that
ceiling is timed in the row's own rounds: the FMA peak (as the seconds the row's GEMM would take
at it) beside every GEMM, the copy of the row's array beside every bias+GELU. A figure above
1.2 x its ceiling is impossible and withheld with the reason (profiling.credible), and a
same-rounds ceiling that moved from the ceilings block beyond the noise rule is marked.
Every figure is checked against a float64 reference first, then timed with the one policy of
tinytorch.profiling: interleaved rounds (the backends take turns), per-call samples, the median
per round, with a settle pause after multi-threaded samples. A ratio of two figures of one row
(C++ / OpenBLAS, 2t / 1t, bias+GELU / copy, GEMM / the FMA peak of the same rounds) is the
median of its per-round ratios (profiling.paired_speedup): on a shared machine the load moves
between rounds, and both samples of a round saw the same moment.
Napkin math: see tinytorch.profiling.problems (inputs, float64 references, flops and bytes come
from there, as numbers; the torch worker builds its tensors from the same inputs).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tinytorch import profiling
from tinytorch.bench.torch_worker import TorchWorker  # torch in a sandbox child
from tinytorch.compare import compare
from tinytorch.extensions import simd
from tinytorch.machine import blas_libraries
from tinytorch.profiling import LoadMeter, interleaved, paired_speedup, per_call
from tinytorch.profiling.ceilings import FMA_ITERS, FMA_ITERS_QUICK
from tinytorch.profiling.credible import CREDIBLE, above_ceiling_reason, moved

GEMM_SIZES = (256, 512, 1024, 2048)
GELU_SHAPES = ((512, 1024), (4096, 4096))
FUSED_SIZES = (512, 1024)
THREADS = (1, 2)
TORCH_TIMEOUT_S = 120.0  # one torch request; a hung worker becomes "n/a", not a hung benchmark

# After a multi-threaded call OpenBLAS keeps its worker thread spinning for ~0.1-0.2 s (its
# THREAD_TIMEOUT), and libgomp's idle threads (ours, torch's) spin for ~7 ms (measured: CPU time
# burnt while the caller sleeps). A 2-thread FMA loop right after `a @ b` ran at 126 GFLOP/s,
# 0.2 s later at 260. So every multi-threaded sample is followed by a pause longer than its
# backend's spin, and each backend keeps its own defaults.
OPENBLAS_SETTLE_S = 0.25
OPENMP_SETTLE_S = 0.03
# Each round's sample is the MEDIAN of profiling.per_call's per-call samples, not the mean: on a
# VM a 2-thread call after an idle pause sometimes stalls ~4-10 ms while the idle vCPU is woken
# through the hypervisor; per_call's min_calls samples outvote it.


def settle_pauses(names: list[str]) -> dict[str, float]:
    """The pause after each sample that can leave threads spinning: every OpenBLAS one (leaving
    threadpool_limits(1) re-arms its 2-thread pool) and every 2-thread OpenMP one."""
    settle = {name: OPENMP_SETTLE_S for name in names if "2t" in name}
    settle.update({name: OPENBLAS_SETTLE_S for name in names if name.startswith("numpy")})
    return settle


def _numpy_threads(n: int) -> Any:
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=n, user_api="blas")


def blas_info() -> list[dict[str, Any]]:
    """Which BLAS NumPy loaded and which kernels it picked (threadpoolctl's "architecture")."""
    keys = ("internal_api", "version", "architecture", "num_threads", "filepath")
    return [
        {k: lib.get(k) for k in keys} for lib in blas_libraries() if lib.get("user_api") == "blas"
    ]


def check(name: str, got: np.ndarray, ref: np.ndarray, atol: float) -> dict[str, Any]:
    """A correctness record: the max abs error of `got` against the float64 `ref`, and ok (the one
    comparison helper, with an absolute tolerance only)."""
    got_ = compare(got, ref, rtol=0.0, atol=atol, dtype=None)
    err = got_.max_error if got_.max_error is not None else math.inf
    return {"check": name, "max_abs_err": err, "atol": atol, "ok": got_.ok}


def _timed(
    fns: dict[str, Callable[[], float]], rounds: int, torch: TorchWorker | None = None
) -> tuple[dict[str, profiling.Timing], float]:
    """Interleaved rounds under profiling's policy, with the load other processes added.

    The torch worker is ours: the CPU time it reports with its replies is not other work.
    """
    helper = (lambda: torch.cpu_s) if torch is not None else None
    with LoadMeter(helper_cpu=helper) as meter:
        out = interleaved(fns, rounds, settle=settle_pauses(list(fns)))
    return out, meter.load.cores


def _rate(work: float, seconds: float) -> float | None:
    """work / seconds / 1e9 (GFLOP/s or GB/s); None when the sample is missing (NaN)."""
    return None if math.isnan(seconds) else work / seconds / 1e9


def _figures(
    row: dict[str, Any], med: dict[str, profiling.Timing], work: float, load: float
) -> None:
    for name, timing in med.items():
        row[name] = _rate(work, timing.median)
    row["spread"] = {name: timing.spread for name, timing in med.items()}
    row["load"] = load


def run(
    quick: bool = False, progress: Callable[[str], None] | None = None, rounds: int | None = None
) -> dict[str, Any]:
    """Every section, in this process; returns the JSON-ready report."""
    say = progress or (lambda _msg: None)
    ok, reason = simd.available()
    info = simd.build_info()
    report: dict[str, Any] = {
        "quick": quick,
        "isa_requested": os.environ.get("TINYTORCH_SIMD_ISA", "native"),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
        "loadavg_before": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "build": info,
        "kernel": {k: info.get(k) for k in ("isa", "microkernel", "blocks", "threads", "openmp")},
        "blas": blas_info(),
        "checks": [],
    }
    if not ok:
        report["error"] = f"C++ kernels unavailable: {reason}"
        return report
    rounds = rounds or (3 if quick else 9)
    report["rounds"] = rounds
    torch = TorchWorker(timeout=TORCH_TIMEOUT_S)
    report["torch"] = {"available": torch.ok, "reason": torch.reason or f"torch {torch.version}"}
    try:
        say("ceilings: FMA peak and copy bandwidth")
        report["ceilings"] = profiling.measure_ceilings(
            threads=THREADS, quick=quick, rounds=rounds
        ).to_dict()
        say("micro-kernel alone")
        report["ukernel"] = _ukernel_row(rounds, quick, report["ceilings"])
        say("GEMM")
        report["gemm"] = [
            _gemm_row(n, rounds, torch, report["checks"], quick)
            for n in ((256,) if quick else GEMM_SIZES)
        ]
        say("bias+GELU")
        shapes = ((512, 1024),) if quick else GELU_SHAPES
        report["bias_gelu"] = [
            _bias_gelu_row(m, n, rounds, torch, report["checks"]) for m, n in shapes
        ]
        say("fused GEMM+bias+GELU")
        report["fused"] = [
            _fused_row(n, rounds, report["checks"], quick)
            for n in ((256,) if quick else FUSED_SIZES)
        ]
    finally:
        torch.close()
    say("thread check: C++ GEMM with torch loaded in the same process")
    beside = TorchWorker(timeout=TORCH_TIMEOUT_S)
    try:
        report["threads_check"] = _threads_check(256 if quick else 1024, beside, rounds)
    finally:
        beside.close()
    _fractions(report)
    _credibility(report)
    report["targets"] = targets(report)
    report["loadavg_after"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    return report


def _ukernel_row(rounds: int, quick: bool, ceilings: dict[str, Any]) -> dict[str, Any]:
    """The GEMM micro-kernel alone on one thread (simd.ukernel_gflops), with A in L1 and with an
    MC x KC block of A from L2, best of interleaved rounds like the ceilings, and as a fraction
    of the 1-thread FMA peak: the part of the GEMM's distance to the peak that is the kernel's."""
    blocks = simd.build_info().get("blocks") or {}
    slivers = max(1, int(blocks.get("MC", 1)) // max(1, int(blocks.get("MR", 1))))
    flops = 2e8 if quick else 2e9
    fns = {
        "A in L1": lambda: 1.0 / simd.ukernel_gflops(slivers=1, flops=flops),
        "A from L2": lambda: 1.0 / simd.ukernel_gflops(slivers=slivers, flops=flops),
    }
    best = {name: 1.0 / timing.min for name, timing in interleaved(fns, rounds).items()}
    row: dict[str, Any] = {"kc": blocks.get("KC"), "slivers": slivers, **best}
    for name, rate in best.items():
        row[f"{name} / peak"] = rate / ceilings["fma_gflops_1t"]
    return row


def gemm_atol(k: int) -> float:
    """float32 GEMM error bound used by the checks: grows with sqrt(K) for N(0, 1) inputs."""
    return 1e-4 * np.sqrt(k) * 4


def _gemm_row(
    n: int, rounds: int, torch: TorchWorker, checks: list, quick: bool = False
) -> dict[str, Any]:
    problem = profiling.gemm(n)
    a, b = problem.inputs()  # (n, n) each
    ref = problem.reference(a, b)
    checks.append(check(f"gemm {n} c++", simd.matmul(a, b), ref, gemm_atol(n)))
    c1, c2 = np.empty_like(a), np.empty_like(a)  # outputs reused: time the kernels, not mmap
    fns: dict[str, Callable[[], float]] = {}
    for t in THREADS:
        fns[f"c++ {t}t"] = lambda t=t: per_call(lambda: simd.matmul(a, b, threads=t, out=c1)).median

        def blas(t: int = t) -> float:
            with _numpy_threads(t):
                return per_call(lambda: np.matmul(a, b, out=c2)).median

        fns[f"numpy {t}t"] = blas
    if torch.ok:
        fns["torch 2t"] = lambda: torch.time({"op": "gemm", "n": n, "threads": 2})
    iters = FMA_ITERS_QUICK if quick else FMA_ITERS
    for t in THREADS:
        # the FMA peak as the seconds this GEMM would take at it, sampled in the same rounds:
        # the clock the GEMM ran at, not the best moment of the ceilings' own rounds
        fns[f"fma {t}t"] = lambda t=t: problem.flops / (simd.fma_peak(threads=t, iters=iters) * 1e9)
    med, load = _timed(fns, rounds, torch)
    row: dict[str, Any] = {"n": n, "flops": problem.flops}
    _figures(row, med, problem.flops, load)  # GFLOP/s
    # the ratios compare the two samples of each round (profiling.paired_speedup)
    for t in THREADS:
        row[f"ratio {t}t"] = paired_speedup(med[f"c++ {t}t"], med[f"numpy {t}t"])
    row["c++ 2t / 1t"] = paired_speedup(med["c++ 2t"], med["c++ 1t"])
    for t in THREADS:
        row[f"c++ {t}t / fma {t}t"] = paired_speedup(med[f"c++ {t}t"], med[f"fma {t}t"])
    return row


def _bias_gelu_row(m: int, n: int, rounds: int, torch: TorchWorker, checks: list) -> dict[str, Any]:
    problem = profiling.bias_gelu(m, n)
    x, bias = problem.inputs()  # (M, N), (N,)
    ref = problem.reference(x, bias)
    checks.append(check(f"bias_gelu {m}x{n} c++", simd.fused_bias_gelu(x, bias), ref, 1e-6))
    checks.append(check(f"bias_gelu {m}x{n} numpy", profiling.numpy_bias_gelu(x, bias), ref, 1e-5))
    y1, y2, tmp = np.empty_like(x), np.empty_like(x), np.empty_like(x)  # reused, like torch's
    fns: dict[str, Callable[[], float]] = {}
    for t in THREADS:
        fns[f"c++ {t}t"] = lambda t=t: (
            per_call(lambda: simd.fused_bias_gelu(x, bias, threads=t, out=y1)).median
        )
    fns["numpy"] = lambda: (
        per_call(lambda: profiling.numpy_bias_gelu(x, bias, out=y2, tmp=tmp)).median
    )
    fns["c++ 2t alloc"] = lambda: per_call(lambda: simd.fused_bias_gelu(x, bias, threads=2)).median
    # the copy ceiling's kernel on this row's array, timed in the same rounds: the like-for-like
    # bound (the ceilings' copy is the best of its own earlier rounds, on another array)
    y3 = np.empty_like(x)
    for t in THREADS:
        fns[f"copy {t}t"] = lambda t=t: per_call(lambda: simd.copy(x, threads=t, out=y3)).median
    if torch.ok:
        req = {"op": "bias_gelu", "rows": m, "cols": n, "threads": 2, "inplace": True}
        fns["torch 2t"] = lambda: torch.time(req)
        req2 = dict(req, inplace=False)  # F.gelu(x + bias): two fresh tensors per call
        fns["torch 2t alloc"] = lambda: torch.time(req2)
    med, load = _timed(fns, rounds, torch)
    row: dict[str, Any] = {"shape": f"{m}x{n}", "bytes": problem.bytes}
    _figures(row, med, problem.bytes, load)  # GB/s
    copy_bytes = 2.0 * x.nbytes  # read + write, as the ceiling
    for t in THREADS:
        row[f"copy {t}t"] = _rate(copy_bytes, med[f"copy {t}t"].median)
    row["c++ 2t / copy 2t"] = paired_speedup(
        med["c++ 2t"], med["copy 2t"], work_ratio=problem.bytes / copy_bytes
    )
    row["c++ / torch"] = row["c++ 2t"] / row["torch 2t"] if row.get("torch 2t") else None
    alloc = row.get("torch 2t alloc")
    row["c++ / torch alloc"] = row["c++ 2t alloc"] / alloc if alloc else None
    return row


def _fused_row(n: int, rounds: int, checks: list, quick: bool = False) -> dict[str, Any]:
    """At THREADS[-1] (2): the fused and unfused GEMMs are compared with the FMA peak at that
    thread count, timed in the same rounds (the ceilings are measured at 1 and 2 threads only).

    The problem is the two defined ones in a row: profiling.gemm(n), then profiling.bias_gelu
    on its (n, n) output, with their inputs and float64 references."""
    problem, epilogue = profiling.gemm(n), profiling.bias_gelu(n, n)
    (a, b), (_x, bias) = problem.inputs(), epilogue.inputs()
    ref = epilogue.reference(problem.reference(a, b), bias)
    got = simd.matmul_bias_gelu(a, b, bias)
    checks.append(check(f"gemm+bias+gelu {n} fused", got, ref, gemm_atol(n)))
    c1, c2 = np.empty_like(a), np.empty_like(a)
    t = THREADS[-1]
    iters = FMA_ITERS_QUICK if quick else FMA_ITERS

    def unfused() -> np.ndarray:
        return simd.fused_bias_gelu(simd.matmul(a, b, threads=t, out=c2), bias, threads=t, out=c2)

    fns = {
        "fused": lambda: (
            per_call(lambda: simd.matmul_bias_gelu(a, b, bias, threads=t, out=c1)).median
        ),
        "gemm then bias+gelu": lambda: per_call(unfused).median,
        # the FMA peak at the same thread count, as seconds for this GEMM, in the same rounds
        f"fma {t}t": lambda: problem.flops / (simd.fma_peak(threads=t, iters=iters) * 1e9),
    }
    med, load = _timed(fns, rounds)
    row: dict[str, Any] = {"n": n, "threads": t}
    _figures(row, med, problem.flops, load)
    row["speedup"] = med["gemm then bias+gelu"].median / med["fused"].median
    return row


def _threads_check(n: int, torch: TorchWorker, rounds: int) -> dict[str, Any]:
    """C++ GEMM GFLOP/s here (no torch) vs in a process where torch has just run torch.mm.

    torch's libgomp.so.1 and the system one share a soname, so one process gets one runtime,
    whichever loaded first, and torch.set_num_threads() moves its process-wide default. Our
    regions pass num_threads explicitly; the team size recorded here shows they keep it.
    """
    a, b = profiling.gemm(n).inputs()
    out: dict[str, Any] = {"n": n}
    fns: dict[str, Callable[[], float]] = {}
    for t in THREADS:
        fns[f"alone {t}t"] = lambda t=t: per_call(lambda: simd.matmul(a, b, threads=t)).median
        if torch.ok:
            req = {"op": "simd_gemm", "n": n, "threads": t, "repeats": 3}
            fns[f"beside torch {t}t"] = lambda req=req: torch.time(req)
    med, _load = _timed(fns, max(3, rounds // 2), torch)
    for name, timing in med.items():
        out[name] = _rate(profiling.gemm(n).flops, timing.median)
    if torch.ok:
        reply = torch.ask({"op": "simd_gemm", "n": 64, "threads": 2, "repeats": 1}) or {}
        out["team_size_asked_2"] = reply.get("team_size_after_torch_1_thread")
    return out


def _threads(key: str) -> int:
    """The thread count a figure's name states ("c++ 2t alloc" -> 2); 1 where it states none
    (NumPy's ufuncs run on one thread)."""
    found = re.search(r"\b(\d+)t\b", key)
    return int(found.group(1)) if found else 1


def _fractions(report: dict[str, Any]) -> None:
    """Add each figure as a fraction of its ceiling at the same thread count: "<key> / peak" (the
    FMA peak) for GEMM, fused and thread-check GFLOP/s, "<key> / copy" (the copy bandwidth) for
    bias+GELU GB/s. The ceiling is the row's own, timed in its rounds ("fma <t>t", "copy <t>t"),
    where it has one; the ceilings block's otherwise."""
    ceil = report.get("ceilings", {})

    def add(
        row: dict[str, Any], keys: list[str], ceiling: str, suffix: str, own: str | None = None
    ) -> None:
        for key in keys:
            threads = row["threads"] if "threads" in row else _threads(key)
            bound = (row.get(f"{own} {threads}t") if own else None) or ceil.get(
                f"{ceiling}_{threads}t"
            )
            if row.get(key) and bound:
                row[f"{key} / {suffix}"] = row[key] / bound

    for row in report.get("gemm", []):
        rates = [
            k
            for k in row
            if re.search(r"\dt$", k) and not k.startswith(("ratio", "fma")) and "/" not in k
        ]
        add(row, rates, "fma_gflops", "peak", own="fma")
    meta = ("shape", "bytes", "spread", "load", "withheld", "moved")
    for row in report.get("bias_gelu", []):
        rates = [k for k in row if k not in meta and "/" not in k and not k.startswith("copy")]
        add(row, rates, "copy_gbs", "copy", own="copy")
        add(row, [k for k in row if k.startswith("copy") and "/" not in k], "copy_gbs", "copy")
    for row in report.get("fused", []):
        add(row, ["fused", "gemm then bias+gelu"], "fma_gflops", "peak", own="fma")
    check = report.get("threads_check") or {}
    add(
        check, [k for k in check if k.startswith(("alone ", "beside torch "))], "fma_gflops", "peak"
    )


SECTIONS = (
    ("gemm", "peak", "GFLOP/s"),
    ("bias_gelu", "copy", "GB/s"),
    ("fused", "peak", "GFLOP/s"),
)


def _credibility(report: dict[str, Any]) -> None:
    """Withhold every figure above CREDIBLE x its ceiling (row["withheld"][key] = why; the figure
    and its fraction become None), and a 2t / 1t speed-up above CREDIBLE x the thread ratio; mark
    each FMA peak timed in a GEMM row's rounds that moved from the ceilings block beyond the noise
    rule (row["moved"])."""
    ceil = report.get("ceilings", {})
    rows = [(row, suffix, unit) for name, suffix, unit in SECTIONS for row in report.get(name, [])]
    if report.get("threads_check"):
        rows.append((report["threads_check"], "peak", "GFLOP/s"))
    for row, suffix, unit in rows:
        withheld: dict[str, str] = {}
        for key in [k for k in row if k.endswith(f" / {suffix}")]:
            name, frac = key.removesuffix(f" / {suffix}"), row[key]
            if name.startswith(("fma ", "copy ")):  # a ceiling itself: it moves, see below
                continue
            if frac is not None and frac > CREDIBLE and row.get(name):
                ceiling = "copy bandwidth" if suffix == "copy" else "FMA peak"
                bound = row[name] / frac
                withheld[name] = above_ceiling_reason(row[name], bound, unit, ceiling)
                row[name] = row[key] = None
        for t in THREADS:  # a fraction of the same rounds' FMA peak: above 1.2 is impossible too
            key = f"c++ {t}t / fma {t}t"
            if row.get(key) is not None and row[key] > CREDIBLE:
                withheld[key] = (
                    f"{row[key]:.2f} x the FMA peak timed in the same rounds: impossible beyond "
                    f"{CREDIBLE}, so other work slowed the peak's samples"
                )
                row[key] = None
        scaling = row.get("c++ 2t / 1t")
        if scaling is not None and scaling > CREDIBLE * THREADS[-1] / THREADS[0]:
            withheld["c++ 2t / 1t"] = (
                f"2 threads {scaling:.2f}x as fast as 1: impossible beyond {CREDIBLE} x 2, so "
                "other work slowed the 1-thread rounds"
            )
            row["c++ 2t / 1t"] = None
        if withheld:
            row["withheld"] = withheld
        # the FMA peak is the same whatever the problem; a copy is not (a small array's copy
        # runs from cache, the ceilings' 64 MiB one from memory), so only the peak is compared
        shifted = [
            f"fma {t}t"
            for t in THREADS
            if row.get(f"fma {t}t") and ceil.get(f"fma_gflops_{t}t")
            and moved([row[f"fma {t}t"], ceil[f"fma_gflops_{t}t"]])
        ]  # fmt: skip
        if shifted:
            row["moved"] = shifted


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The speed targets, from figures measured in this run: information about this machine."""
    out = []

    def add(target: str, value: float | None, want: float) -> None:
        out.append(
            {
                "target": target,
                "value": value,
                "want": want,
                "met": value is not None and value >= want,
            }
        )

    rows = {row["n"]: row for row in report.get("gemm", [])}
    for n, row in rows.items():
        want = 0.8 if n == 256 else 0.95
        for t in THREADS:
            add(f"C++ GEMM {n} {t}t / OpenBLAS {t}t", row.get(f"ratio {t}t"), want)
        if n >= 1024:
            add(f"C++ GEMM {n} 1t / FMA peak 1t (same rounds)", row.get("c++ 1t / fma 1t"), 0.85)
            add(f"C++ GEMM {n} 2t / 1t", row.get("c++ 2t / 1t"), 1.8)
    for row in report.get("bias_gelu", []):
        if row["shape"] == "4096x4096":
            add(
                "C++ bias+GELU 4096x4096 2t / copy 2t (same rounds)",
                row.get("c++ 2t / copy 2t"),
                0.8,
            )
            add("C++ bias+GELU 4096x4096 / torch (reused buffers)", row.get("c++ / torch"), 4.0)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="the tito bench child: one ISA, this process")
    p.add_argument("--out", required=True, help="write the JSON report here")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--rounds", type=int)
    args = p.parse_args(argv)
    report = run(
        quick=args.quick, rounds=args.rounds, progress=lambda m: print(f"... {m}", file=sys.stderr)
    )
    Path(args.out).write_text(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
