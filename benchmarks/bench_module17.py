"""Module 17 kernels against the libraries they imitate, timed in one run.

    python benchmarks/bench_module17.py [--repeats 15]

1. tiled_matmul(tile 256) vs np.matmul on 1024^3. Napkin math: 2*1024^3 = 2.15 GFLOP; OpenBLAS on
   2 Zen 3 cores does 150-250 GFLOP/s, so ~9-14 ms. 64 block products of 256^3 each run at nearly
   the same rate; the tiling costs 48 tile additions (256 KiB each) and 64 BLAS calls. Target <= 1.3x.
2. im2col_conv2d vs torch.nn.functional.conv2d (CPU) on N=8, C=64, 56x56, 64 filters 3x3, pad 1.
   2*8*64*56*56*64*9 = 1.85 GFLOP. im2col writes a (576, 25088) float32 matrix (58 MB, ~2-4 ms at
   copy bandwidth), then one GEMM. Target <= 2.5x.

Timing is tinytorch.profiling's, called directly: each pair runs in interleaved rounds (A, B, B,
A, ...), one timed call per round, after one discarded warm-up round, so that machine noise hits
both alike. The GEMM's inputs and both flop counts come from profiling.gemm (the convolution
counted as its im2col GEMM). The headline is the median over rounds of the per-round ratio (the
two calls of a round ran back to back under the same load); medians and bests are printed too.
Correctness is checked before timing.

After each timed call the benchmark idles `--pause` seconds (default 0.15; interleaved's settle).
After a multi-threaded call, OpenBLAS's and torch's worker threads keep spinning for up to ~0.1 s; a call
that starts inside that window shares its cores with them, whichever of the two it is.
`--pause 0` shows that back-to-back figure.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import numpy as np

from tinytorch import profiling
from tinytorch.perf.acceleration import im2col_conv2d, tiled_matmul
from tinytorch.profiling import Timing, interleaved_calls


def timed(fns: dict[str, Callable[[], object]], repeats: int, pause_s: float) -> dict[str, Timing]:
    """tinytorch.profiling.interleaved_calls: one warm-up call of each, then `repeats` rounds of
    one timed call each, with `pause_s` of idle after every call."""
    return interleaved_calls(fns, repeats, default_settle=pause_s)


def report(t: dict[str, Timing], flops: float, ours: str, theirs: str) -> float:
    """Print median and best times; return the median over rounds of ours / theirs.

    Each round's two calls ran back to back, so they saw the same machine load: the median of
    the per-round ratios is steadier on a shared machine than a ratio of separate medians.
    """
    for name, timing in t.items():
        print(
            f"  {name:<8} median {timing.median * 1e3:8.2f} ms  {timing.rate(flops):6.1f} GFLOP/s"
            f"   best {timing.min * 1e3:8.2f} ms  {flops / timing.min / 1e9:6.1f} GFLOP/s"
        )
    a, b = t[ours], t[theirs]
    ratio = statistics.median(x / y for x, y in zip(a.samples, b.samples, strict=True))
    print(
        f"  {ours} / {theirs}: {ratio:.2f}x (median of per-round ratios; ratio of medians "
        f"{a.median / b.median:.2f}x, of bests {a.min / b.min:.2f}x)",
        end="",
    )
    return ratio


def bench_matmul(repeats: int, pause_s: float) -> float:
    n, tile = 1024, 256
    problem = profiling.gemm(n)
    a, b = problem.inputs()  # (M, K), (K, N)
    ref = np.matmul(a, b)
    err = float(np.max(np.abs(tiled_matmul(a, b, tile).data - ref)))
    assert err <= 1e-3, f"tiled_matmul disagrees with np.matmul: max abs error {err}"

    t = timed(
        {"tiled": lambda: tiled_matmul(a, b, tile), "numpy": lambda: np.matmul(a, b)},
        repeats,
        pause_s,
    )
    print(f"tiled_matmul vs np.matmul, {n}^3 float32, tile {tile} (max abs err {err:.1e})")
    ratio = report(t, problem.flops, "tiled", "numpy")
    print("   (target <= 1.3x)")
    return ratio


def bench_conv(repeats: int, pause_s: float) -> float | None:
    try:
        import torch
    except ImportError:
        print("conv: skipped, torch is not installed (pip install 'tinytorch-m07[torch]')")
        return None
    rng = np.random.default_rng(1)
    n, c, hw, o, k, pad = 8, 64, 56, 64, 3, 1
    x = rng.standard_normal((n, c, hw, hw), dtype=np.float32)  # (N, C, H, W)
    w = (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)  # (O,C,k,k)
    b = rng.standard_normal(o, dtype=np.float32)  # (O,)
    xt, wt, bt = (torch.from_numpy(v) for v in (x, w, b))
    with torch.no_grad():
        ref = torch.nn.functional.conv2d(xt, wt, bt, padding=pad).numpy()
        err = float(np.max(np.abs(im2col_conv2d(x, w, b, padding=pad).data - ref)))
        assert err <= 1e-3, f"im2col_conv2d disagrees with torch conv2d: max abs error {err}"
        t = timed(
            {
                "im2col": lambda: im2col_conv2d(x, w, b, padding=pad),
                "torch": lambda: torch.nn.functional.conv2d(xt, wt, bt, padding=pad),
            },
            repeats,
            pause_s,
        )
    flops = profiling.gemm(o, c * k * k, n * hw * hw).flops  # the im2col GEMM: W (O, Ckk) @ cols
    print(
        f"im2col_conv2d vs torch conv2d, N={n} C={c} {hw}x{hw} O={o} {k}x{k} pad {pad} float32 "
        f"(max abs err {err:.1e}; torch {torch.__version__}, {torch.get_num_threads()} threads)"
    )
    ratio = report(t, flops, "im2col", "torch")
    print("   (target <= 2.5x)")
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21, help="timed calls per function")
    parser.add_argument("--pause", type=float, default=0.15, help="seconds idle before each call")
    args = parser.parse_args()
    bench_matmul(args.repeats, args.pause)
    bench_conv(args.repeats, args.pause)


if __name__ == "__main__":
    main()
