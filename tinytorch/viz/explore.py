"""Interactive drawings: sliders redraw the ragged-tile and im2col figures.

Core ipywidgets only (IntSlider, Output, HTML, HBox/VBox), so they run under ipywidgets 7.7
(Colab) and 8 alike. Each explorer keeps `redraws` and `error` so tests can read its state.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from tinytorch.viz import im2col, style, tiles
from tinytorch.viz.im2col import draw_im2col, im2col_cost
from tinytorch.viz.redraw import BUDGET_S, Redraw
from tinytorch.viz.tiles import draw_ragged_tiles, tiles_cost

COARSE_SAVES = 1.5  # coarsen only a drawing whose coarse form costs at most 1/1.5 of it


class _Explorer:
    """Sliders -> draw(**values) -> the Output, through one viz.redraw.Redraw.

    A ValueError becomes a message, never a traceback; a redraw overtaken by a newer slider
    value is dropped; a drawing estimated above redraw.BUDGET_S (the cost model times how much
    slower the last figure came than it predicted) is drawn coarser (the drawing function's
    `coarse=True`), and the status line says so.
    """

    def __init__(
        self,
        sliders: dict[str, Any],
        draw: Callable[..., Any],
        name: str,
        height_in: float,
        cost: Callable[..., float],
    ) -> None:
        import ipywidgets as w

        self.sliders, self.draw, self.cost = sliders, draw, cost
        self.redraws = 0
        self.error: str | None = None
        self.coarse = False  # the figure on screen was drawn coarse
        self.slowdown = 1.0  # measured seconds / the cost model's, from the last figure shown
        self.status = w.HTML()
        self.out = w.Output()
        self.out.add_class(f"tt-{name}-out")  # a stable handle for the browser test
        self.redraw = Redraw(self.out, self.status)
        # As tall as the figure (drawn at a fixed height): a redraw keeps the page where it was.
        self.out.layout.min_height = f"{round(height_in * style.DPI)}px"
        rows = [w.HBox(list(sliders.values())[i : i + 2]) for i in range(0, len(sliders), 2)]
        self.widget = w.VBox([w.HTML(style.BUSY_CSS), *rows, self.status, self.out])
        self._adjusting = False  # a slider range being moved to follow the geometry: no redraw
        for s in sliders.values():
            s.observe(self._changed, names="value")
        self.follow()
        self.refresh()

    def values(self) -> dict[str, int]:
        return {name: int(s.value) for name, s in self.sliders.items()}

    def _changed(self, _change: dict[str, Any]) -> None:
        if self._adjusting:
            return
        self.follow()
        self.refresh()

    def follow(self) -> None:
        """Move slider ranges that depend on others (none by default)."""

    def kwargs(self) -> dict[str, Any]:
        return self.values()

    def refresh(self) -> None:
        self.redraws += 1
        kwargs = self.kwargs()  # read now: a later slider move is a newer request
        gen = self.redraw.begin("drawing...")  # busy until the figure shows
        try:
            seconds = self.cost(**kwargs) * self.slowdown
            saves = self.cost(**kwargs) > COARSE_SAVES * self.cost(**kwargs, coarse=True)
        except ValueError:  # a geometry with no output: the drawing names it
            seconds, saves = 0.0, False
        coarse = seconds > BUDGET_S and saves  # coarse only where it is much cheaper
        note = (
            f"<i>Drawn coarse: the full drawing would take about {seconds:.0f} s"
            f" (more than {BUDGET_S:.0f} s). Smaller sizes show every label.</i>"
            if coarse
            else ""
        )

        def make() -> Any:
            return self.draw(**kwargs, coarse=True) if coarse else self.draw(**kwargs)

        shown = self.redraw.draw(gen, make, lambda _fig: note)
        if self.redraw.current(gen):
            self.error = None if shown else _plain(self.status.value)
            self.coarse = coarse and shown
        if shown and self.redraw.last_seconds is not None:
            self._learn(self.cost(**kwargs, coarse=coarse), self.redraw.last_seconds)

    def _learn(self, estimated: float, took: float) -> None:
        """How much slower than the cost model this machine draws now (a busy machine or a slow
        browser): the next estimate is scaled by it, so a loaded machine coarsens sooner."""
        self.slowdown = min(max(took / max(estimated, 0.1), 0.5), 20.0)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def _plain(markup: str) -> str:
    """The text of a one-element status line."""
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def _slider(description: str, value: int, low: int, high: int) -> Any:
    import ipywidgets as w

    return w.IntSlider(
        value=value,
        min=low,
        max=high,
        description=description,
        continuous_update=False,  # redraw on release: a figure takes ~0.3 s
        layout=w.Layout(width="440px"),  # a track of about 340 px: one step is several px
        style={"description_width": "70px"},
    )


class TileExplorer(_Explorer):
    """draw_ragged_tiles with sliders for M, N, K and the tile size."""

    def __init__(self, m: int = 37, n: int = 23, k: int = 29, tile: int = 7) -> None:
        super().__init__(
            {
                "m": _slider("M", m, 1, 80),
                "n": _slider("N", n, 1, 80),
                "k": _slider("K", k, 1, 80),
                "tile": _slider("tile", tile, 1, 64),  # the gate's largest tile, 64
            },
            draw_ragged_tiles,
            "tiles",
            tiles.FIG_HEIGHT_IN,
            tiles_cost,
        )


def _in_slider_words(draw: Callable[..., Any]) -> Callable[..., Any]:
    """`draw`, whose ValueError speaks of the sliders, not of our function's name
    ("im2col_layout: kernel_size 5x5 is larger..." reached students as is)."""

    def drawn(**kwargs: Any) -> Any:
        try:
            return draw(**kwargs)
        except ValueError as exc:
            said = str(exc).split(": ", 1)[-1]
            raise ValueError(f"{said}: move k down, or H, W or the padding up") from None

    return drawn


class Im2colExplorer(_Explorer):
    """draw_im2col with C, H, W, k, stride, padding and the output position to highlight."""

    def __init__(
        self, c: int = 2, h: int = 5, w: int = 5, k: int = 3, stride: int = 1, padding: int = 1
    ) -> None:
        super().__init__(
            {
                "c": _slider("C", c, 1, 3),
                "h": _slider("H", h, 2, 9),
                "w": _slider("W", w, 2, 9),
                "k": _slider("k", k, 1, 5),
                "stride": _slider("stride", stride, 1, 3),
                "padding": _slider("padding", padding, 0, 2),
                "out_row": _slider("out row", 0, 0, 8),
                "out_col": _slider("out col", 0, 0, 8),
            },
            _in_slider_words(draw_im2col),
            "im2col",
            im2col.FIG_HEIGHT_IN,
            im2col_cost,
        )

    def output_size(self) -> tuple[int, int]:
        """(oh, ow) of the geometry the sliders set (0 or less: no output)."""
        v = self.values()
        oh = (v["h"] + 2 * v["padding"] - v["k"]) // v["stride"] + 1
        ow = (v["w"] + 2 * v["padding"] - v["k"]) // v["stride"] + 1
        return oh, ow

    def follow(self) -> None:
        """The output position's sliders run over the real output, 0 .. oh-1 and 0 .. ow-1."""
        oh, ow = self.output_size()
        self._adjusting = True
        try:
            for name, size in (("out_row", oh), ("out_col", ow)):
                slider = self.sliders[name]
                slider.max = max(size - 1, 0)  # ipywidgets clamps the value with it
                slider.value = min(slider.value, slider.max)
        finally:
            self._adjusting = False

    def kwargs(self) -> dict[str, Any]:
        v = self.values()
        oh, ow = self.output_size()
        # The highlighted position stays within the output, whatever a caller set.
        v["out_row"] = min(v["out_row"], max(oh - 1, 0))
        v["out_col"] = min(v["out_col"], max(ow - 1, 0))
        return {
            "c": v["c"],
            "h": v["h"],
            "w": v["w"],
            "k": v["k"],
            "stride": v["stride"],
            "padding": v["padding"],
            "field": (v["out_row"], v["out_col"]),
        }
