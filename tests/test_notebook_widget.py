"""The tile-size widget: core ipywidgets only, renders with its defaults, refreshes on change."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import ipywidgets as w
import pytest

from tinytorch.viz.widget import DEFAULT_TILES, SHAPES, TileHeatmap

CORE = (w.VBox, w.HBox, w.SelectMultiple, w.HTML, w.Output)


class FakeGrid:
    """Stands in for check_matmul_grid: fails every odd tile size, records each call."""

    def __init__(self):
        self.calls = []

    def __call__(self, impl, shapes, tile_sizes, *, seed=0, timeout=5.0):
        self.calls.append((impl, list(shapes), list(tile_sizes), seed, timeout))
        return [
            SimpleNamespace(status="fail" if t % 2 else "pass", max_error=0.5 if t % 2 else 0.0)
            for _ in shapes
            for t in tile_sizes
        ]


def _walk(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from _walk(child)


def test_renders_with_defaults_using_core_widgets_only():
    grid = FakeGrid()
    heat = TileHeatmap("student.py", seed=3, timeout=2.0, grid=grid)
    assert grid.calls == [("student.py", [tuple(s) for s in SHAPES], sorted(DEFAULT_TILES), 3, 2.0)]
    assert all(isinstance(x, CORE) for x in _walk(heat.widget))
    assert heat.last is not None and heat.last.status.shape == (len(SHAPES), len(DEFAULT_TILES))
    odd = sum(t % 2 for t in DEFAULT_TILES)
    passed = len(SHAPES) * (len(DEFAULT_TILES) - odd)
    assert f"<b>{passed}/{len(SHAPES) * len(DEFAULT_TILES)}</b>" in heat.status.value


def test_changing_tile_sizes_refreshes_the_heatmap():
    grid = FakeGrid()
    heat = TileHeatmap("m", grid=grid)
    heat.tiles.value = ("8", "16")
    assert grid.calls[-1][2] == [8, 16]
    assert heat.last.status.tolist() == [[1, 1]] * len(SHAPES)
    heat.shapes.value = heat.shapes.options[:2]
    assert grid.calls[-1][1] == [tuple(s) for s in SHAPES[:2]]
    assert heat.last.status.shape == (2, 2)


def test_empty_selection_asks_for_a_pick_without_running():
    grid = FakeGrid()
    heat = TileHeatmap("m", grid=grid)
    heat.tiles.value = ()
    assert len(grid.calls) == 1 and heat.last is None
    assert "Pick at least one" in heat.status.value


def test_a_failing_grid_is_shown_not_raised():
    def broken(*args, **kwargs):
        raise RuntimeError("child process died")

    heat = TileHeatmap("m", grid=broken)
    assert heat.last is None and "child process died" in heat.status.value


def test_rejects_unknown_default_tiles_naming_them():
    with pytest.raises(ValueError, match="selected_tiles"):
        TileHeatmap("m", selected_tiles=(6,), grid=FakeGrid())
