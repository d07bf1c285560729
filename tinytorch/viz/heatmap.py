"""Pass/fail heatmap of tiled_matmul: shapes x tile sizes, each cell annotated with its max error."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from tinytorch.viz import style

# Cell codes of the status matrix, and their colours (the colormap is indexed by code + 1).
FAILED, ERRORED, PASSED = 0, -1, 1
STATUS_CODE = {
    "pass": PASSED,
    "fail": FAILED,
}  # every other status (error, timeout, crash...) = ERRORED
# errored, failed, passed: the only grey/red/green meaning a verdict, from viz/style.py
_CMAP = ListedColormap([style.ERROR_COLOUR, style.FAIL_COLOUR, style.PASS_COLOUR])


@dataclass(frozen=True)
class HeatmapData:
    status: np.ndarray  # (shapes, tiles) int: PASSED, FAILED or ERRORED
    max_error: np.ndarray  # (shapes, tiles) float, NaN where no error was measured
    annotations: tuple[tuple[str, ...], ...]  # (shapes, tiles) text for each cell
    row_labels: tuple[str, ...]  # "MxK @ KxN"
    col_labels: tuple[str, ...]  # "tile T"

    @property
    def all_passed(self) -> bool:
        return bool((self.status == PASSED).all())


def shape_label(shape: Sequence[int]) -> str:
    m, k, n = shape
    return f"{m}x{k} @ {k}x{n}"


def heatmap_data(
    results: Sequence[Any], shapes: Sequence[Sequence[int]], tile_sizes: Sequence[int]
) -> HeatmapData:
    """Results (shape-major, as check_matmul_grid returns them) -> status, errors, annotations.

    Reads only `.status` and `.max_error` of each result, so it is pure and testable on stand-ins.
    """
    rows, cols = len(shapes), len(tile_sizes)
    if len(results) != rows * cols:
        raise ValueError(
            f"results must hold one entry per (shape, tile size): expected {rows}x{cols}={rows * cols}, "
            f"got {len(results)}"
        )
    status = np.full((rows, cols), ERRORED, dtype=np.int64)
    max_error = np.full((rows, cols), np.nan)
    notes: list[tuple[str, ...]] = []
    for i in range(rows):
        line = []
        for j in range(cols):
            r = results[i * cols + j]
            status[i, j] = STATUS_CODE.get(r.status, ERRORED)
            if r.max_error is not None:
                max_error[i, j] = float(r.max_error)
            err = "" if r.max_error is None else f"{float(r.max_error):.1e}"
            if r.status == "pass":
                line.append(f"pass\n{err}")
            elif r.status == "fail":
                line.append(f"FAIL\n{err}")
            else:
                line.append(str(r.status).upper())
        notes.append(tuple(line))
    return HeatmapData(
        status,
        max_error,
        tuple(notes),
        tuple(shape_label(s) for s in shapes),
        tuple(f"tile {t}" for t in tile_sizes),
    )


def draw_heatmap(data: HeatmapData, title: str = "tiled_matmul: shapes x tile sizes") -> Figure:
    """Green pass, red fail, grey error/timeout/crash; text gives the max abs error."""
    rows, cols = data.status.shape
    # Row labels take ~1.8 in; each tile column ~1 in, never wider than the page in all.
    width = min(style.MAX_WIDTH_IN, 1.8 + 1.0 * cols)
    fig, ax = plt.subplots(figsize=(width, 1.0 + 0.55 * rows))
    ax.imshow(data.status + 1, cmap=_CMAP, vmin=0, vmax=2, aspect="auto")
    for i in range(rows):
        for j in range(cols):
            ax.text(
                j,
                i,
                data.annotations[i][j],
                ha="center",
                va="center",
                fontsize=style.MIN_FONT_PT,
                color="white",
            )
    ax.set_xticks(range(cols))
    ax.set_xticklabels(data.col_labels, fontsize=style.MIN_FONT_PT)
    ax.set_yticks(range(rows))
    ax.set_yticklabels(data.row_labels, fontsize=style.MIN_FONT_PT)
    ax.set_xticks(np.arange(-0.5, cols), minor=True)
    ax.set_yticks(np.arange(-0.5, rows), minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="minor", length=0)
    passed = int((data.status == PASSED).sum())
    ax.set_title(f"{title}: {passed}/{rows * cols} pass", fontsize=style.FONT_PT)
    fig.tight_layout()
    return fig
