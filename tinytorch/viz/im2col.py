"""im2col, drawn: one receptive field of the padded input and the row of the column matrix it becomes."""

from __future__ import annotations

import colorsys
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from tinytorch.nn.geometry import conv_geometry
from tinytorch.viz import style


@dataclass(frozen=True)
class Im2colLayout:
    c: int
    h: int
    w: int
    k: int
    stride: int
    padding: int
    oh: int
    ow: int
    field: tuple[int, int]  # (out row, out col) of the highlighted receptive field
    row: int  # its row in the column matrix (image 0): out_row * ow + out_col
    columns: tuple[tuple[int, int, int], ...]  # (channel, kernel row, kernel col) per column
    source: np.ndarray  # (oh*ow, C*k*k, 3) int: (channel, padded y, padded x) each entry copies

    def is_padding(self, y: int, x: int) -> bool:
        p = self.padding
        return not (p <= y < p + self.h and p <= x < p + self.w)


def im2col_layout(
    c: int,
    h: int,
    w: int,
    k: int,
    stride: int = 1,
    padding: int = 0,
    field: tuple[int, int] = (0, 0),
) -> Im2colLayout:
    """Where every entry of the (oh*ow, C*k*k) column matrix comes from in the padded input."""
    geo = conv_geometry((1, c, h, w), k, stride, padding, where="im2col_layout")
    oy, ox = field
    if not (0 <= oy < geo.oh and 0 <= ox < geo.ow):
        raise ValueError(f"field must lie in the {geo.oh}x{geo.ow} output, got {field!r}")
    columns = tuple((ch, ky, kx) for ch in range(c) for ky in range(k) for kx in range(k))
    # The obvious loops on purpose: this is the picture's ground truth, not a kernel.
    source = np.zeros((geo.oh * geo.ow, len(columns), 3), dtype=np.int64)
    for r in range(geo.oh):
        for q in range(geo.ow):
            for j, (ch, ky, kx) in enumerate(columns):
                source[r * geo.ow + q, j] = (ch, r * stride + ky, q * stride + kx)
    return Im2colLayout(
        c, h, w, k, stride, padding, geo.oh, geo.ow, (oy, ox), oy * geo.ow + ox, columns, source
    )


def column_colour(channel: int, ky: int, kx: int, k: int) -> tuple[float, float, float]:
    """Hue by channel, lightness by position in the kernel, so (c, ky, kx) order is visible."""
    hue = (0.58 + 0.29 * channel) % 1.0
    lightness = 0.35 + 0.45 * (ky * k + kx) / max(k * k - 1, 1)
    return colorsys.hls_to_rgb(hue, lightness, 0.75)


FIG_HEIGHT_IN = 5.8  # the explorer's Output reserves this height, so a redraw never jumps


def draw_im2col(
    c: int = 2,
    h: int = 5,
    w: int = 5,
    k: int = 3,
    stride: int = 1,
    padding: int = 1,
    field: tuple[int, int] = (1, 1),
) -> Figure:
    """Top: padded input, one panel per channel, the field highlighted. Below: the column matrix."""
    lay = im2col_layout(c, h, w, k, stride, padding, field)
    hp, wp = h + 2 * padding, w + 2 * padding
    n_rows, n_cols = lay.oh * lay.ow, len(lay.columns)
    fig = plt.figure(figsize=(style.MAX_WIDTH_IN, FIG_HEIGHT_IN))
    # Channels side by side on top (never thumbnails beside a wide matrix), the matrix below.
    grid = fig.add_gridspec(2, c, height_ratios=[1.15, 1])
    oy, ox = lay.field
    y0, x0 = oy * stride, ox * stride
    # Points per padded pixel: a channel panel is at most 1/c of the width and ~40% of the height.
    cell_pt = min(style.MAX_WIDTH_IN * 72 * 0.9 / c / wp, FIG_HEIGHT_IN * 72 * 0.4 / hp)
    zero_size = max(style.MIN_FONT_PT, min(12.0, 0.55 * cell_pt))

    for ch in range(c):
        ax = fig.add_subplot(grid[0, ch])
        for y in range(hp):
            for x in range(wp):
                inside = y0 <= y < y0 + k and x0 <= x < x0 + k
                if inside:
                    face = column_colour(ch, y - y0, x - x0, k)
                else:
                    face = "#d9d9d9" if lay.is_padding(y, x) else "white"
                ax.add_patch(
                    Rectangle((x, y), 1, 1, facecolor=face, edgecolor="grey", linewidth=0.5)
                )
                if lay.is_padding(y, x) and cell_pt >= 1.2 * style.MIN_FONT_PT:
                    ax.text(
                        x + 0.5,
                        y + 0.5,
                        "0",
                        ha="center",
                        va="center",
                        fontsize=zero_size,
                        color="#555555",
                    )
        ax.add_patch(Rectangle((x0, y0), k, k, fill=False, edgecolor="red", linewidth=2))
        if ox > 0:  # the previous output column's window: the stride is the jump between them
            ax.add_patch(
                Rectangle(
                    (x0 - stride, y0),
                    k,
                    k,
                    fill=False,
                    edgecolor="black",
                    linestyle="--",
                    linewidth=1.2,
                )
            )
        ax.set_xlim(0, wp)
        ax.set_ylim(hp, 0)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(f"channel {ch}", fontsize=style.FONT_PT)

    ax = fig.add_subplot(grid[1, :])
    for r in range(n_rows):
        for j, (ch, ky, kx) in enumerate(lay.columns):
            face = column_colour(ch, ky, kx, k) if r == lay.row else (0.96, 0.96, 0.96)
            ax.add_patch(Rectangle((j, r), 1, 1, facecolor=face, edgecolor="white", linewidth=0.3))
    ax.add_patch(Rectangle((0, lay.row), n_cols, 1, fill=False, edgecolor="red", linewidth=2))
    ax.set_xlim(0, n_cols)
    ax.set_ylim(n_rows, 0)
    ax.set_aspect("auto")
    # Upright labels one line (1.3 x the font) apart at most: every column, or every step-th.
    fit = int(style.MAX_WIDTH_IN * 72 * 0.85 / (1.3 * style.MIN_FONT_PT))
    step = max(1, -(-n_cols // fit))
    ax.set_xticks([j + 0.5 for j in range(0, n_cols, step)])
    ax.set_xticklabels(
        [f"{ch},{ky},{kx}" for ch, ky, kx in lay.columns[::step]],
        rotation=90,
        fontsize=style.MIN_FONT_PT,
    )
    ax.set_yticks([lay.row + 0.5])
    ax.set_yticklabels([f"row {lay.row}"], fontsize=style.MIN_FONT_PT)
    ax.set_xlabel("columns: (channel, kernel row, kernel col)", fontsize=style.FONT_PT)
    ax.set_title(f"column matrix ({n_rows} x {n_cols}) = (oh*ow, C*k*k)", fontsize=style.FONT_PT)
    dashed = (
        f"; dashed: the window of output ({oy}, {ox - 1}), {stride} to the left" if ox > 0 else ""
    )
    fig.suptitle(
        f"im2col, k={k}, stride {stride}, padding {padding} (each channel padded to {hp}x{wp})\n"
        f"output ({oy}, {ox}) reads the red window and becomes row {oy}*{lay.ow}+{ox} = {lay.row}"
        + dashed,
        fontsize=style.FONT_PT,
    )
    fig.tight_layout()
    return fig
