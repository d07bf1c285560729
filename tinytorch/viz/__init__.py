"""Figures for the Milestone 07 notebook. Each function returns data or a matplotlib Figure."""

from tinytorch.viz import native
from tinytorch.viz.failures import draw_case, first_failures, save_failure_plots, show_failures
from tinytorch.viz.heatmap import HeatmapData, draw_heatmap, heatmap_data
from tinytorch.viz.im2col import Im2colLayout, draw_im2col, im2col_layout
from tinytorch.viz.tiles import TileLayout, draw_ragged_tiles, tile_layout
from tinytorch.viz.timing import (
    Ceilings,
    draw_roofline,
    draw_throughput,
    measure_ceilings,
    roofline_points,
    throughput_table,
)

__all__ = [
    "Ceilings",
    "HeatmapData",
    "Im2colLayout",
    "TileLayout",
    "draw_case",
    "draw_heatmap",
    "draw_im2col",
    "draw_ragged_tiles",
    "draw_roofline",
    "draw_throughput",
    "first_failures",
    "heatmap_data",
    "im2col_layout",
    "measure_ceilings",
    "native",
    "roofline_points",
    "save_failure_plots",
    "show_failures",
    "throughput_table",
    "tile_layout",
]
