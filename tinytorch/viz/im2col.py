"""im2col, drawn: one receptive field of the padded input, and the whole column matrix it feeds."""

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


FIG_HEIGHT_IN = 7.0  # the explorer's Output reserves this height, so a redraw never jumps
PADDING_GREY = (0.85, 0.85, 0.85)  # a padded zero, in the input and in the column matrix
# Other rows of the matrix blend this far toward white, so the picked one leads.
OTHER_ROWS_FADE = 0.5
# Seconds to draw and render inline, measured on a busy 2-core machine: a fixed part and each
# "0" written in a padded cell (the matrix is one image, whatever its size).
_COST_BASE_S, _COST_PER_TEXT_S = 0.6, 4e-3


def _zero_labels(c: int, h: int, w: int, padding: int) -> int:
    return c * ((h + 2 * padding) * (w + 2 * padding) - h * w)


def im2col_cost(
    c: int = 2,
    h: int = 5,
    w: int = 5,
    k: int = 3,
    stride: int = 1,
    padding: int = 1,
    field: tuple[int, int] = (1, 1),
    coarse: bool = False,
) -> float:
    """Estimated seconds draw_im2col(...) takes to draw and show (ValueError: no output)."""
    conv_geometry((1, c, h, w), k, stride, padding, where="im2col_layout")
    return _COST_BASE_S + (0 if coarse else _COST_PER_TEXT_S * _zero_labels(c, h, w, padding))


def matrix_colours(lay: Im2colLayout) -> np.ndarray:
    """(oh*ow, C*k*k, 3) RGB of the whole column matrix as drawn.

    An entry takes its column's colour (hue: the input channel it copies; lightness: its place
    in the kernel, as in the input panels), or PADDING_GREY when it copies a padded zero. Rows
    other than the picked one are faded toward white, so the picked one stands out.
    """
    rgb = np.array([column_colour(ch, ky, kx, lay.k) for ch, ky, kx in lay.columns])  # (C*k*k, 3)
    out = np.broadcast_to(rgb, (lay.source.shape[0], *rgb.shape)).copy()
    ys, xs = lay.source[..., 1], lay.source[..., 2]  # (rows, cols) padded coordinates
    p = lay.padding
    padded = (ys < p) | (ys >= p + lay.h) | (xs < p) | (xs >= p + lay.w)
    out[padded] = PADDING_GREY
    others = np.arange(out.shape[0]) != lay.row
    out[others] = out[others] + OTHER_ROWS_FADE * (1.0 - out[others])
    return out


def draw_im2col(
    c: int = 2,
    h: int = 5,
    w: int = 5,
    k: int = 3,
    stride: int = 1,
    padding: int = 1,
    field: tuple[int, int] = (1, 1),
    coarse: bool = False,
) -> Figure:
    """Top: padded input, one panel per channel, the field framed. Below: the whole column matrix.

    Every row of the (oh*ow, C*k*k) matrix is drawn, coloured by the channel (hue) and kernel
    position (lightness) it copies, grey where it copies padding; the field's row is framed.
    `coarse` leaves out the "0" written in padded input cells.
    """
    lay = im2col_layout(c, h, w, k, stride, padding, field)
    hp, wp = h + 2 * padding, w + 2 * padding
    n_rows, n_cols = lay.oh * lay.ow, len(lay.columns)
    fig = plt.figure(figsize=(style.MAX_WIDTH_IN, FIG_HEIGHT_IN))
    # Channels side by side on top (never thumbnails beside a wide matrix), the matrix below.
    grid = fig.add_gridspec(2, c, height_ratios=[1.0, 1.25])
    oy, ox = lay.field
    y0, x0 = oy * stride, ox * stride
    # Points per padded pixel: a channel panel is at most 1/c of the width and ~35% of the height.
    cell_pt = min(style.MAX_WIDTH_IN * 72 * 0.9 / c / wp, FIG_HEIGHT_IN * 72 * 0.35 / hp)
    zero_size = max(style.MIN_FONT_PT, min(12.0, 0.55 * cell_pt))

    for ch in range(c):
        ax = fig.add_subplot(grid[0, ch])
        image = np.ones((hp, wp, 3))  # (padded H, padded W, RGB): white inside the image
        for y in range(hp):
            for x in range(wp):
                if lay.is_padding(y, x):  # grey here and in the matrix: a padded zero
                    image[y, x] = PADDING_GREY
                elif y0 <= y < y0 + k and x0 <= x < x0 + k:
                    image[y, x] = column_colour(ch, y - y0, x - x0, k)
        ax.imshow(image, extent=(0, wp, hp, 0), interpolation="nearest")
        for y in range(1, hp):
            ax.axhline(y, color="grey", linewidth=0.5)
        for x in range(1, wp):
            ax.axvline(x, color="grey", linewidth=0.5)
        if not coarse and cell_pt >= 1.2 * style.MIN_FONT_PT:
            for y in range(hp):
                for x in range(wp):
                    if lay.is_padding(y, x):
                        ax.text(
                            x + 0.5,
                            y + 0.5,
                            "0",
                            ha="center",
                            va="center",
                            fontsize=zero_size,
                            color="#555555",
                        )
        ax.add_patch(
            Rectangle((x0, y0), k, k, fill=False, edgecolor=style.HIGHLIGHT_COLOUR, linewidth=2.5)
        )
        if ox > 0:  # the previous output column's window: the stride is the jump between them
            ax.add_patch(
                Rectangle(
                    (x0 - stride, y0),
                    k,
                    k,
                    fill=False,
                    edgecolor="#555555",
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
    ax.imshow(
        matrix_colours(lay),
        extent=(0, n_cols, n_rows, 0),
        aspect="auto",
        interpolation="nearest",
    )
    for j in range(k * k, n_cols, k * k):  # where one channel's columns end and the next begin
        ax.axvline(j, color="white", linewidth=2)
    ax.add_patch(
        Rectangle(
            (0, lay.row), n_cols, 1, fill=False, edgecolor=style.HIGHLIGHT_COLOUR, linewidth=1.0
        )
    )
    ax.set_xlim(0, n_cols)
    ax.set_ylim(n_rows, 0)
    # Upright labels one line (1.3 x the font) apart at most: every column, or every step-th.
    fit = int(style.MAX_WIDTH_IN * 72 * 0.85 / (1.3 * style.MIN_FONT_PT))
    step = max(1, -(-n_cols // fit))
    ax.set_xticks([j + 0.5 for j in range(0, n_cols, step)])
    ax.set_xticklabels(
        [f"{ch},{ky},{kx}" for ch, ky, kx in lay.columns[::step]],
        rotation=90,
        fontsize=style.MIN_FONT_PT,
    )
    # Row numbers about 1.4 lines apart, and the picked row always named.
    rows_fit = max(2, int(FIG_HEIGHT_IN * 72 * 0.4 / (1.4 * style.MIN_FONT_PT)))
    every = max(1, -(-n_rows // rows_fit))
    ticks = [r for r in range(0, n_rows, every) if abs(r - lay.row) >= every]
    ax.set_yticks([r + 0.5 for r in sorted([*ticks, lay.row])])
    ax.set_yticklabels(
        [f"row {r}" if r == lay.row else str(r) for r in sorted([*ticks, lay.row])],
        fontsize=style.MIN_FONT_PT,
    )
    for label in ax.get_yticklabels():
        if label.get_text().startswith("row"):
            label.set_fontweight("bold")
    ax.set_ylabel("row = out row * ow + out col", fontsize=style.FONT_PT)
    ax.set_xlabel(
        "columns: (channel, kernel row, kernel col); grey: a padded zero", fontsize=style.FONT_PT
    )
    ax.set_title(
        f"the whole column matrix ({n_rows} x {n_cols}) = (oh*ow, C*k*k), row {lay.row} framed",
        fontsize=style.FONT_PT,
    )
    dashed = (
        f"; dashed: the window of output ({oy}, {ox - 1}), {stride} to the left" if ox > 0 else ""
    )
    fig.suptitle(
        f"im2col, k={k}, stride {stride}, padding {padding} (each channel padded to {hp}x{wp})\n"
        f"output ({oy}, {ox}) reads the framed window and becomes row {oy}*{lay.ow}+{ox} = {lay.row}"
        + dashed,
        fontsize=style.FONT_PT,
    )
    fig.tight_layout()
    return fig
