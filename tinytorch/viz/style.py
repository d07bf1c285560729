"""One figure style for every Milestone 07 drawing: its width, its smallest text, its colours.

Sized for JupyterLab in a 1400 px browser window with the file browser open, where an output area
is about 950 CSS px wide. `%matplotlib inline` renders at matplotlib's figure.dpi (100) with
bbox_inches="tight", so a figure of MAX_WIDTH_IN inches is shown unscaled, and a font of f pt is
f * DPI / 72 CSS px on screen: MIN_FONT_PT = 9 pt comes out 12.5 px.
"""

from __future__ import annotations

import zlib

from matplotlib.figure import Figure

DPI = 100  # matplotlib's default figure.dpi, the inline backend's rendering dpi
MAX_WIDTH_IN = 9.4  # 940 px at DPI: fits a ~950 px output area without downscaling
FONT_PT = 10.0  # titles and axis labels
MIN_FONT_PT = 9.0  # the smallest text anywhere: ticks, legends, annotations, bar values

# Pass and fail have the only red and green in any figure: a student learns "red is wrong" once.
# Timeouts, crashes and errors are grey: no verdict on the numbers, because none came back.
PASS_COLOUR = "#2ca02c"
FAIL_COLOUR = "#d62728"
ERROR_COLOUR = "#7f7f7f"
# Wrongness shaded from none to most (error maps, missing products): the fail hue, graded.
ERROR_CMAP = "Reds"
# What a drawing points at (the receptive field, the corner tile, the selected row): not a verdict.
HIGHLIGHT_COLOUR = "#000000"

# One colour per backend, in every chart (bars, roofline, the tile-size timing), and never red or
# green: those mean fail and pass. The student's kernels are purples, the baselines other hues.
# Part B's charts (viz/timing.py) take theirs from backend_colour, as does the tile-size timing.
BACKEND_COLOURS: dict[str, str] = {
    "student": "#762a83",
    "student fused_gelu": "#9970ab",
    "student unfused_gelu": "#c2a5cf",
    "reference": "#053061",
    "numpy": "#1f77b4",
    "c++ simd": "#ff7f0e",
    "torch-cpu": "#17becf",
    "triton": "#e6ab02",
    "mps": "#a6761d",
}
# A figure being redrawn is dimmed in place (explorers and the heatmap add the class "tt-busy").
BUSY_CSS = "<style>.tt-busy{opacity:0.35;transition:opacity 0.1s}</style>"
_SPARE = ("#6baed6", "#fdae6b", "#bcbddc", "#e7cb94", "#393b79", "#ce6dbd")  # unknown backends


def backend_colour(backend: str) -> str:
    """The backend's fixed colour; an unknown name gets one from its hash, the same on every run."""
    if backend in BACKEND_COLOURS:
        return BACKEND_COLOURS[backend]
    if backend.startswith("student"):
        return BACKEND_COLOURS["student"]
    return _SPARE[zlib.crc32(backend.encode()) % len(_SPARE)]


def too_small_texts(fig: Figure) -> list[tuple[str, float]]:
    """(text, size in pt) of every visible, non-empty text in `fig` below MIN_FONT_PT."""
    return [
        (t.get_text(), t.get_fontsize())
        for t in fig.findobj(lambda a: hasattr(a, "get_fontsize") and hasattr(a, "get_text"))
        if t.get_visible() and t.get_text().strip() and t.get_fontsize() < MIN_FONT_PT
    ]


def width_px(fig: Figure) -> float:
    """The width of `fig` as the inline backend saves it (bbox_inches="tight"), in pixels at DPI."""
    fig.canvas.draw()
    return fig.get_tightbbox(fig.canvas.get_renderer()).width * DPI
