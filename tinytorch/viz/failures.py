"""Where a failing case is wrong, drawn from the evidence its result carries (never re-running it).

`draw_case(result)` reads `result.evidence` (milestone07/evidence.py computed it in the parent from
the output the sandbox returned) and picks the drawing by its "kind":
- tiled_matmul: |error| of C with the tile grid, and the fraction of each k's product missing;
- im2col: the column matrix's labels, expected vs actual (channel, kernel row, kernel col);
- col2im: the per-pixel |error| beside the count of windows covering each pixel;
- fused_gelu: |error| against x on a log scale, with the float64 formula;
- im2col_conv2d: the |error| at each output position, under im2col's wrong column order when a
  check found one (first_failures attaches it);
- shape: a wrong shape, yours over the expected one (e.g. col2im's uncropped padding).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from tinytorch.viz import style

SMALL = style.MIN_FONT_PT
BIG = style.FONT_PT

_TINY = 1e-12  # the floor of a log-scale error axis (an exact value has error 0)


def _get(result: Any, name: str) -> Any:
    return result.get(name) if isinstance(result, Mapping) else getattr(result, name, None)


def _matrix(values: Any) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def _colorbar(fig: Figure, ax: Any, image: Any, label: str) -> None:
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    bar.set_label(label, fontsize=SMALL)
    bar.ax.tick_params(labelsize=SMALL)


def _draw_matmul(ev: Mapping[str, Any], name: str) -> Figure:
    m, k, n = ev["shape"]
    tile, pool = ev["tile"], ev["pool"]
    err = _matrix(ev["error"])
    panels = 2 if ev.get("k_missing") is not None else 1
    width = style.MAX_WIDTH_IN * (1.0 if panels == 2 else 0.6)
    fig, axes = plt.subplots(1, panels, figsize=(width, 4.4), squeeze=False)
    ax = axes[0, 0]
    image = ax.imshow(
        err, cmap=style.ERROR_CMAP, extent=(0, n, m, 0), interpolation="nearest", vmin=0
    )
    _colorbar(fig, ax, image, "|C - A @ B|")
    for edge in range(tile, m, tile):
        ax.axhline(edge, color="#1f77b4", linewidth=0.8)
    for edge in range(tile, n, tile):
        ax.axvline(edge, color="#1f77b4", linewidth=0.8)
    ax.set_xlim(0, n)
    ax.set_ylim(m, 0)
    ax.set_xlabel("N (column of C)")
    ax.set_ylabel("M (row of C)")
    pooled = f", max over {pool}x{pool} blocks" if pool > 1 else ""
    ax.set_title(f"|error| of C ({m}x{n}), tile grid {tile}{pooled}", fontsize=SMALL)
    if panels == 2:
        ax = axes[0, 1]
        missing = np.array(ev["k_missing"], dtype=np.float64)
        colours = [style.FAIL_COLOUR if abs(v) > 0.5 else "#9ecae1" for v in missing]
        ax.bar(np.arange(k), missing, width=1.0, color=colours, edgecolor="none")
        for edge in range(tile, k, tile):
            ax.axvline(edge - 0.5, color="#1f77b4", linewidth=0.8)
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_xlim(-0.5, k - 0.5)
        ax.set_ylim(min(-0.2, missing.min() - 0.1), max(1.2, missing.max() + 0.1))
        ax.set_xlabel(f"k (0..{k - 1}); blue: K-block edges every {tile}", fontsize=SMALL)
        ax.set_ylabel("share of A[:, k] B[k, :] missing", fontsize=SMALL)
        ax.set_title("1 = that k's product was left out, 0 = summed once", fontsize=SMALL)
    fig.suptitle(f"{name}: where C is wrong", fontsize=BIG)
    fig.tight_layout()
    return fig


def _cell_pt(ax: Any, shape: tuple[int, ...]) -> float:
    """Points per cell of an image of `shape` drawn in `ax` (its smaller side), as laid out now."""
    ax.figure.tight_layout()
    ax.apply_aspect()
    box = ax.get_window_extent()
    scale = 72 / ax.figure.dpi
    return min(box.width * scale / shape[1], box.height * scale / shape[0])


def _label(lab: Any) -> str:
    return "none" if lab is None else "{},{},{}".format(*lab)


IM2COL_MAX_COLUMNS = 40  # upright 9 pt labels, ~0.2 in apart, across MAX_WIDTH_IN


def _column_window(ev: Mapping[str, Any]) -> range:
    """At most IM2COL_MAX_COLUMNS columns, starting a little before the first wrong one."""
    total = len(ev["expected"])
    first = min(ev["wrong"], default=0)
    lo = max(0, min(first - 2, total - IM2COL_MAX_COLUMNS))
    return range(lo, min(total, lo + IM2COL_MAX_COLUMNS))


def _column_order(ax: Any, ev: Mapping[str, Any]) -> None:
    """Each column's label, expected above yours; the columns in the wrong place in red."""
    expected, actual, wrong = ev["expected"], ev["actual"], set(ev["wrong"])
    total, shown = len(expected), _column_window(ev)
    for j in shown:
        bad = j in wrong
        face = "#f4a582" if bad else "#d1e5f0"
        ax.add_patch(plt.Rectangle((j, 0), 1, 2, facecolor=face, edgecolor="white"))
        ax.text(
            j + 0.5, 0.5, _label(expected[j]), ha="center", va="center", rotation=90, fontsize=SMALL
        )
        ax.text(
            j + 0.5,
            1.5,
            _label(actual[j]),
            ha="center",
            va="center",
            rotation=90,
            fontsize=SMALL,
            fontweight="bold" if bad else "normal",
            color="#b2182b" if bad else "black",
        )
    ax.set_xlim(shown.start, shown.stop)
    ax.set_ylim(2, 0)
    ax.set_yticks([0.5, 1.5])
    ax.set_yticklabels(["expected", "yours"], fontsize=SMALL)
    step = 1 if len(shown) <= 20 else 2  # column numbers at least ~14 pt apart
    ax.set_xticks(np.arange(shown.start, shown.stop, step) + 0.5)
    ax.set_xticklabels([str(j) for j in range(shown.start, shown.stop, step)], fontsize=SMALL)
    part = "" if len(shown) == total else f" (columns {shown.start}..{shown.stop - 1} of {total})"
    ax.set_xlabel(
        f"column of im2col(x){part}; labels (channel, kernel row, kernel col)", fontsize=SMALL
    )


def _order_width(ev: Mapping[str, Any]) -> float:
    return min(style.MAX_WIDTH_IN, max(6.0, 0.22 * len(_column_window(ev)) + 1.6))


def _draw_im2col(ev: Mapping[str, Any], name: str) -> Figure:
    fig, ax = plt.subplots(figsize=(_order_width(ev), 3.6))
    _column_order(ax, ev)
    ax.set_title(
        f"{name}: {len(ev['wrong'])} of {len(ev['expected'])} columns hold another column's"
        " values (red)",
        fontsize=BIG,
    )
    fig.tight_layout()
    return fig


def _draw_col2im(ev: Mapping[str, Any], name: str) -> Figure:
    err, cover = _matrix(ev["error"]), np.array(ev["coverage"])
    g = ev["geometry"]
    fig, (ax_e, ax_c) = plt.subplots(1, 2, figsize=(style.MAX_WIDTH_IN, 4.2))
    image = ax_e.imshow(err, cmap=style.ERROR_CMAP, vmin=0, interpolation="nearest")
    _colorbar(fig, ax_e, image, "|error|")
    ax_e.set_title("|col2im(g) - reference| per pixel\n(max over N, C)", fontsize=SMALL)
    image = ax_c.imshow(cover, cmap="Blues", vmin=0, interpolation="nearest")
    _colorbar(fig, ax_c, image, "windows")
    if _cell_pt(ax_c, cover.shape) >= 1.4 * SMALL:  # a count only where it fits its cell
        for (i, j), v in np.ndenumerate(cover):
            shade = "white" if v > cover.max() / 2 else "black"  # readable on dark cells
            ax_c.text(j, i, str(v), ha="center", va="center", fontsize=SMALL, color=shade)
    ax_c.set_title("windows covering each pixel:\ncol2im must ADD that many", fontsize=SMALL)
    fig.suptitle(f"{name} (k={g['k']}, stride {g['stride']}, padding {g['padding']})", fontsize=BIG)
    fig.tight_layout()
    return fig


def _draw_gelu(ev: Mapping[str, Any], name: str) -> Figure:
    x = np.array(ev["x"], dtype=np.float64)
    err = np.array([np.nan if e is None else e for e in ev["error"]], dtype=np.float64)
    ref = np.array(ev["ref"], dtype=np.float64)
    fig, (ax_e, ax_r) = plt.subplots(2, 1, figsize=(8, 5.2), sharex=True)
    finite = np.isfinite(err)
    ax_e.semilogy(
        x[finite], np.maximum(err[finite], _TINY), ".", markersize=3, color=style.FAIL_COLOUR
    )
    if (~finite).any():
        top = np.nanmax(err[finite]) if finite.any() else 1.0
        ax_e.plot(x[~finite], np.full((~finite).sum(), max(top, 1.0) * 10), "kx", label="NaN/inf")
        ax_e.legend(fontsize=SMALL)
    ax_e.axhline(1e-5, color="grey", linestyle="--", linewidth=0.8)
    ax_e.text(x.min(), 1.2e-5, "tolerance scale 1e-5", fontsize=SMALL, color="grey")
    ax_e.set_ylabel("|yours - float64 formula|")
    ax_e.set_title(f"{name}: error against x (log scale)", fontsize=BIG)
    ax_r.plot(x, ref, color="#1f77b4", linewidth=1.2, label="float64 tanh-GELU")
    ax_r.set_xlabel("x")
    ax_r.set_ylabel("GELU(x)")
    ax_r.legend(fontsize=SMALL)
    fig.tight_layout()
    return fig


def _draw_conv(ev: Mapping[str, Any], name: str) -> Figure:
    """The |error| per output position; with the im2col column order when it is the cause.

    `ev["columns"]` (an "im2col" evidence, attached by first_failures from the im2col layout
    check) puts the wrong column order above the error map: the map says where the output is
    wrong, the order says why.
    """
    err = _matrix(ev["error"])
    order = ev.get("columns")
    if order is not None:
        fig = plt.figure(figsize=(style.MAX_WIDTH_IN, 7.6))
        grid = fig.add_gridspec(2, 3, height_ratios=[1, 1.35], width_ratios=[1, 1.6, 1])
        ax_o, ax = fig.add_subplot(grid[0, :]), fig.add_subplot(grid[1, 1])  # the map centred
        _column_order(ax_o, order)
        ax_o.set_title(
            f"the cause: im2col's column order, {len(order['wrong'])} of"
            f" {len(order['expected'])} columns hold another column's values (red)",
            fontsize=SMALL,
        )
    else:
        fig, ax = plt.subplots(figsize=(6.5, 4.4))
    image = ax.imshow(err, cmap=style.ERROR_CMAP, vmin=0, interpolation="nearest")
    _colorbar(fig, ax, image, "|error|")
    if _cell_pt(ax, err.shape) >= 3.2 * SMALL:  # "5e-07" fits its cell
        for (i, j), v in np.ndenumerate(err):
            ax.text(j, i, f"{v:.1g}", ha="center", va="center", fontsize=SMALL)
    ax.set_xlabel("output column")
    ax.set_ylabel("output row")
    if order is not None:
        ax.set_title("the effect: |error| per output position (max over N, F)", fontsize=SMALL)
        fig.suptitle(f"{name}: wrong because im2col's columns are out of order", fontsize=BIG)
    else:
        ax.set_title(f"{name}: |error| per output position (max over N, F)", fontsize=BIG)
    fig.tight_layout()
    return fig


def _draw_shape(ev: Mapping[str, Any], name: str) -> Figure:
    exp, got = list(ev["expected"]), list(ev["actual"])
    (eh, ew), (gh, gw) = ([1, *s][-2:] for s in (exp, got))
    fig, ax = plt.subplots(figsize=(6.5, 4.4))
    ax.add_patch(plt.Rectangle((0, 0), gw, gh, facecolor="#f4a582", edgecolor="#b2182b", lw=2))
    ax.add_patch(plt.Rectangle((0, 0), ew, eh, fill=False, edgecolor="#2166ac", lw=2.5, ls="--"))
    ax.set_xlim(0, max(ew, gw) * 1.05)
    ax.set_ylim(max(eh, gh) * 1.05, 0)
    ax.set_aspect("equal")
    ax.set_xlabel("last axis")
    ax.set_ylabel("second-to-last axis")
    ax.legend(
        [
            plt.Rectangle((0, 0), 1, 1, fc="#f4a582"),
            plt.Rectangle((0, 0), 1, 1, fill=False, ec="#2166ac", ls="--"),
        ],
        [f"yours {tuple(got)}", f"expected {tuple(exp)}"],
        fontsize=SMALL,
        loc="lower right",
    )
    ax.set_title(f"{name}: wrong shape", fontsize=BIG)
    fig.tight_layout()
    return fig


_DRAW = {
    "shape": _draw_shape,
    "tiled_matmul": _draw_matmul,
    "im2col": _draw_im2col,
    "col2im": _draw_col2im,
    "fused_gelu": _draw_gelu,
    "im2col_conv2d": _draw_conv,
}


def draw_case(result: Any) -> Figure | None:
    """Where `result` (a CaseResult or CheckResult, or its JSON dict) is wrong; None if no evidence."""
    ev = _get(result, "evidence")
    if ev is None:
        return None
    if not isinstance(ev, Mapping) or ev.get("kind") not in _DRAW:
        raise ValueError(f"draw_case: evidence must be a dict with a 'kind' in {sorted(_DRAW)}")
    return _DRAW[ev["kind"]](ev, str(_get(result, "name")))


def _column_evidence(checks: Any) -> Mapping[str, Any] | None:
    """The im2col column order evidence of a failing check (the im2col layout check), if any."""
    for c in checks:
        ev = _get(c, "evidence")
        if isinstance(ev, Mapping) and ev.get("kind") == "im2col" and ev.get("wrong"):
            return ev
    return None


class _WithColumns:
    """A conv case whose drawing also shows the im2col column order that makes it wrong."""

    def __init__(self, result: Any, columns: Mapping[str, Any]) -> None:
        self.name, self.group = _get(result, "name"), _get(result, "group")
        self.evidence = {**_get(result, "evidence"), "columns": dict(columns)}


def first_failures(cases: Any, checks: Any = (), *, merge: bool = False) -> list[Any]:
    """The first failing case with evidence in each group, then each failing check with evidence.

    A failing im2col_conv2d case drawn as an error map also shows im2col's column order when a
    check found it wrong. With `merge`, that check is not drawn again on its own (the notebook
    says each thing once); without it, every failure keeps a drawing of its own (tito --plots).
    """
    checks = list(checks)
    columns = _column_evidence(checks)
    seen: set[str] = set()
    out = []
    merged = False
    for c in cases:
        ev = _get(c, "evidence")
        if ev is not None and _get(c, "group") not in seen:
            seen.add(_get(c, "group"))
            if columns is not None and ev.get("kind") == "im2col_conv2d":
                c, merged = _WithColumns(c, columns), True
            out.append(c)
    drop = columns if merge and merged else None
    return out + [
        c for c in checks if _get(c, "evidence") is not None and _get(c, "evidence") is not drop
    ]


def show_failures(cases: Any, checks: Any = ()) -> int:
    """Draw and show first_failures(..., merge=True) in a notebook; returns how many.

    Each figure is shown by itself (never every open pyplot figure) and closed.
    """
    from IPython.display import display

    shown = 0
    for r in first_failures(cases, checks, merge=True):
        fig = draw_case(r)
        if fig is not None:
            display(fig)
            plt.close(fig)
            shown += 1
    return shown


def failure_pngs(cases: Any, checks: Any) -> list[tuple[str, bytes]]:
    """draw_case of first_failures(...) as PNG bytes, each with its file name (the case's name,
    slashes and spaces replaced): the caller writes them where, and how, it must."""
    import io

    drawn = []
    for r in first_failures(cases, checks):
        fig = draw_case(r)
        if fig is None:
            continue
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        plt.close(fig)
        drawn.append(
            (str(_get(r, "name")).replace("/", "__").replace(" ", "_") + ".png", buf.getvalue())
        )
    return drawn


def save_failure_plots(cases: Any, checks: Any, folder: str | Path) -> list[Path]:
    """failure_pngs(...) written into `folder` (created); returns the paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, png in failure_pngs(cases, checks):
        (folder / name).write_bytes(png)
        written.append(folder / name)
    return written
