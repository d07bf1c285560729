"""Part B timings, drawn: GFLOP/s and GB/s bars per backend, and a roofline under the ceilings.

Figures come from the rows only: each row carries its flops and bytes as numbers and its flags
(see tinytorch.bench.part_b). Ceilings are tinytorch.profiling's, measured by Part B in rounds
spread over its run. Rows that are "incorrect" or "not_credible" are never drawn, only listed;
the charts also guard themselves: a row above 1.2 x the ceiling it is drawn against
(profiling.credible) is listed with why, never drawn, flagged or not. "noisy" bars are hatched and
labelled "noisy: rerun", and so is any baseline below a student on the same problem (bars and
roofline points alike: roofline_points takes throughput_table's mask). A ceiling whose rounds
moved says so in its label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.text import Text

from tinytorch.profiling import Ceilings, measure_ceilings
from tinytorch.profiling.credible import above_ceiling, above_ceiling_reason, bounded_by_cpu
from tinytorch.viz import style

__all__ = [
    "Ceilings",
    "RooflinePoint",
    "ThroughputTable",
    "draw_roofline",
    "draw_throughput",
    "draw_tile_throughput",
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


def _over(row: Any, ceilings: Ceilings | None) -> str | None:
    """Why the row's rate cannot be drawn against `ceilings` (above 1.2 x), or None."""
    rate = _rate(row)
    if ceilings is None or rate is None or row.status != "ok" or not bounded_by_cpu(row.backend):
        return None
    compute = row.kind == "gemm"
    ceiling = ceilings.gflops if compute else ceilings.gbps
    if not above_ceiling(rate, ceiling):
        return None
    name = "peak" if compute else "copy bandwidth"
    return above_ceiling_reason(rate, ceiling, UNITS[row.kind][1], name)


def _credited(row: Any, ceilings: Ceilings | None = None) -> bool:
    flags = set(getattr(row, "flags", []) or [])
    return (
        row.status == "ok"
        and _rate(row) is not None
        and not flags & set(NOT_CREDITED)
        and _over(row, ceilings) is None
    )


def throughput_table(
    rows: Sequence[Any], kind: str, ceilings: Ceilings | None = None
) -> ThroughputTable:
    """The credited rows of one kind as a problems x backends matrix, with a noisy mask; with
    `ceilings`, a row above 1.2 x its ceiling is left out, flagged or not."""
    if kind not in UNITS:
        raise ValueError(f"kind must be one of {sorted(UNITS)}, got {kind!r}")
    mine = [r for r in rows if r.kind == kind]
    problems = tuple(dict.fromkeys(r.problem for r in mine))
    backends = tuple(dict.fromkeys(r.backend for r in mine if _credited(r, ceilings)))
    values = np.full((len(problems), len(backends)), np.nan)
    noisy = np.zeros(values.shape, dtype=bool)
    for r in mine:
        if _credited(r, ceilings):
            i, j = problems.index(r.problem), backends.index(r.backend)
            values[i, j] = float(_rate(r))
            noisy[i, j] = "noisy" in (getattr(r, "flags", []) or [])
    student = np.array([b.startswith("student") for b in backends], dtype=bool)
    for i in range(len(problems)):  # the plot's own guard: a baseline below a student is noisy
        best = np.nanmax(values[i, student], initial=-np.inf) if student.any() else -np.inf
        noisy[i] |= ~student & (values[i] < best)
    return ThroughputTable(kind, UNITS[kind][1], problems, backends, values, noisy)


def not_timed(rows: Sequence[Any], ceilings: Ceilings | None = None) -> list[str]:
    """One line per backend that gave no credited timing, with its full reason (deduplicated);
    with `ceilings`, each row above 1.2 x its ceiling too."""
    lines: dict[str, None] = {}
    for r in rows:
        over = _over(r, ceilings)
        if over is not None and not set(getattr(r, "flags", []) or []) & set(NOT_CREDITED):
            lines[f"{r.backend} [{r.problem}]: not drawn, {over}"] = None
            continue
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


def _roof(ceilings: Ceilings, intensity: float) -> float:
    """The roof at `intensity` (FLOP/byte): min(peak, intensity x bandwidth), GFLOP/s."""
    return min(ceilings.gflops, intensity * ceilings.gbps)


def above_roof(rows: Sequence[Any], ceilings: Ceilings) -> list[str]:
    """One line per credited row whose point would sit above 1.2 x the roof, with why."""
    out = []
    for r in rows:
        if not _credited(r) or not r.ms or not r.flops or not r.bytes:
            continue
        if not bounded_by_cpu(r.backend):  # a GPU: above this CPU's roof, and rightly so
            continue
        gflops, intensity = r.flops / (r.ms * 1e-3) / 1e9, r.flops / r.bytes
        roof = _roof(ceilings, intensity)
        if above_ceiling(gflops, roof):
            why = above_ceiling_reason(gflops, roof, "GFLOP/s", f"roof at {intensity:.3g} FLOP/B")
            out.append(f"{r.backend} [{r.problem}]: not drawn, {why}")
    return out


def roofline_points(rows: Sequence[Any], ceilings: Ceilings | None = None) -> list[RooflinePoint]:
    """A point per credited row, from its own flops and bytes (never parsed from its name); with
    `ceilings`, none above 1.2 x the roof at its intensity.

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
        gflops, intensity = r.flops / (r.ms * 1e-3) / 1e9, r.flops / r.bytes
        over = ceilings is not None and above_ceiling(gflops, _roof(ceilings, intensity))
        if over and bounded_by_cpu(r.backend):
            continue  # listed under the chart by above_roof
        points.append(RooflinePoint(r.backend, r.problem, intensity, gflops, noisy))
    return points


def ceiling_label(ceilings: Ceilings, compute: bool) -> str:
    """ "measured peak 92 GFLOP/s", with "(moved during the run)" when its rounds disagreed."""
    value = ceilings.gflops if compute else ceilings.gbps
    prefix = "fma_gflops_" if compute else "copy_gbs_"
    label = f"{'measured peak' if compute else 'copy bandwidth'} {value:.0f} {'GFLOP/s' if compute else 'GB/s'}"
    moved = any(m.startswith(prefix) for m in ceilings.moved)
    return label + ("\n(moved during the run)" if moved else "")  # two lines: the legend's width


PANEL_HEIGHT_IN = 2.7  # one bar panel; the panels are stacked, each the page's full width
LEGEND_WIDTH_IN = 2.3  # the legends sit right of the data, in about this room


def _bars(ax, table: ThroughputTable, ceiling: float | None, label: str) -> None:
    n_p, n_b = table.values.shape
    width = 0.8 / max(n_b, 1)
    small = style.MIN_FONT_PT
    handles: list[Any] = []
    for j, backend in enumerate(table.backends):
        xs = np.arange(n_p) + (j - (n_b - 1) / 2) * width
        heights = np.nan_to_num(table.values[:, j])
        colour = style.backend_colour(backend)  # the same in every panel and on the roofline
        bars = ax.bar(xs, heights, width, color=colour)
        handles.append(Patch(color=colour, label=backend))  # plain: hatching is "noisy"
        labels = []
        for i, bar in enumerate(bars):
            if table.noisy[i, j]:
                bar.set_hatch("//")
                bar.set_alpha(0.55)
            value = table.values[i, j]
            text = "" if np.isnan(value) else rate_text(value)
            labels.append(f"{text} noisy: rerun" if text and table.noisy[i, j] else text)
        upright = _bar_pt(n_p, width) < _text_pt(labels_of(table))
        texts = ax.bar_label(
            bars,
            labels=[t.replace(" noisy", "\nnoisy") if not upright else t for t in labels],
            fontsize=small,
            rotation=90 if upright else 0,
            padding=2,
        )
        for text in texts:  # readable where the ceiling's line crosses it
            text.set_bbox({"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 0.5})
    if ceiling:  # in the legend, where a long label is never clipped by the axes
        ax.axhline(
            ceiling,
            color="black",
            linestyle="--",
            linewidth=1,
            label=label,
        )
    ax.set_xticks(range(n_p))
    ax.set_xlim(-0.5, n_p - 0.5)
    ax.set_xticklabels(table.problems, fontsize=small)
    ax.tick_params(axis="y", labelsize=small)
    ax.set_ylabel(table.unit, fontsize=style.FONT_PT)
    # Head room for the labels: the tallest, in points, over the axes' height.
    upright = _bar_pt(n_p, width) < _text_pt(labels_of(table))
    tallest = _text_pt(labels_of(table)) if upright else 2.4 * small
    top = np.nanmax(np.append(table.values, ceiling or 0.0), initial=0.0)
    room = min(0.75, (tallest + 8) / ((PANEL_HEIGHT_IN - 0.9) * 72))  # less title, ticks
    ax.set_ylim(0, max(top, 1e-9) / (1 - room))
    if table.noisy.any():
        handles.append(Patch(facecolor="white", edgecolor="grey", hatch="//", label="noisy: rerun"))
    ax.legend(
        handles=[*ax.get_legend_handles_labels()[0], *handles],
        fontsize=small,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        borderaxespad=0.0,
    )


def _bar_pt(n_problems: int, width: float) -> float:
    """A bar's width in points: the axes span the page less the legend and the y labels."""
    axes_pt = (style.MAX_WIDTH_IN - LEGEND_WIDTH_IN - 0.9) * 72
    return axes_pt * width / max(n_problems, 1)


def _text_pt(labels: Sequence[str]) -> float:
    """The longest label's length in points, at MIN_FONT_PT (~0.6 em per character)."""
    return max((len(t) for t in labels), default=0) * 0.6 * style.MIN_FONT_PT


def rate_text(value: float) -> str:
    """A bar's rate as its label says it: whole numbers from 10 up, two significant digits below
    (a 0.45 GB/s bar was labelled "0")."""
    return f"{value:.0f}" if abs(value) >= 10 else f"{value:.2g}"


def labels_of(table: ThroughputTable) -> list[str]:
    """Every bar's label text: its rate, and "noisy: rerun" when flagged."""
    return [
        rate_text(v) + (" noisy: rerun" if z else "")
        for v, z in zip(table.values.ravel(), table.noisy.ravel(), strict=True)
        if not np.isnan(v)
    ]


def draw_throughput(rows: Sequence[Any], ceilings: Ceilings | None = None) -> Figure:
    """GEMM in GFLOP/s, bias+GELU and the fusion lesson (GELU) in GB/s, per backend, stacked."""
    kinds = [k for k in UNITS if any(r.kind == k for r in rows)] or ["gemm"]
    notes = [line for note in not_timed(rows, ceilings) for line in _fit(note)]
    notes_in = 0.3 + 0.17 * len(notes) if notes else 0.0
    height = PANEL_HEIGHT_IN * len(kinds) + notes_in
    fig, axes = plt.subplots(len(kinds), 1, figsize=(style.MAX_WIDTH_IN, height), squeeze=False)
    titles = {"gemm": "GEMM", "bias_gelu": "bias + GELU", "gelu": "GELU: unfused vs fused vs C++"}
    for ax, kind in zip(axes[:, 0], kinds, strict=True):
        compute = kind == "gemm"
        peak = (ceilings.gflops if compute else ceilings.gbps) if ceilings else None
        label = ceiling_label(ceilings, compute) if ceilings else ""
        _bars(ax, throughput_table(rows, kind, ceilings), peak, label)
        ax.set_title(f"{titles[kind]} (higher is better)", fontsize=style.FONT_PT)
    if notes:
        fig.text(
            0.01,
            0.005,
            "not timed or not credited:\n" + "\n".join(notes),
            fontsize=style.MIN_FONT_PT,
            va="bottom",
        )
    fig.tight_layout(rect=(0, notes_in / height, 1, 1))  # the legends included, right of each
    return fig


def _fit(line: str, width: int = 125) -> list[str]:
    """A note as lines of the figure (9 pt text, ~125 characters across 9.4 in), each further
    line indented under the first: a reason is never cut."""
    import textwrap

    return textwrap.wrap(line, width=width, subsequent_indent="    ") or [""]


def _overlaps(box: Any, placed: Sequence[Any]) -> bool:
    return any(box.overlaps(other) for other in placed)


# Offsets (points) tried in turn for a point's number: beside it first, then further out, where
# a thin leader line ties the number to its point.
_NUMBER_OFFSETS = sorted(
    (
        (dx, dy)
        for dx in (7, -7, 20, -20, 34, -34, 50, -50, 68, -68)
        for dy in (0, 6, -6, 12, -12, 19, -19, 27, -27)
    ),
    key=lambda o: (o[0] ** 2 + o[1] ** 2, -o[0]),  # nearest first; right before left
)


def _place_numbers(
    fig: Figure, ax: Any, points: Sequence[RooflinePoint], numbers: list[int]
) -> None:
    """Each point's key number beside it, moved until it overlaps no other number or marker."""
    from matplotlib.transforms import Bbox

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    to_px = ax.transData.transform
    half = 4.0 * fig.dpi / 72  # a marker's half size in pixels (s=40 is ~6.3 pt across)
    placed = [
        Bbox.from_extents(x - half, y - half, x + half, y + half)
        for x, y in (to_px((p.intensity, p.gflops)) for p in points)
    ]
    for p, number in zip(points, numbers, strict=True):
        text = None
        for dx, dy in _NUMBER_OFFSETS:
            if text is not None:
                text.remove()
            far = abs(dx) > 8 or abs(dy) > 7
            text = ax.annotate(
                str(number),
                (p.intensity, p.gflops),
                xytext=(dx, dy),
                textcoords="offset points",
                ha="left" if dx > 0 else "right" if dx < 0 else "center",
                va="center",
                fontsize=style.MIN_FONT_PT,
                fontweight="bold",
                arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.6} if far else None,
            )
            text.update_positions(renderer)  # where the offset puts it, before any draw
            box = Text.get_window_extent(text, renderer).padded(1)  # the number, no leader
            inside = frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)
            if inside and not _overlaps(box, placed):
                break
        placed.append(Text.get_window_extent(text, renderer))


KEY_LINE_IN = 1.35 * style.MIN_FONT_PT / 72  # one line of the roofline's key


def draw_roofline(rows: Sequence[Any], ceilings: Ceilings) -> Figure:
    """GFLOP/s vs FLOP/byte under min(peak compute, intensity x bandwidth).

    Each point carries a number; the key under the axes names it (backend, problem), so no label
    sits on another, and the legend stays right of the data.
    """
    points = roofline_points(rows, ceilings)  # in the rows' order: grouped by problem
    # listed under the key, never drawn; then where the ceilings come from
    notes = [x for n in [*above_roof(rows, ceilings), f"ceilings: {ceilings.how}"] for x in _fit(n)]
    key_rows = -(-len(points) // 2)  # two columns
    key_in = 0.25 + KEY_LINE_IN * (key_rows + len(notes))
    height = 4.6 + key_in
    fig, ax = plt.subplots(figsize=(style.MAX_WIDTH_IN, height))
    lo = min([p.intensity for p in points] + [0.5]) / 2
    hi = max([p.intensity for p in points] + [ceilings.gflops / ceilings.gbps]) * 4
    xs = np.geomspace(lo, hi, 200)
    roof = f"roof: peak {ceilings.gflops:.0f} GFLOP/s,\ncopy {ceilings.gbps:.0f} GB/s"
    roof += "\n(moved during the run)" if ceilings.moved else ""
    ax.plot(
        xs,
        np.minimum(ceilings.gflops, xs * ceilings.gbps),
        color="black",
        linewidth=1.5,
        label=roof,
    )
    markers = {"gemm": "o", "bias_gelu": "s", "gelu": "^"}
    for p in points:
        ax.scatter(
            p.intensity,
            p.gflops,
            color=style.backend_colour(p.backend),
            marker=markers[_kind(rows, p.problem)],
            s=40,
            zorder=3,
            alpha=0.5 if p.noisy else 1.0,
        )
    for backend in dict.fromkeys(p.backend for p in points):
        ax.scatter([], [], color=style.backend_colour(backend), label=backend)
    ax.set_xscale("log")
    ax.set_yscale("log")
    lows = [p.gflops for p in points] + [ceilings.gflops]
    ax.set_ylim(min(lows) / 3, ceilings.gflops * 3)
    ax.set_xlim(lo, hi)
    ax.set_xlabel(
        "arithmetic intensity (FLOP / byte of compulsory traffic)", fontsize=style.FONT_PT
    )
    ax.set_ylabel("GFLOP/s", fontsize=style.FONT_PT)
    ax.tick_params(labelsize=style.MIN_FONT_PT)
    ax.set_title(
        "Roofline (circles GEMM, squares bias+GELU, triangles GELU)", fontsize=style.FONT_PT
    )
    ax.legend(
        fontsize=style.MIN_FONT_PT, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0
    )
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout(rect=(0, key_in / height, 1, 1))  # the legend included, right of the axes
    # The key, under the axes in two columns: "n  backend, problem", in figure coordinates.
    step = KEY_LINE_IN / height
    for i, p in enumerate(points):
        column, line = divmod(i, key_rows)
        x, y = 0.01 + 0.5 * column, (key_in - 0.1) / height - line * step
        name = f"{p.backend}, {p.problem}" + (" (noisy: rerun)" if p.noisy else "")
        name += "" if bounded_by_cpu(p.backend) else " (GPU: not under this roof)"
        for dx, text, weight in ((0.03, str(i + 1), "bold"), (0.04, name, "normal")):
            ax.text(
                x + dx,
                y,
                text,
                transform=fig.transFigure,
                fontsize=style.MIN_FONT_PT,
                fontweight=weight,
                ha="right" if weight == "bold" else "left",
                va="top",
                clip_on=False,
            )
    fig.text(0.01, 0.005, "\n".join(notes), fontsize=style.MIN_FONT_PT, va="bottom")
    _place_numbers(fig, ax, points, list(range(1, len(points) + 1)))
    return fig


def _kind(rows: Sequence[Any], problem: str) -> str:
    return next((r.kind for r in rows if r.problem == problem), "gemm")


# ---- the tile-size timing (the widget's "GFLOP/s vs tile size" view) -----------------------------
TILE_SPEED_SIZE_IN = (7.2, 3.8)  # the widget's speed view
# Where a "noisy: rerun" tag may go around its point (points): above or below, to either side,
# nearest first; the first that stays inside the axes, off the NumPy line and off every other tag
# and marker wins. A tag beside the last tile used to run out of the axes under the legend.
_TAG_OFFSETS = sorted(
    ((dx, dy) for dx in (6, -6, 0) for dy in (8, -8, 16, -16, 26, -26, 38, -38)),
    key=lambda o: (abs(o[1]), o[0] == 0, -o[0]),
)


def _place_tags(
    fig: Figure,
    ax: Any,
    points: Sequence[tuple[float, float]],
    markers: Sequence[tuple[float, float]],
    line_y: float | None,
) -> list[Any]:
    """A "noisy: rerun" tag beside each of `points`, clear of the axes' edges, every marker, the
    NumPy line at `line_y` (data units) and each other; returns the tags."""
    from matplotlib.transforms import Bbox

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    to_px = ax.transData.transform
    half = 4.0 * fig.dpi / 72
    placed = [
        Bbox.from_extents(x - half, y - half, x + half, y + half)
        for x, y in (to_px(p) for p in markers)
    ]
    line_px = to_px((1.0, line_y))[1] if line_y is not None else None
    tags = []
    for p in sorted(points, key=lambda q: -q[0]):  # the last tile first: it has least room
        tag = None
        for dx, dy in _TAG_OFFSETS:
            if tag is not None:
                tag.remove()
            tag = ax.annotate(
                "noisy: rerun",
                p,
                xytext=(dx, dy),
                textcoords="offset points",
                ha="left" if dx > 0 else "right" if dx < 0 else "center",
                va="bottom" if dy > 0 else "top",
                fontsize=style.MIN_FONT_PT,
                bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "pad": 0.5},
                arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.6}
                if abs(dy) > 8
                else None,  # a far tag is tied to its point
            )
            tag.update_positions(renderer)
            box = Text.get_window_extent(tag, renderer).padded(2)
            inside = frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)
            y = to_px(p)[1]  # the tag stays on its point's side of the line, never across it
            crossed = line_px is not None and (
                box.y1 >= line_px if y < line_px else box.y0 <= line_px
            )
            if inside and not crossed and not _overlaps(box, placed):
                break
        placed.append(Text.get_window_extent(tag, renderer))
        tags.append(tag)
    return tags


def draw_tile_throughput(data: dict[str, Any]) -> Figure:
    """GFLOP/s against tile size (log 2), NumPy's BLAS as a line: Python overhead vs cache.

    `data` is tile_throughput's (tinytorch.viz.widget). A noisy figure is drawn hollow and tagged
    "noisy: rerun" beside it, inside the axes and off the NumPy line; so is the NumPy line when it
    is flagged or lies below any of your tile sizes (a busy machine, never a slow BLAS).
    """
    fig, ax = plt.subplots(figsize=TILE_SPEED_SIZE_IN)
    mine, blas = style.backend_colour("student"), style.backend_colour("numpy")
    noisy_at = data.get("noisy") or [False] * len(data["tiles"])
    points = [
        (t, g, bool(z))
        for t, g, z in zip(data["tiles"], data["gflops"], noisy_at, strict=True)
        if g is not None
    ]
    ax.plot([t for t, _, _ in points], [g for _, g, _ in points], "-", color=mine)
    for t, g, z in points:
        ax.plot(t, g, "o", color=mine, markerfacecolor="white" if z else mine)
    ax.plot([], [], "o-", color=mine, label="your tiled_matmul")
    numpy, noisy = data.get("numpy_gflops"), False
    if numpy is not None:
        below = any(g > numpy for _, g, _ in points)  # the plot's own guard, as in the bars
        noisy = bool(data.get("numpy_noisy")) or below
        label = "NumPy (BLAS)" + (", noisy: rerun" if noisy else "")
        ax.axhline(numpy, color=blas, linestyle="--", alpha=0.5 if noisy else 1.0, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(data["tiles"])
    ax.set_xticklabels([str(t) for t in data["tiles"]])
    tiles = [t for t in data["tiles"] if t > 0]
    if tiles:  # half a tile step of room either side: a point's tag fits inside the axes
        ax.set_xlim(min(tiles) / 1.5, max(tiles) * 1.5)
    values = [g for _, g, _ in points] + ([numpy] if numpy is not None else [])
    if values:  # room above and below for tags
        ax.set_ylim(min(values) / 2.5, max(values) * 2.5)
    ax.set_xlabel("tile_size")
    ax.set_ylabel("GFLOP/s (median of samples)")
    n = data["size"]
    ax.set_title(
        f"{n}x{n} @ {n}x{n}: small tiles pay Python overhead per block, big ones lose the cache",
        fontsize=style.FONT_PT,
    )
    ax.tick_params(labelsize=style.MIN_FONT_PT)
    ax.legend(fontsize=style.MIN_FONT_PT, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    shaky = noisy or any(z for _, _, z in points)
    if shaky:
        from tinytorch.profiling.load import NOISY_LOAD

        loads = [v for v in [*(data.get("load") or []), data.get("numpy_load")] if v is not None]
        busiest = max(loads, default=0.0)
        busy = f"; other work kept {busiest:.1f} cores busy" if busiest > NOISY_LOAD else ""
        fig.text(
            0.01,
            0.01,
            f"noisy: rerun this view when the machine is quiet{busy}",
            fontsize=style.MIN_FONT_PT,
        )
    fig.tight_layout(rect=(0, 0.05, 1, 1) if shaky else (0, 0, 1, 1))
    _place_tags(fig, ax, [(t, g) for t, g, z in points if z], [(t, g) for t, g, _ in points], numpy)
    return fig
