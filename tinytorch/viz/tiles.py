"""Ragged tiles: how a blocked C = A @ B covers (M, N) with tiles and walks K in blocks."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

# One colour per tile kind, shared by the figure and its legend.
TILE_COLOURS = {
    "full": "#9ecae1",
    "ragged_m": "#fdae6b",
    "ragged_n": "#a1d99b",
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
    ax.set_aspect("equal")
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)
    ax.set_xlabel(xlabel)
    ax.tick_params(labelsize=7)


def draw_ragged_tiles(m: int, n: int, k: int, tile: int) -> Figure:
    """A (M, K), B (K, N) and C (M, N) cut into tiles; the corner tile of C and the K-blocks it sums."""
    layout = tile_layout(m, n, k, tile)
    fig, (ax_a, ax_b, ax_c) = plt.subplots(
        1, 3, figsize=(12, 4.2), gridspec_kw={"width_ratios": [k, n, n]}
    )
    last_row, last_col = layout.rows[-1], layout.cols[-1]
    n_k = len(layout.k_blocks)
    # Points per matrix entry: panels share one scale (width ratios are k : n : n), equal aspect.
    unit_pt = min(12 * 72 * 0.85 / (k + 2 * n), 4.2 * 72 * 0.7 / max(m, k))

    # C: every output tile, coloured by kind.
    for t in layout.tiles:
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
        if t.row.size * t.col.size >= 0.02 * m * n:  # label only tiles large enough to read
            ax_c.text(
                t.col.start + t.col.size / 2,
                t.row.start + t.row.size / 2,
                f"{t.row.size}x{t.col.size}",
                ha="center",
                va="center",
                fontsize=7,
            )
    corner = (last_col.start, last_row.start)
    ax_c.add_patch(
        Rectangle(corner, last_col.size, last_row.size, fill=False, edgecolor="red", linewidth=2.5)
    )
    _frame(ax_c, m, n, f"C = A @ B  ({m}x{n}), tile {tile}", "M", "N")

    # A and B: the row panel and column panel the corner tile reads, cut into the K-loop blocks.
    shades = plt.get_cmap("Purples")
    for i, kb in enumerate(layout.k_blocks):
        colour = shades(0.3 + 0.6 * i / max(n_k - 1, 1))
        hatch = "//" if kb.ragged else None
        ax_a.add_patch(
            Rectangle(
                (kb.start, last_row.start),
                kb.size,
                last_row.size,
                facecolor=colour,
                edgecolor="black",
                hatch=hatch,
                linewidth=0.8,
            )
        )
        ax_b.add_patch(
            Rectangle(
                (last_col.start, kb.start),
                last_col.size,
                kb.size,
                facecolor=colour,
                edgecolor="black",
                hatch=hatch,
                linewidth=0.8,
            )
        )
        if n_k <= 12:
            room = kb.size * unit_pt  # points along K for this block's label
            if room >= 9:  # A's blocks run along x: horizontal if wide, else upright
                ax_a.text(
                    kb.start + kb.size / 2,
                    last_row.start + last_row.size / 2,
                    f"k{i}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    rotation=0 if room >= 16 else 90,
                    color="white" if i > (n_k - 1) / 2 else "black",  # readable on dark shades
                )
            if room >= 9:  # B's blocks run along y: a label one line tall fits from 9 points
                ax_b.text(
                    last_col.start + last_col.size / 2,
                    kb.start + kb.size / 2,
                    f"k{i}",
                    ha="center",
                    va="center",
                    fontsize=8 if room >= 11 else 6,
                    color="white" if i > (n_k - 1) / 2 else "black",
                )
    for ax, spans_y, spans_x in (
        (ax_a, layout.rows, layout.k_blocks),
        (ax_b, layout.k_blocks, layout.cols),
    ):
        for s in spans_y[1:]:
            ax.axhline(s.start, color="grey", linewidth=0.5)
        for s in spans_x[1:]:
            ax.axvline(s.start, color="grey", linewidth=0.5)
    _frame(ax_a, m, k, f"A ({m}x{k}): row panel in K-blocks", "M", "K")
    _frame(ax_b, k, n, f"B ({k}x{n}): column panel in K-blocks", "K", "N")

    handles = [Rectangle((0, 0), 1, 1, facecolor=TILE_COLOURS[kind]) for kind in TILE_COLOURS]
    labels = [f"{TILE_LABELS[kind]}: {layout.count(kind)}" for kind in TILE_COLOURS]
    if layout.k_blocks[-1].ragged:  # a full last block (the tile divides K) is not ragged
        handles.append(Rectangle((0, 0), 1, 1, facecolor="white", hatch="//", edgecolor="black"))
        labels.append(f"ragged last K-block ({layout.k_blocks[-1].size} of {tile})")
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, frameon=False)
    products = "1 K-block product" if n_k == 1 else f"{n_k} K-block products"
    fig.suptitle(
        f"The red corner tile of C sums {products}: "
        f"C[i, j] += A[i, k] @ B[k, j] for each k-block (use +=, not =)",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    return fig
