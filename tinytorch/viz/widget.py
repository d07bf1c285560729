"""The tile-size widget: pick tile sizes and shapes, see tiled_matmul's pass/fail heatmap.

Core ipywidgets only (SelectMultiple, Output, HTML, HBox/VBox), so it runs under ipywidgets 7.7
(Colab) and 8 alike. Figures go through `plt.show()` inside the Output, as `%matplotlib inline` needs.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

import matplotlib.pyplot as plt

from tinytorch.viz.heatmap import HeatmapData, draw_heatmap, heatmap_data, shape_label

# (M, K, N): ragged on every axis, 1-wide, K = 1, smaller than a tile, larger than two tiles.
SHAPES: tuple[tuple[int, int, int], ...] = (
    (64, 64, 64),
    (37, 29, 23),
    (1, 33, 17),
    (19, 1, 13),
    (5, 3, 4),
    (150, 131, 140),
)
# No tile 1: on 150x131x140 it is ~3M Python-level block products, a timeout, not a lesson.
TILE_SIZES: tuple[int, ...] = (3, 5, 7, 8, 16, 32, 64, 128)
DEFAULT_TILES: tuple[int, ...] = (7, 16, 64)

Grid = Callable[..., list]  # check_matmul_grid(impl, shapes, tile_sizes, seed=..., timeout=...)


def _default_grid() -> Grid:
    from tinytorch.milestone07 import check_matmul_grid

    return check_matmul_grid


class TileHeatmap:
    """Widget state and its refresh; `.widget` is what the notebook displays."""

    def __init__(
        self,
        impl: str,
        shapes: Sequence[tuple[int, int, int]] = SHAPES,
        tile_sizes: Sequence[int] = TILE_SIZES,
        selected_tiles: Sequence[int] = DEFAULT_TILES,
        *,
        seed: int = 0,
        timeout: float = 5.0,
        grid: Grid | None = None,
    ) -> None:
        import ipywidgets as w

        unknown = [t for t in selected_tiles if t not in tile_sizes]
        if unknown:
            raise ValueError(
                f"selected_tiles must be among tile_sizes {tuple(tile_sizes)}, got {unknown}"
            )
        self.impl, self.seed, self.timeout = impl, seed, timeout
        self.grid = grid or _default_grid()
        self.shapes_by_label = {shape_label(s): tuple(s) for s in shapes}
        self.last: HeatmapData | None = None
        self.refreshes = 0
        self.tiles = w.SelectMultiple(
            options=[str(t) for t in tile_sizes],
            value=[str(t) for t in selected_tiles],
            description="tile sizes",
            rows=min(len(tile_sizes), 8),
        )
        self.shapes = w.SelectMultiple(
            options=list(self.shapes_by_label),
            value=list(self.shapes_by_label),
            description="shapes",
            rows=min(len(shapes), 8),
            layout=w.Layout(width="320px"),
        )
        self.status = w.HTML()
        self.out = w.Output()
        self.widget = w.VBox([w.HBox([self.tiles, self.shapes]), self.status, self.out])
        self.tiles.observe(self._changed, names="value")
        self.shapes.observe(self._changed, names="value")
        self.refresh()

    def _changed(self, _change: dict[str, Any]) -> None:
        self.refresh()

    def selection(self) -> tuple[list[tuple[int, int, int]], list[int]]:
        """The shapes and tile sizes currently picked, in display order."""
        tiles = sorted(int(t) for t in self.tiles.value)
        shapes = [
            self.shapes_by_label[label]
            for label in self.shapes.options
            if label in self.shapes.value
        ]
        return shapes, tiles

    def refresh(self) -> None:
        """Run the grid for the current selection and redraw; never raises into the widget."""
        shapes, tiles = self.selection()
        self.refreshes += 1
        with self.out:
            self.out.clear_output(wait=True)
            if not shapes or not tiles:
                self.last = None
                self.status.value = "<i>Pick at least one tile size and one shape.</i>"
                return
            try:
                results = self.grid(self.impl, shapes, tiles, seed=self.seed, timeout=self.timeout)
                self.last = heatmap_data(results, shapes, tiles)
            except Exception as exc:  # noqa: BLE001  (a broken grid run must not kill the widget)
                self.last = None
                self.status.value = (
                    f"<b style='color:#d62728'>grid failed: {html.escape(repr(exc))}</b>"
                )
                return
            passed = int((self.last.status == 1).sum())
            self.status.value = (
                f"<b>{passed}/{self.last.status.size}</b> (shape, tile) pairs pass "
                f"(refresh {self.refreshes}, tiles {tiles})"
            )
            fig = draw_heatmap(self.last)
            plt.show()
            plt.close(fig)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
