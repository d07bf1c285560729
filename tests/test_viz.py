"""tinytorch.viz: the notebook's figures are drawn from data that is checked here independently."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.figure import Figure

from tinytorch.viz import heatmap as hm
from tinytorch.viz.im2col import column_colour, draw_im2col, im2col_layout
from tinytorch.viz.native import native_status, native_status_text
from tinytorch.viz.tables import cases_html, cases_text, checks_html
from tinytorch.viz.tiles import axis_blocks, draw_ragged_tiles, tile_layout


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# ---- ragged tiles -------------------------------------------------------------------------------


@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 40), tile=st.integers(1, 50))
def test_tiles_cover_output_exactly_once(m, n, k, tile):
    lay = tile_layout(m, n, k, tile)
    cover = np.zeros((m, n), dtype=int)
    for t in lay.tiles:
        assert 1 <= t.row.size <= tile and 1 <= t.col.size <= tile
        cover[t.row.start : t.row.start + t.row.size, t.col.start : t.col.start + t.col.size] += 1
    assert (cover == 1).all()
    depth = np.zeros(k, dtype=int)
    for b in lay.k_blocks:
        depth[b.start : b.start + b.size] += 1
    assert (depth == 1).all()


@pytest.mark.parametrize(
    ("m", "n", "tile", "full", "rag_m", "rag_n", "rag_mn"),
    [
        (37, 23, 7, 5 * 3, 3, 5, 1),  # ragged on both axes
        (64, 64, 16, 16, 0, 0, 0),  # a multiple of the tile
        (5, 3, 64, 0, 0, 0, 1),  # smaller than one tile: one ragged corner
        (1, 33, 16, 0, 2, 0, 1),  # M = 1: one ragged row of tiles
    ],
)
def test_tile_kinds_counted(m, n, tile, full, rag_m, rag_n, rag_mn):
    lay = tile_layout(m, n, 9, tile)
    counts = {kind: lay.count(kind) for kind in ("full", "ragged_m", "ragged_n", "ragged_mn")}
    assert counts == {"full": full, "ragged_m": rag_m, "ragged_n": rag_n, "ragged_mn": rag_mn}


def test_k_blocks_mark_the_ragged_last_block():
    assert [(b.start, b.size, b.ragged) for b in axis_blocks(29, 7)] == [
        (0, 7, False),
        (7, 7, False),
        (14, 7, False),
        (21, 7, False),
        (28, 1, True),
    ]


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "7"])
def test_tile_layout_rejects_bad_tile_naming_it(bad):
    with pytest.raises(ValueError, match="tile"):
        tile_layout(4, 4, 4, bad)


def test_draw_ragged_tiles_draws_a_b_c_and_every_output_tile():
    fig = draw_ragged_tiles(37, 23, 29, 7)
    assert isinstance(fig, Figure)
    ax_a, ax_b, ax_c = fig.axes
    # C holds one patch per output tile plus the red frame; A and B one per K-block (5 of them)
    assert len(ax_c.patches) == 6 * 4 + 1
    assert len(ax_a.patches) == len(ax_b.patches) == 5
    assert ax_c.get_xlim() == (0, 23) and ax_c.get_ylim() == (37, 0)


# ---- im2col -------------------------------------------------------------------------------------


def _im2col_direct(x: np.ndarray, k: int, stride: int, padding: int) -> np.ndarray:
    """Independent reference: rows (out row, out col), columns (channel, kernel row, kernel col)."""
    _, h, w = x.shape
    xp = np.pad(x, ((0, 0), (padding, padding), (padding, padding)))
    oh, ow = (h + 2 * padding - k) // stride + 1, (w + 2 * padding - k) // stride + 1
    rows = []
    for r in range(oh):
        for q in range(ow):
            patch = xp[:, r * stride : r * stride + k, q * stride : q * stride + k]
            rows.append(patch.reshape(-1))
    return np.array(rows)


@given(
    c=st.integers(1, 3),
    h=st.integers(2, 7),
    w=st.integers(2, 7),
    k=st.integers(1, 3),
    stride=st.integers(1, 3),
    padding=st.integers(0, 2),
)
def test_im2col_layout_sources_reproduce_im2col(c, h, w, k, stride, padding):
    if k > min(h, w) + 2 * padding:
        return
    lay = im2col_layout(c, h, w, k, stride, padding)
    x = np.random.default_rng(0).standard_normal((c, h, w))
    xp = np.pad(x, ((0, 0), (padding, padding), (padding, padding)))
    gathered = xp[lay.source[..., 0], lay.source[..., 1], lay.source[..., 2]]
    np.testing.assert_array_equal(gathered, _im2col_direct(x, k, stride, padding))
    assert lay.columns[: k * k] == tuple((0, i, j) for i in range(k) for j in range(k))


def test_im2col_layout_agrees_with_module_17_reference():
    acc = pytest.importorskip("tinytorch.perf.acceleration", reason="Module 17 not present")
    lay = im2col_layout(2, 7, 6, 3, stride=2, padding=1)
    x = np.random.default_rng(1).standard_normal((1, 2, 7, 6)).astype(np.float32)
    cols = np.asarray(getattr(acc.im2col(x, 3, stride=2, padding=1), "data", None))
    xp = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
    np.testing.assert_array_equal(
        cols, xp[lay.source[..., 0], lay.source[..., 1], lay.source[..., 2]]
    )


def test_im2col_layout_field_row_and_padding():
    lay = im2col_layout(2, 7, 6, 3, stride=2, padding=1, field=(1, 2))
    assert (lay.oh, lay.ow) == (4, 3)
    assert lay.row == 1 * 3 + 2
    assert lay.is_padding(0, 3) and lay.is_padding(4, 7) and not lay.is_padding(1, 1)
    with pytest.raises(ValueError, match="field"):
        im2col_layout(2, 7, 6, 3, stride=2, padding=1, field=(4, 0))
    with pytest.raises(ValueError, match="kernel_size"):
        im2col_layout(1, 2, 2, 5)


def test_column_colours_are_distinct():
    colours = {column_colour(c, i, j, 3) for c in range(3) for i in range(3) for j in range(3)}
    assert len(colours) == 27


def test_draw_im2col_highlights_one_row_per_channel_field():
    fig = draw_im2col(c=2, h=7, w=6, k=3, stride=2, padding=1, field=(1, 2))
    assert len(fig.axes) == 3  # two channel panels and the column matrix
    matrix = fig.axes[-1]
    assert matrix.get_xlim() == (0, 18) and matrix.get_ylim() == (12, 0)


# ---- heatmap ------------------------------------------------------------------------------------


def _res(status, err):
    return SimpleNamespace(status=status, max_error=err)


def test_heatmap_data_is_shape_major_with_annotations():
    shapes, tiles = [(3, 4, 5), (6, 7, 8)], [7, 16, 64]
    results = [
        _res("pass", 1e-7),
        _res("fail", 0.5),
        _res("timeout", None),
        _res("crash", None),
        _res("pass", 0.0),
        _res("error", None),
    ]
    data = hm.heatmap_data(results, shapes, tiles)
    assert data.status.tolist() == [[1, 0, -1], [-1, 1, -1]]
    assert data.max_error[0, 1] == 0.5 and np.isnan(data.max_error[0, 2])
    assert data.annotations[0][1] == "FAIL\n5.0e-01"
    assert data.annotations[0][2] == "TIMEOUT"
    assert data.row_labels == ("3x4 @ 4x5", "6x7 @ 7x8")
    assert data.col_labels == ("tile 7", "tile 16", "tile 64")
    assert not data.all_passed


def test_heatmap_data_rejects_wrong_count_naming_results():
    with pytest.raises(ValueError, match="results"):
        hm.heatmap_data([_res("pass", 0.0)], [(1, 1, 1)], [7, 16])


def test_draw_heatmap_writes_every_annotation():
    data = hm.heatmap_data([_res("pass", 1e-7), _res("fail", 2.0)], [(5, 3, 4)], [7, 16])
    fig = hm.draw_heatmap(data)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["pass\n1.0e-07", "FAIL\n2.0e+00"]
    assert "1/2 pass" in fig.axes[0].get_title()


# ---- tables and native status -------------------------------------------------------------------


def _case(status, lesson="use +="):
    return SimpleNamespace(
        name=f"tiled_matmul/x/{status}",
        group="tiled_matmul",
        title="ragged",
        status=status,
        max_error=0.25 if status == "fail" else 1e-7,
        where=[3, 4] if status == "fail" else None,
        detail="max error 0.25 > tol",
        lesson=lesson if status != "pass" else "",
        seconds=0.01,
    )


def test_case_tables_show_lessons_only_for_failures():
    results = [_case("pass"), _case("fail", lesson="cover the ragged tile")]
    page = cases_html(results)
    assert "1/2 cases pass" in page and page.count("Lesson:") == 1
    assert "cover the ragged tile" in page and "[3, 4]" in page
    assert "lesson: cover the ragged tile" in cases_text(results)
    checks = [SimpleNamespace(name="tiling audit", status="not_observed", detail="d", lesson="l")]
    assert "NOT OBSERVED" in checks_html(checks)


def test_native_status_never_raises_and_reads_text():
    report = native_status()
    assert "backends" in report
    text = native_status_text(
        {
            "simd": {
                "available": True,
                "reason": "ok",
                "isa": "avx2+fma",
                "flags": ["-O3", "-mavx2"],
            },
            "build_seconds": 1.5,
            "backends": [{"name": "triton", "available": False, "reason": "no CUDA GPU"}],
        }
    )
    assert "isa        avx2+fma" in text and "-O3 -mavx2" in text and "no   no CUDA GPU" in text
