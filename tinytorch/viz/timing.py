"""Part B timings, drawn: GFLOP/s and GB/s bars per backend, and a roofline under the ceilings.

Figures come from the rows only: each row carries its flops and bytes as numbers and its flags
(see tinytorch.bench.part_b). Ceilings are tinytorch.profiling's, measured once, by Part B. Rows that
are "incorrect" or "not_credible" are never drawn, only listed; "noisy" bars are hatched and
labelled "noisy: rerun", and so is any baseline below a student on the same problem (bars and
roofline points alike: roofline_points takes throughput_table's mask).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from tinytorch.profiling import Ceilings, measure_ceilings

__all__ = [
    "Ceilings",
    "RooflinePoint",
    "ThroughputTable",
    "draw_roofline",
    "draw_throughput",
    "measure_ceilings",
    "not_timed",
    "roofline_points",
    "throughput_table",
]
UNITS = {"gemm": ("gflops", "GFLOP/s"), "bias_gelu": ("gbps", "GB/s"), "gelu": ("gbps", "GB/s")}
NOT_CREDITED = {
    "incorrect": "incorrect: not credited",
    "not_credible": "not credible: not credited",
}


@dataclass(frozen=True)
class ThroughputTable:
    kind: str  # "gemm" | "bias_gelu" | "gelu"
    unit: str  # "GFLOP/s" | "GB/s"
    problems: tuple[str, ...]
    backends: tuple[str, ...]
    values: np.ndarray  # (problems, backends), NaN where a backend has no credited timing
    noisy: np.ndarray  # (problems, backends) bool: flagged noisy, or a baseline below a student


class RooflinePoint(NamedTuple):
    backend: str
    problem: str
    intensity: float  # FLOP per byte of compulsory traffic
    gflops: float
    noisy: bool


def _rate(row: Any) -> float | None:
    return getattr(row, UNITS[row.kind][0])


def _credited(row: Any) -> bool:
    flags = set(getattr(row, "flags", []) or [])
    return row.status == "ok" and _rate(row) is not None and not flags & set(NOT_CREDITED)


def throughput_table(rows: Sequence[Any], kind: str) -> ThroughputTable:
    """The credited rows of one kind as a problems x backends matrix, with a noisy mask."""
    if kind not in UNITS:
        raise ValueError(f"kind must be one of {sorted(UNITS)}, got {kind!r}")
    mine = [r for r in rows if r.kind == kind]
    problems = tuple(dict.fromkeys(r.problem for r in mine))
    backends = tuple(dict.fromkeys(r.backend for r in mine if _credited(r)))
    values = np.full((len(problems), len(backends)), np.nan)
    noisy = np.zeros(values.shape, dtype=bool)
    for r in mine:
        if _credited(r):
            i, j = problems.index(r.problem), backends.index(r.backend)
            values[i, j] = float(_rate(r))
            noisy[i, j] = "noisy" in (getattr(r, "flags", []) or [])
    student = np.array([b.startswith("student") for b in backends], dtype=bool)
    for i in range(len(problems)):  # the plot's own guard: a baseline below a student is noisy
        best = np.nanmax(values[i, student], initial=-np.inf) if student.any() else -np.inf
        noisy[i] |= ~student & (values[i] < best)
    return ThroughputTable(kind, UNITS[kind][1], problems, backends, values, noisy)


def not_timed(rows: Sequence[Any]) -> list[str]:
    """One line per backend that gave no credited timing, with its full reason (deduplicated)."""
    lines: dict[str, None] = {}
    for r in rows:
        flags = [NOT_CREDITED[f] for f in (getattr(r, "flags", []) or []) if f in NOT_CREDITED]
        if r.status == "unavailable":
            lines[f"{r.backend}: {r.detail}"] = None
        elif r.status != "ok":
            flag = (
                " (bundled kernel disagrees with NumPy: a TinyTorch bug)"
                if r.status == "mismatch"
                else ""
            )
            lines[f"{r.backend} [{r.problem}]: {r.status}{flag}: {r.detail}"] = None
        elif flags:
            lines[f"{r.backend} [{r.problem}]: {', '.join(flags)}"] = None
    return list(lines)


def roofline_points(rows: Sequence[Any]) -> list[RooflinePoint]:
    """A point per credited row, from its own flops and bytes (never parsed from its name).

    Noisy exactly as in throughput_table: flagged, or a baseline below a student on its problem.
    """
    tables = {kind: throughput_table(rows, kind) for kind in {r.kind for r in rows}}
    points = []
    for r in rows:
        if (
            not _credited(r)
            or not r.ms
            or not getattr(r, "flops", None)
            or not getattr(r, "bytes", None)
        ):
            continue
        table = tables[r.kind]
        noisy = bool(table.noisy[table.problems.index(r.problem), table.backends.index(r.backend)])
        points.append(
            RooflinePoint(
                r.backend, r.problem, r.flops / r.bytes, r.flops / (r.ms * 1e-3) / 1e9, noisy
            )
        )
    return points


def _bars(
    ax, table: ThroughputTable, ceiling: float | None, ceiling_label: str, order: list[str]
) -> None:
    n_p, n_b = table.values.shape
    width = 0.8 / max(n_b, 1)
    colours = plt.get_cmap("tab10")
    handles: list[Any] = []
    for j, backend in enumerate(table.backends):
        xs = np.arange(n_p) + (j - (n_b - 1) / 2) * width
        heights = np.nan_to_num(table.values[:, j])
        colour = colours(order.index(backend) % 10)  # one colour per backend in every panel
        bars = ax.bar(xs, heights, width, color=colour)
        handles.append(Patch(color=colour, label=backend))  # plain: hatching is "noisy"
        labels = []
        for i, bar in enumerate(bars):
            if table.noisy[i, j]:
                bar.set_hatch("//")
                bar.set_alpha(0.55)
            value = table.values[i, j]
            text = "" if np.isnan(value) else f"{value:.0f}"
            labels.append(f"{text}\nnoisy: rerun" if text and table.noisy[i, j] else text)
        ax.bar_label(bars, labels=labels, fontsize=6)
    if ceiling:  # in the legend, where a long label is never clipped by the axes
        ax.axhline(
            ceiling,
            color="black",
            linestyle="--",
            linewidth=1,
            label=f"{ceiling_label} {ceiling:.0f} {table.unit}",
        )
    ax.set_xticks(range(n_p))
    ax.set_xticklabels(table.problems, fontsize=8)
    ax.set_ylabel(table.unit)
    ax.margins(y=0.15)  # room for the bar labels above the tallest bar
    if table.noisy.any():
        handles.append(Patch(facecolor="white", edgecolor="grey", hatch="//", label="noisy: rerun"))
    ax.legend(
        handles=[*ax.get_legend_handles_labels()[0], *handles],
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
    )


def draw_throughput(rows: Sequence[Any], ceilings: Ceilings | None = None) -> Figure:
    """GEMM in GFLOP/s, bias+GELU and the fusion lesson (GELU) in GB/s, per backend."""
    kinds = [k for k in UNITS if any(r.kind == k for r in rows)] or ["gemm"]
    fig, axes = plt.subplots(1, len(kinds), figsize=(6.5 * len(kinds), 4.6), squeeze=False)
    titles = {"gemm": "GEMM", "bias_gelu": "bias + GELU", "gelu": "GELU: unfused vs fused vs C++"}
    order = list(dict.fromkeys(r.backend for r in rows))
    for ax, kind in zip(axes[0], kinds, strict=True):
        compute = kind == "gemm"
        peak = (ceilings.gflops if compute else ceilings.gbps) if ceilings else None
        label = "measured peak" if compute else "copy bandwidth"
        _bars(ax, throughput_table(rows, kind), peak, label, order)
        ax.set_title(f"{titles[kind]} (higher is better)", fontsize=10)
    notes = not_timed(rows)
    if notes:
        fig.text(
            0.01,
            0.01,
            "not timed or not credited:\n" + "\n".join(notes),
            fontsize=7,
            va="bottom",
            wrap=True,
        )
    fig.tight_layout(rect=(0, 0.04 + 0.035 * len(notes), 1, 1))
    return fig


def draw_roofline(rows: Sequence[Any], ceilings: Ceilings) -> Figure:
    """GFLOP/s vs FLOP/byte under min(peak compute, intensity x bandwidth); points named."""
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    points = roofline_points(rows)
    lo = min([p.intensity for p in points] + [0.5]) / 2
    hi = max([p.intensity for p in points] + [ceilings.gflops / ceilings.gbps]) * 4
    xs = np.geomspace(lo, hi, 200)
    roof = f"roof: measured peak {ceilings.gflops:.0f} GFLOP/s, copy bandwidth {ceilings.gbps:.0f} GB/s"
    ax.plot(
        xs,
        np.minimum(ceilings.gflops, xs * ceilings.gbps),
        color="black",
        linewidth=1.5,
        label=roof,
    )
    colours = plt.get_cmap("tab10")
    markers = {"gemm": "o", "bias_gelu": "s", "gelu": "^"}
    backends = list(dict.fromkeys(p.backend for p in points))
    kinds = {r.problem: r.kind for r in rows}
    for p in points:
        ax.scatter(
            p.intensity,
            p.gflops,
            color=colours(backends.index(p.backend) % 10),
            marker=markers.get(kinds.get(p.problem, "gemm"), "o"),
            s=40,
            zorder=3,
            alpha=0.5 if p.noisy else 1.0,
        )
        label = f"{p.backend}, {p.problem}" + (" (noisy: rerun)" if p.noisy else "")
        # Points of one problem alternate sides, and the right half's labels go left, so the
        # names neither overlap each other nor run off the axes.
        same = sorted((q for q in points if q.problem == p.problem), key=lambda q: q.gflops)
        left = (same.index(p) % 2 == 1) != (p.intensity > np.sqrt(lo * hi))
        ax.annotate(
            label,
            (p.intensity, p.gflops),
            xytext=(-5, 2) if left else (5, 2),
            textcoords="offset points",
            ha="right" if left else "left",
            fontsize=6,
        )
    for j, backend in enumerate(backends):
        ax.scatter([], [], color=colours(j % 10), label=backend)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte of compulsory traffic)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("Roofline (circles GEMM, squares bias+GELU, triangles GELU)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    fig.text(0.01, 0.005, f"ceilings: {ceilings.how}", fontsize=6)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig
