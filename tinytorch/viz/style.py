"""One figure style for every Milestone 07 drawing: its width, its smallest text, each backend's colour.

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

# One colour per backend, in every chart (bars, roofline, the tile-size timing): a student learns
# "red is me" once. Students are reds, baselines take the other tab10 hues.
BACKEND_COLOURS: dict[str, str] = {
    "student": "#d62728",
    "student fused_gelu": "#a50f15",
    "student unfused_gelu": "#ff9896",
    "reference": "#7f7f7f",
    "numpy": "#1f77b4",
    "c++ simd": "#2ca02c",
    "torch-cpu": "#ff7f0e",
    "triton": "#9467bd",
    "mps": "#8c564b",
}
# A figure being redrawn is dimmed in place (explorers and the heatmap add the class "tt-busy").
BUSY_CSS = "<style>.tt-busy{opacity:0.35;transition:opacity 0.1s}</style>"
_SPARE = ("#17becf", "#bcbd22", "#e377c2", "#aec7e8", "#98df8a", "#c5b0d5")  # unknown backends


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
