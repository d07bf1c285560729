"""Ragged tiles: how a blocked C = A @ B covers (M, N) with tiles and walks K in blocks."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from tinytorch.viz import style

# One colour per tile kind, shared by the figure and its legend.
# No red or green: those mean fail and pass (viz/style.py); the corner tile is framed in
# style.HIGHLIGHT_COLOUR.
TILE_COLOURS = {
    "full": "#9ecae1",
    "ragged_m": "#fdae6b",
    "ragged_n": "#bcbddc",
    "ragged_mn": "#e377c2",
}
TILE_LABELS = {
    "full": "full tile",
    "ragged_m": "ragged on M (last tile row)",
    "ragged_n": "ragged on N (last tile column)",
    "ragged_mn": "ragged on M and N (corner)",
}


@dataclass(frozen=True)
class Block:
    """One half-open span [start, start + size) of an axis cut into tiles."""

    start: int
    size: int
    ragged: bool  # shorter than the tile: the last span of an axis that is not a multiple


@dataclass(frozen=True)
class OutputTile:
    row: Block  # span on M
    col: Block  # span on N

    @property
    def kind(self) -> str:
        if self.row.ragged and self.col.ragged:
            return "ragged_mn"
        if self.row.ragged:
            return "ragged_m"
        if self.col.ragged:
            return "ragged_n"
        return "full"


@dataclass(frozen=True)
class TileLayout:
    m: int
    n: int
    k: int
    tile: int
    rows: tuple[Block, ...]  # spans on M
    cols: tuple[Block, ...]  # spans on N
    k_blocks: tuple[Block, ...]  # spans on K, accumulated into every output tile
    tiles: tuple[OutputTile, ...]  # row-major over (rows, cols)

    def count(self, kind: str) -> int:
        return sum(t.kind == kind for t in self.tiles)


def _check_positive(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def axis_blocks(length: int, tile: int) -> tuple[Block, ...]:
    """Spans of range(length) in steps of `tile`; the last one is short when tile does not divide."""
    length = _check_positive(length, "length")
    tile = _check_positive(tile, "tile")
    return tuple(
        Block(start, min(tile, length - start), min(tile, length - start) < tile)
        for start in range(0, length, tile)
    )


def tile_layout(m: int, n: int, k: int, tile: int) -> TileLayout:
    """The tiles of C (M, N) = A (M, K) @ B (K, N) for a square `tile`, ragged edges included."""
    m, n, k = (_check_positive(v, name) for v, name in ((m, "m"), (n, "n"), (k, "k")))
    tile = _check_positive(tile, "tile")
    rows, cols, k_blocks = axis_blocks(m, tile), axis_blocks(n, tile), axis_blocks(k, tile)
    tiles = tuple(OutputTile(r, c) for r in rows for c in cols)
    return TileLayout(m, n, k, tile, rows, cols, k_blocks, tiles)


def _frame(ax, height: int, width: int, title: str, ylabel: str, xlabel: str) -> None:
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)  # row 0 at the top, as matrices are written
    # True proportions, unless the matrix is a strip (K = 1, a 1-wide C): then it fills its panel.
    ax.set_aspect("equal" if max(height, width) <= 4 * min(height, width) else "auto")
    ax.set_title(title, fontsize=style.FONT_PT)
    ax.set_ylabel(ylabel, fontsize=style.FONT_PT)
    ax.set_xlabel(xlabel, fontsize=style.FONT_PT)
    ax.tick_params(labelsize=style.MIN_FONT_PT)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # entries, never 0.5 of one
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _points_per_unit(ax, along_x: float, along_y: float) -> tuple[float, float]:
    """Points per matrix entry on screen, across x and down y (after layout)."""
    ax.apply_aspect()  # the box an equal aspect leaves, as it will be drawn
    box = ax.get_window_extent()
    scale = 72 / ax.figure.dpi
    return box.width * scale / along_x, box.height * scale / along_y


FIG_HEIGHT_IN = 4.6  # the explorer's Output reserves this height, so a redraw never jumps
# Seconds to draw and render inline (bbox_inches="tight" renders twice), measured on a busy 2-core
# machine: a fixed part, each tile of C as a framed patch, each K-block in A and B.
_COST_BASE_S, _COST_PER_TILE_S, _COST_PER_K_BLOCK_S = 0.4, 1.5e-3, 1e-3


def tiles_cost(m: int, n: int, k: int, tile: int, coarse: bool = False) -> float:
    """Estimated seconds draw_ragged_tiles(m, n, k, tile, coarse) takes to draw and show."""
    lay = tile_layout(m, n, k, tile)
    per_tile = 0.0 if coarse else _COST_PER_TILE_S  # coarse: C is one image
    return _COST_BASE_S + per_tile * len(lay.tiles) + _COST_PER_K_BLOCK_S * 2 * len(lay.k_blocks)


def _spacing_pt(layout: TileLayout) -> float:
    """About how many points apart tile edges fall in a panel a third of the figure wide."""
    return layout.tile * style.MAX_WIDTH_IN * 72 / 3 / max(layout.m, layout.n, layout.k)


def _draw_c_coarse(ax, layout: TileLayout) -> None:
    """C's tiles as one image of their kinds plus the tile edges: the same picture, one artist."""
    from matplotlib.colors import ListedColormap

    kinds = list(TILE_COLOURS)
    codes = np.zeros((layout.m, layout.n), dtype=np.int64)  # (M, N) tile kind of each entry
    for t in layout.tiles:
        rows = slice(t.row.start, t.row.start + t.row.size)
        codes[rows, t.col.start : t.col.start + t.col.size] = kinds.index(t.kind)
    cmap = ListedColormap([TILE_COLOURS[kind] for kind in kinds])
    ax.imshow(
        codes,
        cmap=cmap,
        vmin=-0.5,
        vmax=len(kinds) - 0.5,
        extent=(0, layout.n, layout.m, 0),
        interpolation="nearest",
    )
    # Tile edges only where tiles are at least ~4 pt apart: denser, they would paint C black.
    if _spacing_pt(layout) >= 4:
        for s in layout.rows[1:]:
            ax.axhline(s.start, color="black", linewidth=0.4)
        for s in layout.cols[1:]:
            ax.axvline(s.start, color="black", linewidth=0.4)


def draw_ragged_tiles(m: int, n: int, k: int, tile: int, coarse: bool = False) -> Figure:
    """A (M, K), B (K, N) and C (M, N) cut into tiles; the corner tile of C and the K-blocks it sums.

    `coarse` draws C's tiles as one image (same colours, same edges, no size labels): what the
    explorer asks for when tiles_cost says the full drawing would take too long.
    """
    layout = tile_layout(m, n, k, tile)
    widest = max(k, n)
    # Each panel gets at least a quarter of the widest one's share, so K = 1 is no sliver.
    ratios = [max(k, widest / 4), max(n, widest / 4), max(n, widest / 4)]
    fig, (ax_a, ax_b, ax_c) = plt.subplots(
        1,
        3,
        figsize=(style.MAX_WIDTH_IN, FIG_HEIGHT_IN),
        gridspec_kw={"width_ratios": ratios},
    )
    last_row, last_col = layout.rows[-1], layout.cols[-1]
    n_k = len(layout.k_blocks)

    # C: every output tile, coloured by kind.
    if coarse:
        _draw_c_coarse(ax_c, layout)
    for t in () if coarse else layout.tiles:
        ax_c.add_patch(
            Rectangle(
                (t.col.start, t.row.start),
                t.col.size,
                t.row.size,
                facecolor=TILE_COLOURS[t.kind],
                edgecolor="black",
                linewidth=0.8,
            )
        )
    corner = (last_col.start, last_row.start)
    ax_c.add_patch(
        Rectangle(
            corner,
            last_col.size,
            last_row.size,
            fill=False,
            edgecolor=style.HIGHLIGHT_COLOUR,
            linewidth=2.5,
        )
    )
    title = f"C ({m}x{n}), tile {tile}, coarse" if coarse else f"C = A @ B ({m}x{n}), tile {tile}"
    _frame(ax_c, m, n, title, "M", "N")

    # A and B: the row panel and column panel the corner tile reads, cut into the K-loop blocks.
    shades = plt.get_cmap("Purples")
    colours = [shades(0.3 + 0.6 * i / max(n_k - 1, 1)) for i in range(n_k)]
    for kb, colour in zip(layout.k_blocks, colours, strict=True):
        hatch = "//" if kb.ragged else None
        for ax, xy, size in (
            (ax_a, (kb.start, last_row.start), (kb.size, last_row.size)),
            (ax_b, (last_col.start, kb.start), (last_col.size, kb.size)),
        ):
            ax.add_patch(
                Rectangle(
                    xy, *size, facecolor=colour, edgecolor="black", hatch=hatch, linewidth=0.8
                )
            )
    dense = coarse and _spacing_pt(layout) < 4  # edges would paint the panels grey
    for ax, spans_y, spans_x in (
        (ax_a, layout.rows, layout.k_blocks) if not dense else (ax_a, (), ()),
        (ax_b, layout.k_blocks, layout.cols) if not dense else (ax_b, (), ()),
    ):
        for s in spans_y[1:]:
            ax.axhline(s.start, color="grey", linewidth=0.5)
        for s in spans_x[1:]:
            ax.axvline(s.start, color="grey", linewidth=0.5)
    _frame(ax_a, m, k, f"A ({m}x{k}): row panel", "M", "K")
    _frame(ax_b, k, n, f"B ({k}x{n}): column panel", "K", "N")

    handles = [Rectangle((0, 0), 1, 1, facecolor=TILE_COLOURS[kind]) for kind in TILE_COLOURS]
    labels = [f"{TILE_LABELS[kind]}: {layout.count(kind)}" for kind in TILE_COLOURS]
    if layout.k_blocks[-1].ragged:  # a full last block (the tile divides K) is not ragged
        handles.append(Rectangle((0, 0), 1, 1, facecolor="white", hatch="//", edgecolor="black"))
        labels.append(f"ragged last K-block ({layout.k_blocks[-1].size} of {tile})")
    fig.legend(
        handles, labels, loc="lower center", ncol=3, fontsize=style.MIN_FONT_PT, frameon=False
    )
    products = "1 K-block product" if n_k == 1 else f"{n_k} K-block products"
    fig.suptitle(
        f"The framed corner tile of C sums {products}:\n"
        f"C[i, j] += A[i, k] @ B[k, j] for each k-block (use +=, not =)",
        fontsize=style.FONT_PT,
    )
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    _label_blocks(layout, ax_a, ax_b, None if coarse else ax_c)
    return fig


def _label_blocks(layout: TileLayout, ax_a, ax_b, ax_c) -> None:
    """k0, k1... in the K-blocks and the size in each tile of C, where MIN_FONT_PT text fits."""
    m, n, k, n_k = layout.m, layout.n, layout.k, len(layout.k_blocks)
    last_row, last_col = layout.rows[-1], layout.cols[-1]
    font = style.MIN_FONT_PT
    line = 1.25 * font  # points a one-line label needs across its short side
    a_x, a_y = _points_per_unit(ax_a, k, m)
    b_x, b_y = _points_per_unit(ax_b, n, k)
    for i, kb in enumerate(layout.k_blocks if n_k <= 12 else ()):
        text = f"k{i}"
        colour = "white" if i > (n_k - 1) / 2 else "black"  # readable on dark shades
        wide, tall = kb.size * a_x, last_row.size * a_y  # A's blocks run along x
        if min(wide, tall) >= line:  # horizontal if it fits, else upright
            upright = wide < 0.7 * font * len(text)
            ax_a.text(
                kb.start + kb.size / 2,
                last_row.start + last_row.size / 2,
                text,
                ha="center",
                va="center",
                fontsize=font,
                rotation=90 if upright else 0,
                color=colour,
            )
        wide, tall = last_col.size * b_x, kb.size * b_y  # B's blocks run along y
        if tall >= line and wide >= 0.7 * font * len(text):
            ax_b.text(
                last_col.start + last_col.size / 2,
                kb.start + kb.size / 2,
                text,
                ha="center",
                va="center",
                fontsize=font,
                color=colour,
            )
    if ax_c is None:  # coarse: no per-tile labels
        return
    c_x, c_y = _points_per_unit(ax_c, n, m)
    for t in layout.tiles:
        text = f"{t.row.size}x{t.col.size}"
        if t.col.size * c_x >= 0.65 * font * len(text) and t.row.size * c_y >= line:
            ax_c.text(
                t.col.start + t.col.size / 2,
                t.row.start + t.row.size / 2,
                text,
                ha="center",
                va="center",
                fontsize=font,
            )
