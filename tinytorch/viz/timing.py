"""Part B timings, drawn: GFLOP/s and GB/s bars per backend, and a roofline against measured ceilings."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

BYTES = 4  # float32
GELU_FLOPS_PER_ELEMENT = (
    10  # bias add, x*x*x (2), 3 mul/add inside tanh's argument, tanh as 1, 1+, *x, *0.5
)


@dataclass(frozen=True)
class Ceilings:
    """What this machine can do, measured: compute (GFLOP/s) and memory bandwidth (GB/s)."""

    gflops: float
    gbps: float
    how: str  # how each figure was measured, shown in the plot


@dataclass(frozen=True)
class ThroughputTable:
    kind: str  # "gemm" | "bias_gelu"
    unit: str  # "GFLOP/s" | "GB/s"
    problems: tuple[str, ...]
    backends: tuple[str, ...]
    values: np.ndarray  # (problems, backends), NaN where a backend has no "ok" timing


def problem_cost(kind: str, problem: str) -> tuple[float, float] | None:
    """(flops, compulsory bytes) of a Part B problem, from its dims, or None when unparseable.

    gemm MxKxN: 2MKN flops; reads A (MK) and B (KN), writes C (MN).
    bias+gelu MxN: ~10 flops per element; reads x (MN) and bias (N), writes y (MN).
    """
    dims = [int(d) for d in re.findall(r"\d+", problem.split(" ", 1)[-1])]
    if kind == "gemm" and len(dims) == 3:
        m, k, n = dims
        return 2.0 * m * k * n, BYTES * (m * k + k * n + m * n)
    if kind == "bias_gelu" and len(dims) == 2:
        m, n = dims
        return GELU_FLOPS_PER_ELEMENT * m * n, BYTES * (2 * m * n + n)
    return None


def throughput_table(rows: Sequence[Any], kind: str) -> ThroughputTable:
    """The "ok" rows of one kind as a problems x backends matrix (GFLOP/s for gemm, GB/s otherwise)."""
    if kind not in ("gemm", "bias_gelu"):
        raise ValueError(f"kind must be 'gemm' or 'bias_gelu', got {kind!r}")
    field, unit = ("gflops", "GFLOP/s") if kind == "gemm" else ("gbps", "GB/s")
    mine = [r for r in rows if r.kind == kind]
    problems = tuple(dict.fromkeys(r.problem for r in mine))
    backends = tuple(dict.fromkeys(r.backend for r in mine if r.status == "ok"))
    values = np.full((len(problems), len(backends)), np.nan)
    for r in mine:
        value = getattr(r, field)
        if r.status == "ok" and value is not None:
            values[problems.index(r.problem), backends.index(r.backend)] = float(value)
    return ThroughputTable(kind, unit, problems, backends, values)


def not_timed(rows: Sequence[Any]) -> list[str]:
    """One line per backend that gave no timing, with its reason (deduplicated, in row order)."""
    lines: dict[str, None] = {}
    for r in rows:
        if r.status != "ok":
            flag = (
                " (bundled kernel disagrees with NumPy: a TinyTorch bug)"
                if r.status == "mismatch"
                else ""
            )
            lines[f"{r.backend} [{r.kind}]: {r.status}{flag}: {r.detail}"] = None
    return list(lines)


def roofline_points(rows: Sequence[Any]) -> list[tuple[str, str, float, float]]:
    """(backend, problem, FLOP/byte, GFLOP/s) for every "ok" row whose problem size is parseable."""
    points = []
    for r in rows:
        cost = problem_cost(r.kind, r.problem)
        if r.status != "ok" or cost is None or not r.ms:
            continue
        flops, nbytes = cost
        points.append((r.backend, r.problem, flops / nbytes, flops / (r.ms * 1e-3) / 1e9))
    return points


def _best_seconds(fn: Any, repeats: int) -> float:
    fn()  # warm-up: page faults, thread pools, caches
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure_ceilings(repeats: int = 5) -> Ceilings:
    """Compute and bandwidth ceilings, best of `repeats`: a ceiling is what the machine CAN do.

    Compute: the higher of the C++ FMA micro-benchmark (when built) and BLAS sgemm at 1024^3.
    Memory: the higher of the C++ parallel copy (when built) and NumPy's copy of 64 MiB (read + write).
    Best-of rather than median because other processes only ever slow a run down.
    """
    a = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
    src = np.ones(16 * 1024 * 1024, dtype=np.float32)  # 64 MiB, far beyond the caches
    dst = np.empty_like(src)
    gflops = 2 * 1024**3 / _best_seconds(lambda: a @ a, repeats) / 1e9
    gbps = 2 * src.nbytes / _best_seconds(lambda: np.copyto(dst, src), repeats) / 1e9
    how = "best of BLAS sgemm 1024^3 / NumPy 64 MiB copy"
    try:
        from tinytorch.extensions import simd

        if simd.available()[0]:
            gflops = max(gflops, *(simd.fma_peak() for _ in range(3)))
            gbps = max(
                gbps, 2 * src.nbytes / _best_seconds(lambda: simd.copy(src, out=dst), repeats) / 1e9
            )
            how = "best of C++ FMA peak, BLAS sgemm; C++ and NumPy 64 MiB copies"
    except Exception as exc:  # noqa: BLE001  (no native build: the NumPy figures stand)
        how += f" (C++ probes failed: {type(exc).__name__})"
    return Ceilings(gflops, gbps, how)


def _bars(ax, table: ThroughputTable, ceiling: float | None, ceiling_label: str) -> None:
    n_p, n_b = table.values.shape
    width = 0.8 / max(n_b, 1)
    colours = plt.get_cmap("tab10")
    for j, backend in enumerate(table.backends):
        xs = np.arange(n_p) + (j - (n_b - 1) / 2) * width
        bars = ax.bar(
            xs, np.nan_to_num(table.values[:, j]), width, label=backend, color=colours(j % 10)
        )
        ax.bar_label(bars, fmt="%.0f", fontsize=6)
    if ceiling:
        ax.axhline(ceiling, color="black", linestyle="--", linewidth=1)
        ax.text(
            n_p - 0.5,
            ceiling,
            f" {ceiling_label} {ceiling:.0f}",
            va="bottom",
            ha="right",
            fontsize=7,
        )
    ax.set_xticks(range(n_p))
    ax.set_xticklabels(table.problems, fontsize=8)
    ax.set_ylabel(table.unit)
    ax.legend(fontsize=7)


def draw_throughput(rows: Sequence[Any], ceilings: Ceilings | None = None) -> Figure:
    """GEMM in GFLOP/s and bias+GELU in GB/s per backend; untimed backends listed with reasons."""
    fig, (ax_g, ax_e) = plt.subplots(1, 2, figsize=(12, 4.2))
    peak_g, peak_b = (ceilings.gflops, ceilings.gbps) if ceilings else (None, None)
    _bars(ax_g, throughput_table(rows, "gemm"), peak_g, "measured peak")
    ax_g.set_title("GEMM (higher is better)", fontsize=10)
    _bars(ax_e, throughput_table(rows, "bias_gelu"), peak_b, "copy bandwidth")
    ax_e.set_title("bias + GELU (higher is better)", fontsize=10)
    notes = not_timed(rows)
    if notes:
        fig.text(0.01, 0.01, "not timed:\n" + "\n".join(notes), fontsize=7, va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.04 + 0.035 * len(notes), 1, 1))
    return fig


def draw_roofline(rows: Sequence[Any], ceilings: Ceilings) -> Figure:
    """GFLOP/s vs FLOP/byte, under min(peak compute, intensity x bandwidth)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    points = roofline_points(rows)
    lo = min([p[2] for p in points] + [0.5]) / 2
    hi = max([p[2] for p in points] + [ceilings.gflops / ceilings.gbps]) * 4
    xs = np.geomspace(lo, hi, 200)
    ax.plot(
        xs,
        np.minimum(ceilings.gflops, xs * ceilings.gbps),
        color="black",
        linewidth=1.5,
        label=f"roof: {ceilings.gflops:.0f} GFLOP/s, {ceilings.gbps:.0f} GB/s",
    )
    colours = plt.get_cmap("tab10")
    markers = {"gemm": "o", "bias_gelu": "s"}
    backends = list(dict.fromkeys(p[0] for p in points))
    for backend, problem, intensity, gflops in points:
        kind = "gemm" if problem.startswith("gemm") else "bias_gelu"
        ax.scatter(
            intensity,
            gflops,
            color=colours(backends.index(backend) % 10),
            marker=markers[kind],
            s=40,
            zorder=3,
        )
    for j, backend in enumerate(backends):
        ax.scatter([], [], color=colours(j % 10), label=backend)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte of compulsory traffic)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(
        f"Roofline (circles GEMM, squares bias+GELU); ceilings: {ceilings.how}", fontsize=9
    )
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig
