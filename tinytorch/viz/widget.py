"""The tile-size widget: pick tile sizes and shapes, see tiled_matmul's pass/fail heatmap.

The kernel is yours or one of a few example bugs (so each bug's pattern is seen before it is
met); a second view times your tiled_matmul across tile sizes on one large shape beside NumPy.
Core ipywidgets only (SelectMultiple, Dropdown, ToggleButtons, Output, HTML, HBox/VBox), so it
runs under ipywidgets 7.7 (Colab) and 8 alike. Each figure is shown inside the Output from the
callback (`%matplotlib inline` renders it there), by viz/redraw.py, which also drops a result that
comes back for an older request.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

from tinytorch.viz import style
from tinytorch.viz.bugs import BUGS, YOURS, bug_grid
from tinytorch.viz.heatmap import HeatmapData, draw_heatmap, heatmap_data, shape_label
from tinytorch.viz.redraw import BUDGET_S, Redraw, over_budget
from tinytorch.viz.timing import TILE_SPEED_SIZE_IN, draw_tile_throughput  # one drawing of it

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
Timer = Callable[..., dict]  # tile_throughput(impl, seed=..., timeout=...)
HEATMAP, SPEED = "pass/fail heatmap", "GFLOP/s vs tile size"
THROUGHPUT_SIZE = 256  # M = K = N of the timed problem: large enough for cache effects to show
THROUGHPUT_TILES = (8, 16, 32, 64, 128, 256)
SPEED_HEIGHT_IN = TILE_SPEED_SIZE_IN[1]  # draw_tile_throughput's figure
# The example bugs are for the heatmap; timing is of the student's kernel only, and says so.
SPEED_TIMES_YOURS = (
    ". <i>This view always times your kernel (IMPL), not the example bug picked in"
    " \u201ckernel\u201d: a bug's speed teaches nothing.</i>"
)
HINT = "Ctrl-click (Cmd-click on a Mac) or Shift-click to pick several."
# SelectMultiple shows picked options in light grey once it loses focus: make them stand out.
STYLE = (
    "<style>.tt-heatmap select option:checked{background:#1f77b4 linear-gradient(#1f77b4,#1f77b4);"
    "color:#fff;font-weight:bold}</style>"
)


def tile_throughput(
    impl: str,
    *,
    size: int = THROUGHPUT_SIZE,
    tiles: Sequence[int] = THROUGHPUT_TILES,
    seed: int = 0,
    timeout: float = 30.0,
    repeats: int = 3,
) -> dict[str, Any]:
    """Your tiled_matmul's GFLOP/s per tile size on profiling.gemm(size), and NumPy's, as Part B
    times them.

    Each tile size is Part B's `student_gemm` task, in a child that loads only your module
    (rotated inputs, every sample checked, tinytorch.profiling's per-call policy: the median of
    at least `repeats` samples, their spread and the load seen); NumPy is Part B's `numpy_gemm`
    task, run here. part_b.flag_rows marks a figure noisy: its samples disagree, the machine was
    busy, or NumPy came out slower than one of your tile sizes.
    Returns {"size", "tiles", and one entry per tile in "gflops", "spread", "load", "noisy";
    "numpy_gflops", "numpy_spread", "numpy_load", "numpy_noisy", "warnings", "errors"}.
    `seed` is taken for the widget's Timer interface: the inputs are Part B's, seeded there.
    """
    from tinytorch import profiling
    from tinytorch.bench import part_b
    from tinytorch.bench.tasks import TASKS

    problem = profiling.gemm(size)
    rows, errors = [], []
    box = part_b.open_box(impl, {})
    try:
        info = box.info or {}
        ready = info.get("status") == "ok" and info["functions"].get("tiled_matmul") == "ok"
        if not ready:
            errors.append(str(info.get("error") or "tiled_matmul is missing"))
        for t in tiles if ready else ():
            reply = part_b.run_task(
                box, "student_gemm", timeout, n=size, repeats=repeats, tile_size=t
            )
            rows.append(part_b.bench_row(problem, f"student tile {t}", reply))
            if rows[-1].status != "ok":
                errors.append(f"tile {t}: {rows[-1].status}: {rows[-1].detail}")
    finally:
        box.close()
    numpy = part_b.bench_row(
        problem, "numpy", {"status": "ok", "value": TASKS["numpy_gemm"](None, n=size, repeats=5)}
    )
    warnings = part_b.flag_rows([*rows, numpy], None, ())
    mine = rows or [None] * len(tiles)
    return {
        "size": size,
        "tiles": list(tiles),
        "gflops": [r and r.gflops for r in mine],
        "spread": [r and r.spread for r in mine],
        "load": [r and r.load for r in mine],
        "noisy": [bool(r and "noisy" in r.flags) for r in mine],
        "numpy_gflops": numpy.gflops,
        "numpy_spread": numpy.spread,
        "numpy_load": numpy.load,
        "numpy_noisy": "noisy" in numpy.flags,
        "warnings": warnings,
        "errors": errors,
    }


def _default_grid() -> Grid:
    from tinytorch.milestone07 import check_matmul_grid

    return check_matmul_grid


def block_products(shapes: Sequence[tuple[int, int, int]], tiles: Sequence[int]) -> int:
    """How many tile products a tiled_matmul computes over every (shape, tile) pair.

    Each is one Python-level `A[i0:i1, k0:k1] @ B[k0:k1, j0:j1]`, so its count, not the flops,
    sets the time: (150, 131, 140) at tile 3 is 50 * 44 * 47 = 103,400 of them.
    """
    return sum(-(-m // t) * -(-k // t) * -(-n // t) for m, k, n in shapes for t in tiles)


# Seconds per block product and per grid run (the child's start), measured on a quiet 2-core
# machine with the reference; each run of this widget refines the per-product figure for the
# kernel it ran (a student's pure-Python loops are slower, and the estimate learns it).
SECONDS_PER_BLOCK = 10e-6
GRID_START_S = 0.8
SPEED_REPEATS = 4  # tile_throughput's 3 timed samples and one warm-up


def _worst_pair(shapes: Sequence[tuple[int, int, int]], tiles: Sequence[int]) -> str:
    shape, tile = max(
        ((s, t) for s in shapes for t in tiles), key=lambda st: block_products([st[0]], [st[1]])
    )
    return f"tile {tile} on {shape_label(shape)}"


class TileHeatmap:
    """Widget state and its refresh; `.widget` is what the notebook displays.

    Every refresh goes through one viz.redraw.Redraw: a result that comes back for an older
    request (the dropdown changed meanwhile) is dropped, so the figure, its title and the status
    line always describe the newest request.
    """

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
        timer: Timer | None = None,
    ) -> None:
        import ipywidgets as w

        unknown = [t for t in selected_tiles if t not in tile_sizes]
        if unknown:
            raise ValueError(
                f"selected_tiles must be among tile_sizes {tuple(tile_sizes)}, got {unknown}"
            )
        self.impl, self.seed, self.timeout = impl, seed, timeout
        self.student_grid = grid or _default_grid()
        self.timer = timer or tile_throughput
        self.shapes_by_label = {shape_label(s): tuple(s) for s in shapes}
        self.last: HeatmapData | None = None
        self.last_speed: dict[str, Any] | None = None
        self.refreshes = 0
        self.shown: str | None = None  # what the Output holds now: HEATMAP, SPEED or None
        self.seconds_per_block: dict[str, float] = {}  # kernel name -> measured, see estimate
        self.source = w.Dropdown(
            options=[YOURS, *BUGS],
            value=YOURS,
            description="kernel",
            layout=w.Layout(width="360px"),
        )
        self.view = w.ToggleButtons(options=[HEATMAP, SPEED], value=HEATMAP)
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
        self.out.add_class("tt-heatmap-out")  # a stable handle for the browser test
        self.redraw = Redraw(self.out, self.status)
        # The taller of its two figures: a redraw keeps the page where it was.
        tallest = max(1.0 + 0.55 * len(self.shapes_by_label), SPEED_HEIGHT_IN)
        self.out.layout.min_height = f"{round(tallest * style.DPI)}px"
        hint = w.HTML(f"{STYLE}{style.BUSY_CSS}<small>{HINT}</small>")
        picks = w.VBox([w.HBox([self.tiles, self.shapes]), hint])
        picks.add_class("tt-heatmap")
        self.widget = w.VBox([w.HBox([self.source, self.view]), picks, self.status, self.out])
        for control in (self.tiles, self.shapes, self.source, self.view):
            control.observe(self._changed, names="value")
        self.refresh()

    @property
    def busy(self) -> bool:
        return self.redraw.busy

    @property
    def states(self) -> list[str]:
        """Every status shown, in order (what the tests read)."""
        return self.redraw.states

    def _changed(self, _change: dict[str, Any]) -> None:
        self.refresh()

    def _show(self, gen: int, fig_maker: Callable[[], Any], status: str, view: str) -> None:
        if self.redraw.draw(gen, fig_maker, lambda _fig: status):
            self.shown = view

    def _end(self, gen: int, text: str, *, error: bool = False) -> None:
        done = self.redraw.error(gen, text) if error else self.redraw.message(gen, text)
        if done:
            self.shown = None

    @property
    def grid(self) -> Grid:
        """The student's grid, or an example bug's (run here: it is our code)."""
        return self._grid_of(self.source.value)

    def _grid_of(self, source: str) -> Grid:
        if source == YOURS:
            return self.student_grid
        return bug_grid(BUGS[source])

    def selection(self) -> tuple[list[tuple[int, int, int]], list[int]]:
        """The shapes and tile sizes currently picked, in display order."""
        tiles = sorted(int(t) for t in self.tiles.value)
        shapes = [
            self.shapes_by_label[label]
            for label in self.shapes.options
            if label in self.shapes.value
        ]
        return shapes, tiles

    def estimate(
        self, source: str, shapes: Sequence[tuple[int, int, int]], tiles: Sequence[int]
    ) -> float:
        """Seconds a grid run of `source` should take: block products x seconds per product
        (the last measured for that kernel, never below SECONDS_PER_BLOCK) + the child's start."""
        per = max(SECONDS_PER_BLOCK, self.seconds_per_block.get(source, 0.0))
        start = GRID_START_S if source == YOURS else 0.0
        return start + per * block_products(shapes, tiles)

    def _learn(self, source: str, blocks: int, seconds: float) -> None:
        if blocks >= 5_000:  # enough products for the start-up time not to dominate
            start = GRID_START_S if source == YOURS else 0.0
            self.seconds_per_block[source] = max(seconds - start, 0.0) / blocks

    def refresh(self) -> None:
        """Recompute the current view and redraw; never raises into the widget."""
        self.refreshes += 1
        if self.view.value == SPEED:
            self._refresh_speed()
        else:
            self._refresh_heatmap()

    def _refresh_heatmap(self) -> None:
        import time

        # Everything this request shows is read now, before anything slow: a change made while
        # it runs is a newer request, and this one's result is then dropped.
        source, refresh = self.source.value, self.refreshes
        shapes, tiles = self.selection()
        who = html.escape(source)
        gen = self.redraw.begin(f"running… {who} on {len(shapes)} shapes x {len(tiles)} tile sizes")
        if not shapes or not tiles:
            self.last = None
            self._end(gen, "<i>Pick at least one tile size and one shape.</i>")
            return
        seconds = self.estimate(source, shapes, tiles)
        refusal = over_budget(
            seconds,
            f"{block_products(shapes, tiles):,} tile products ({_worst_pair(shapes, tiles)} is"
            " the costliest)",
            "Pick larger tile sizes or fewer shapes.",
        )
        if refusal:
            self.last = None
            self._end(gen, f"<b>{html.escape(refusal)}</b>")
            return
        start = time.perf_counter()
        try:
            results = self._grid_of(source)(
                self.impl, shapes, tiles, seed=self.seed, timeout=self.timeout
            )
            data = heatmap_data(results, shapes, tiles)
        except Exception as exc:  # noqa: BLE001  (a broken grid run must not kill the widget)
            if self.redraw.current(gen):
                self.last = None
            self._end(gen, f"grid failed: {exc!r}", error=True)
            return
        self._learn(source, block_products(shapes, tiles), time.perf_counter() - start)
        if not self.redraw.current(gen):  # overtaken: the newer request shows its own
            self.redraw.dropped += 1
            return
        self.last = data
        passed = int((data.status == 1).sum())
        status = (
            f"<b>{passed}/{data.status.size}</b> (shape, tile) pairs pass for {who} "
            f"(refresh {refresh}, tiles {tiles})"
        )
        self._show(
            gen, lambda: draw_heatmap(data, title=f"tiled_matmul ({source})"), status, HEATMAP
        )

    def speed_estimate(self, tiles: Sequence[int] = THROUGHPUT_TILES) -> float:
        """Seconds the speed view should take: the timed products, at the student's measured rate."""
        per = max(SECONDS_PER_BLOCK, self.seconds_per_block.get(YOURS, 0.0))
        n = THROUGHPUT_SIZE
        return GRID_START_S + per * SPEED_REPEATS * block_products([(n, n, n)], tiles)

    def _refresh_speed(self) -> None:
        source, refresh = self.source.value, self.refreshes
        gen = self.redraw.begin(
            f"running… timing your tiled_matmul at tile sizes {THROUGHPUT_TILES}"
        )
        # Coarsen, never block: drop the smallest tiles until the rest fit the budget.
        tiles = list(THROUGHPUT_TILES)
        while len(tiles) > 1 and self.speed_estimate(tiles) > BUDGET_S:
            tiles.pop(0)
        skipped = [t for t in THROUGHPUT_TILES if t not in tiles]
        try:
            if skipped:
                data = self.timer(self.impl, seed=self.seed, tiles=tuple(tiles))
            else:
                data = self.timer(self.impl, seed=self.seed)
        except Exception as exc:  # noqa: BLE001
            if self.redraw.current(gen):
                self.last_speed = None
            self._end(gen, f"timing failed: {exc!r}", error=True)
            return
        if not self.redraw.current(gen):
            self.redraw.dropped += 1
            return
        self.last_speed = data
        errors = "; ".join(data.get("errors", []))
        note = (
            f" Tile sizes {skipped} left out: timing them would take more than"
            f" {BUDGET_S:.0f} s at your kernel's measured speed."
            if skipped
            else ""
        )
        status = (
            f"<b>GFLOP/s of your tiled_matmul</b> beside NumPy (refresh {refresh})"
            + (f"{SPEED_TIMES_YOURS}" if source != YOURS else "")
            + html.escape(note)
            + (
                f" <span style='color:{style.FAIL_COLOUR}'>{html.escape(errors)}</span>"
                if errors
                else ""
            )
        )
        self._show(gen, lambda: draw_tile_throughput(data), status, SPEED)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
