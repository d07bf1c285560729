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

from tinytorch.milestone07 import evidence
from tinytorch.milestone07.references import ref_col2im, ref_im2col
from tinytorch.render.notebook_tables import cases_html, cases_text, checks_html
from tinytorch.viz import bugs, timing, widget
from tinytorch.viz import heatmap as hm
from tinytorch.viz.explore import Im2colExplorer, TileExplorer
from tinytorch.viz.failures import draw_case, save_failure_plots
from tinytorch.viz.im2col import column_colour, draw_im2col, im2col_layout
from tinytorch.viz.native import native_status, native_status_text
from tinytorch.viz.tiles import TILE_COLOURS, axis_blocks, draw_ragged_tiles, tile_layout


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


def test_case_tables_show_each_lesson_once_for_failures_only():
    fail_a, fail_b = (
        _case("fail", lesson="cover the ragged tile"),
        _case("fail", lesson="cover the ragged tile"),
    )
    fail_b.name = "tiled_matmul/y/fail"
    results = [_case("pass"), fail_a, fail_b]
    page = cases_html(results)
    assert "1/3 cases pass" in page and page.count("cover the ragged tile") == 1
    assert "[3, 4]" in page and "tiled_matmul/y/fail" in page
    assert (
        "lesson for tiled_matmul/x/fail, tiled_matmul/y/fail: cover the ragged tile"
        in cases_text(results)
    )


def test_case_tables_lead_with_the_fix_fold_passing_rows_and_show_code_as_code():
    fail = _case("fail", lesson="clip the end with `min(i0 + tile_size, M)`, then rerun")
    page = cases_html([_case("pass"), fail])
    assert page.index("<code>min(i0 + tile_size, M)</code>") < page.index("<table>")
    assert "`" not in page.split("<table>")[0]  # no literal backticks in the lesson
    assert page.index("<table>") < page.index("<details><summary>1 passing case(s)")
    assert "<details>" not in cases_html([_case("pass"), fail], compact=True)


def test_the_summary_names_what_to_fix_first():
    from tinytorch.render.notebook_record import verdict_bundle

    cause = {"check": "im2col layout", "blame": ["im2col"], "lesson": "Order the `columns`."}
    doc = {"verdict": "NOT_PASSED", "cases": [], "diagnosis": {"root_causes": [cause]}}
    bundle = verdict_bundle(doc)
    assert "Fix first:</b> the root cause, im2col layout (im2col)" in bundle["text/html"]
    assert "<code>columns</code>" in bundle["text/html"]
    lesson = {"group": "tiled_matmul", "text": "Cover the ragged tile.", "cases": ["a"]}
    doc["diagnosis"] = {"root_causes": [], "lessons": [lesson]}
    assert "fix first: tiled_matmul: Cover the ragged tile." in verdict_bundle(doc)["text/plain"]


def test_case_table_leads_with_the_root_cause_and_points_cases_to_it():
    fail = _case("fail", lesson="pad both sides")
    fail.group = "im2col_conv2d"
    check = SimpleNamespace(
        name="im2col layout", status="fail", detail="columns (kr, kc, c)", lesson="reorder",
        blame=["im2col"],
    )  # fmt: skip
    page = cases_html([fail], checks=[check])
    assert page.index("Root cause first") < page.index("<table>")
    assert "<b>Cause:</b> im2col layout" in page and "pad both sides" not in page
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


# ---- failing cases drawn from their evidence -----------------------------------------------------


def _ab(m, k, n, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((m, k)).astype(np.float32),
        rng.standard_normal((k, n)).astype(np.float32),
    )


def test_a_dropped_k_tile_is_missing_exactly_the_last_k_blocks_contribution():
    a, b = _ab(20, 17, 19)
    out = bugs.drops_ragged_k(a, b, 7)  # K-blocks [0, 7), [7, 14), [14, 17): the last dropped
    ev = evidence.matmul_evidence(a, b, out, 7)
    missing = np.array(ev["k_missing"])
    np.testing.assert_allclose(missing[14:], 1.0, atol=1e-3)
    np.testing.assert_allclose(missing[:14], 0.0, atol=1e-3)
    last_block = np.abs(a[:, 14:].astype(np.float64) @ b[14:].astype(np.float64))
    np.testing.assert_allclose(np.array(ev["error"]), last_block, rtol=5e-3, atol=1e-4)
    assert ev["pool"] == 1 and ev["shape"] == [20, 17, 19] and ev["tile"] == 7


def test_assigning_instead_of_adding_misses_every_block_but_the_last():
    a, b = _ab(9, 10, 8)
    ev = evidence.matmul_evidence(a, b, bugs.assigns(a, b, 4), 4)  # blocks [0,4) [4,8) [8,10)
    np.testing.assert_allclose(ev["k_missing"], [1] * 8 + [0] * 2, atol=1e-3)


def test_large_error_maps_are_max_pooled_to_a_bounded_size():
    err = np.zeros((193, 131))
    err[190, 3] = 5.0
    pooled, factor = evidence.pool_max(err, max_cells=4096)
    # factor 2 leaves 97 x 66 = 6402 cells, factor 3 leaves 65 x 44 = 2860
    assert pooled.size <= 4096 and factor == 3 and pooled.max() == 5.0
    assert pooled[190 // 3, 3 // 3] == 5.0


def test_a_kernel_row_col_channel_order_mislabels_exactly_the_expected_columns():
    c, k = 2, 2
    x = np.random.default_rng(1).standard_normal((1, c, 4, 5)).astype(np.float32)
    ref = ref_im2col(x, k, 1, 0)  # columns (channel, kr, kc)
    out = ref.reshape(-1, c, k, k).transpose(0, 2, 3, 1).reshape(ref.shape)  # (kr, kc, channel)
    ev = evidence.im2col_evidence(out, ref, c, k)
    # column j of a (kr, kc, c) layout holds channel j % c at kernel (j // (k*c), (j // c) % k)
    actual = [[j % c, j // (k * c), (j // c) % k] for j in range(c * k * k)]
    expected = [[j // (k * k), (j // k) % k, j % k] for j in range(c * k * k)]
    assert ev["expected"] == expected and ev["actual"] == actual
    assert (
        ev["wrong"]
        == [j for j in range(c * k * k) if actual[j] != expected[j]]
        == [1, 2, 3, 4, 5, 6]
    )


def test_col2im_evidence_counts_the_windows_over_each_pixel():
    cols = np.ones((4, 4), dtype=np.float32)  # x (1, 1, 3, 3), k=2: 2x2 windows
    ref = ref_col2im(cols, (1, 1, 3, 3), 2, 1, 0)
    ev = evidence.col2im_evidence(
        ref * 0, ref, [cols, (1, 1, 3, 3), 2], {"stride": 1, "padding": 0}
    )
    assert ev["coverage"] == [[1, 2, 1], [2, 4, 2], [1, 2, 1]]
    assert ev["error"] == ev["coverage"]  # an all-zero answer is off by the counts


def test_gelu_evidence_is_sorted_by_x_and_keeps_nan_as_none():
    x = np.array([3.0, -1.0, 0.5, 2.0], dtype=np.float32)
    ref = x.astype(np.float64)
    out = np.array([3.0, -1.0, np.nan, 2.5])
    ev = evidence.gelu_evidence(x, out, ref)
    assert ev["x"] == [-1.0, 0.5, 2.0, 3.0]
    assert ev["error"] == [0.0, None, 0.5, 0.0]


def test_a_wrong_shape_is_evidence_of_its_own():
    ref = np.zeros((2, 3, 8, 8))
    case = SimpleNamespace(group="col2im")
    ev = evidence.case_evidence(case, [], {}, np.zeros((2, 3, 10, 10), np.float32), ref)
    assert ev == {"kind": "shape", "expected": [2, 3, 8, 8], "actual": [2, 3, 10, 10]}


def test_conv_evidence_is_the_worst_error_per_output_position():
    ref = np.zeros((2, 3, 4, 5))
    out = ref.copy()
    out[1, 2, 3, 4] = 0.25
    ev = evidence.conv_evidence(out, ref)
    err = np.array(ev["error"])
    assert err.shape == (4, 5) and err[3, 4] == 0.25 and err.sum() == 0.25


@pytest.mark.parametrize(
    ("ev", "axes"),
    [
        (
            {"kind": "tiled_matmul", "shape": [4, 3, 5], "tile": 2, "pool": 1,
             "error": [[0.0] * 5] * 4, "k_missing": [0.0, 0.0, 1.0]},
            4,  # two panels, each with a colour bar or not: error map + bar, k bars
        ),
        ({"kind": "im2col", "c": 1, "k": 2, "expected": [[0, 0, 0], [0, 0, 1]],
          "actual": [[0, 0, 1], [0, 0, 0]], "wrong": [0, 1]}, 1),
        ({"kind": "col2im", "error": [[0.0, 1.0]], "coverage": [[1, 2]],
          "geometry": {"k": 2, "stride": 1, "padding": 0}}, 4),
        ({"kind": "fused_gelu", "x": [-1.0, 1.0], "error": [1e-3, None], "ref": [-0.16, 0.84]}, 2),
        ({"kind": "im2col_conv2d", "error": [[0.0, 0.5]], "shape": [1, 1, 1, 2]}, 2),
        ({"kind": "shape", "expected": [2, 3, 8, 8], "actual": [2, 3, 10, 10]}, 1),
    ],
)  # fmt: skip
def test_draw_case_draws_every_kind(ev, axes):
    fig = draw_case(SimpleNamespace(name="case/x", evidence=ev))
    assert fig is not None
    assert len(fig.axes) >= axes - 1
    plt.close(fig)
    fig = draw_case({"name": "case/x", "evidence": ev})  # the JSON dict draws the same
    assert fig is not None
    plt.close(fig)


def test_draw_case_without_evidence_is_none_and_bad_evidence_is_named():
    assert draw_case(SimpleNamespace(name="c", evidence=None)) is None
    with pytest.raises(ValueError, match="evidence must be a dict"):
        draw_case(SimpleNamespace(name="c", evidence={"kind": "nope"}))


def test_save_failure_plots_writes_the_first_failure_of_each_group(tmp_path):
    ev = {"kind": "im2col_conv2d", "error": [[0.5]], "shape": [1, 1, 1, 1]}
    cases = [
        SimpleNamespace(name="im2col_conv2d/a", group="im2col_conv2d", evidence=ev),
        SimpleNamespace(name="im2col_conv2d/b", group="im2col_conv2d", evidence=ev),
        SimpleNamespace(name="fused_gelu/a", group="fused_gelu", evidence=None),
    ]
    written = save_failure_plots(cases, [], tmp_path / "plots")
    assert [p.name for p in written] == ["im2col_conv2d__a.png"]
    assert written[0].stat().st_size > 1000


# ---- interactive drawings ------------------------------------------------------------------------


def test_tile_explorer_redraws_when_a_slider_moves():
    tiles = TileExplorer(37, 23, 29, 7)
    assert tiles.redraws == 1 and tiles.error is None
    tiles.sliders["tile"].value = 8
    assert tiles.redraws == 2 and tiles.values()["tile"] == 8


def test_im2col_explorer_follows_the_output_and_names_a_bad_geometry():
    view = Im2colExplorer(c=1, h=5, w=5, k=3, stride=1, padding=0)
    view.sliders["out_row"].value = 8  # beyond the 3x3 output: clamped to its last row
    assert view.kwargs()["field"] == (2, 0) and view.error is None
    view.sliders["k"].value = 5
    view.sliders["h"].value = 2  # a 5x5 kernel on 2 rows without padding: no output
    assert view.error and "k" in view.error
    assert "color:#d62728" in view.status.value
    view.sliders["padding"].value = 2
    assert view.error is None


def test_the_explorers_ranges_follow_the_geometry():
    view = Im2colExplorer(c=1, h=9, w=7, k=3, stride=2, padding=0)  # a 4x3 output
    assert (view.sliders["out_row"].max, view.sliders["out_col"].max) == (3, 2)
    view.sliders["out_row"].value = 3
    view.sliders["stride"].value = 3  # now 3x2: the row slider shrinks, its value with it
    assert view.sliders["out_row"].max == 2 and view.sliders["out_row"].value == 2
    assert view.kwargs()["field"] == (2, 0) and view.error is None
    assert TileExplorer().sliders["tile"].max >= 64  # the gate's tile 64 can be explored


def test_the_tile_figure_says_one_product_and_calls_a_full_last_block_full():
    one = draw_ragged_tiles(10, 10, 5, 8)  # K=5 < tile 8: one ragged block
    assert "sums 1 K-block product:" in one._suptitle.get_text()
    full = draw_ragged_tiles(10, 10, 16, 8)  # the tile divides K: no ragged K-block
    legend = " ".join(t.get_text() for t in full.legends[0].get_texts())
    assert "ragged last K-block" not in legend and "2 K-block products" in full._suptitle.get_text()
    ragged = draw_ragged_tiles(10, 10, 13, 8)
    assert "ragged last K-block (5 of 8)" in " ".join(
        t.get_text() for t in ragged.legends[0].get_texts()
    )
    for fig in (one, full, ragged):
        plt.close(fig)


def test_ragged_k_labels_stay_inside_their_blocks():
    fig = draw_ragged_tiles(37, 23, 29, 7)
    ax_a = fig.axes[0]
    for text in ax_a.texts:
        i = int(text.get_text()[1:])
        start = 7 * i
        assert start <= text.get_position()[0] <= min(start + 7, 29)
    plt.close(fig)


# ---- figure style: every figure readable in a 1400 px JupyterLab ---------------------------------


def _bench_row(problem, backend, ms, flags=()):
    rate = (problem.flops if problem.kind == "gemm" else problem.bytes) / (ms * 1e-3) / 1e9
    gemm = problem.kind == "gemm"
    return SimpleNamespace(
        problem=problem.name,
        kind=problem.kind,
        backend=backend,
        status="ok",
        ms=ms,
        gflops=rate if gemm else None,
        gbps=None if gemm else rate,
        detail="",
        flags=list(flags),
        flops=problem.flops,
        bytes=problem.bytes,
    )


def _part_b_rows():
    """A full default Part B: 5 problems, every backend, close points and noisy flags."""
    from tinytorch import profiling

    rows = []
    for problem, base in ((profiling.gemm(256), 0.3), (profiling.gemm(1024), 10.0)):
        for backend, f in (("student", 30), ("numpy", 1), ("c++ simd", 1.3), ("torch-cpu", 1.05)):
            rows.append(_bench_row(problem, backend, base * f, ["noisy"] * (backend == "numpy")))
        rows.append(_bench_row(problem, "mps", base * 0.95))
    for problem, base in (
        (profiling.bias_gelu(512, 1024), 0.5),
        (profiling.bias_gelu(2048, 2048), 3),
    ):
        for backend, f in (("student", 3), ("numpy", 3.1), ("c++ simd", 1), ("torch-cpu", 1.05)):
            rows.append(_bench_row(problem, backend, base * f, ["noisy"] * (backend == "numpy")))
        rows.append(_bench_row(problem, "triton", base * 1.02))
    for backend, f in (("student unfused_gelu", 9), ("student fused_gelu", 3), ("c++ simd", 1)):
        rows.append(_bench_row(profiling.gelu(2048, 2048), backend, 2.0 * f))
    return rows


def _ceilings():
    from tinytorch import profiling

    return profiling.Ceilings({1: 150.0, 8: 300.0}, {1: 12.0, 8: 25.0}, "test ceilings")


FIGURE_MAKERS = {
    "tiles": lambda: draw_ragged_tiles(37, 23, 29, 7),
    "tiles K=1": lambda: draw_ragged_tiles(37, 23, 1, 7),
    "tiles 80, tile 64": lambda: draw_ragged_tiles(80, 80, 80, 64),
    "tiles 1x1x1": lambda: draw_ragged_tiles(1, 1, 1, 1),
    "im2col": lambda: draw_im2col(),
    "im2col C=3 k=5 padding 0": lambda: draw_im2col(3, 9, 9, 5, 1, 0, (4, 4)),
    "im2col C=3 k=1 padding 2": lambda: draw_im2col(3, 9, 9, 1, 1, 2, (12, 12)),
    "im2col C=3 k=5 padding 2, 81 x 75": lambda: draw_im2col(3, 9, 9, 5, 1, 2, (4, 4)),
    "tiles 80, tile 1, coarse": lambda: draw_ragged_tiles(80, 80, 80, 1, coarse=True),
    "heatmap 6x8": lambda: hm.draw_heatmap(
        hm.heatmap_data([_res("pass", 1e-7)] * 48, [(150, 131, 140)] * 6, range(1, 9))
    ),
    "throughput": lambda: timing.draw_throughput(
        _part_b_rows(), _ceilings()
    ),
    "roofline": lambda: timing.draw_roofline(
        _part_b_rows(), _ceilings()
    ),
    "tile throughput": lambda: widget.draw_tile_throughput(
        {"size": 256, "tiles": [8, 16, 32, 64, 128, 256], "gflops": [1, 2, 3, 4, 3, 2],
         "noisy": [0, 1, 0, 0, 0, 0], "numpy_gflops": 3.5, "load": [2.0]}
    ),
    "failure tiled_matmul": lambda: draw_case(SimpleNamespace(name="tiled_matmul/x", evidence={
        "kind": "tiled_matmul", "shape": [37, 29, 23], "tile": 7, "pool": 1,
        "error": [[0.1] * 23] * 37, "k_missing": [0.0] * 28 + [1.0]})),
    "failure im2col 75 columns": lambda: draw_case(SimpleNamespace(name="im2col/x", evidence={
        "kind": "im2col", "c": 3, "k": 5, "wrong": list(range(75)),
        "expected": [[c, i, j] for c in range(3) for i in range(5) for j in range(5)],
        "actual": [[c, j, i] for c in range(3) for i in range(5) for j in range(5)]})),
    "failure col2im": lambda: draw_case(SimpleNamespace(name="col2im/x", evidence={
        "kind": "col2im", "error": [[0.0] * 9] * 7, "coverage": [[1] * 9] * 7,
        "geometry": {"k": 3, "stride": 2, "padding": 1}})),
    "failure gelu": lambda: draw_case(SimpleNamespace(name="fused_gelu/x", evidence={
        "kind": "fused_gelu", "x": [-1.0, 1.0], "error": [1e-3, None], "ref": [-0.16, 0.84]})),
    "failure conv": lambda: draw_case(SimpleNamespace(name="conv/x", evidence={
        "kind": "im2col_conv2d", "error": [[0.0, 0.5] * 4] * 5, "shape": [1, 1, 5, 8]})),
    "failure conv with column order": lambda: draw_case(SimpleNamespace(
        name="im2col_conv2d/x", evidence={**_CONV_EV, "columns": _ORDER})),
    "failure shape": lambda: draw_case(SimpleNamespace(name="col2im/y", evidence={
        "kind": "shape", "expected": [2, 3, 8, 8], "actual": [2, 3, 10, 10]})),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FIGURE_MAKERS))
def test_every_figure_fits_the_notebook_unscaled_with_text_of_at_least_9_points(name):
    from tinytorch.viz import style

    fig = FIGURE_MAKERS[name]()
    assert fig.get_dpi() == style.DPI  # what the inline backend renders at
    # As saved inline (bbox_inches="tight"): at most MAX_WIDTH_IN, i.e. shown at scale 1.
    assert style.width_px(fig) <= style.MAX_WIDTH_IN * style.DPI + 2
    assert style.too_small_texts(fig) == []


def test_the_size_checks_catch_a_wide_figure_and_small_text():
    from tinytorch.viz import style

    fig, ax = plt.subplots(figsize=(18, 3))
    ax.text(0.5, 0.5, "tiny", fontsize=6)
    assert style.width_px(fig) > 1.5 * style.MAX_WIDTH_IN * style.DPI
    assert style.too_small_texts(fig) == [("tiny", 6.0)]


def _colours_by_backend(fig, kind):
    """Backend -> colour as drawn: bars via their legend patches, roofline via scatter colours."""
    from matplotlib.colors import to_hex

    found = {}
    for ax in fig.axes:
        legend = ax.get_legend()
        for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
            if not hasattr(handle, "get_facecolor"):  # a ceiling line, not a backend
                continue
            colour = handle.get_facecolor() if kind == "bars" else handle.get_facecolor()[0]
            found.setdefault(text.get_text(), set()).add(to_hex(colour))
    return found


@pytest.mark.slow
def test_each_backend_has_one_fixed_colour_in_every_chart_and_every_run():
    from matplotlib.colors import to_hex

    from tinytorch.viz import style

    rows = _part_b_rows()
    bars = _colours_by_backend(timing.draw_throughput(rows, _ceilings()), "bars")
    roof = _colours_by_backend(timing.draw_roofline(rows, _ceilings()), "roof")
    again = _colours_by_backend(timing.draw_throughput(rows[::-1], _ceilings()), "bars")
    backends = {r.backend for r in rows}
    for backend in backends:
        want = {to_hex(style.backend_colour(backend))}
        assert bars[backend] == roof[backend] == again[backend] == want, backend
    # The bars themselves carry the legend's colour (a GEMM bar of the student is the student's).
    gemm = timing.draw_throughput(rows, _ceilings()).axes[0]
    assert to_hex(gemm.patches[0].get_facecolor()) == style.BACKEND_COLOURS["student"]
    assert len({style.BACKEND_COLOURS[b] for b in backends}) == len(backends)  # all distinct


def _boxes(fig, texts):
    """(text, its box on the canvas); an annotation's box is its text's, without the leader line."""
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [(t.get_text(), Text.get_window_extent(t, renderer)) for t in texts if t.get_text()]


def _overlapping(boxes):
    return [
        (a, b)
        for i, (a, box_a) in enumerate(boxes)
        for b, box_b in boxes[i + 1 :]
        if box_a.overlaps(box_b)
    ]


@pytest.mark.slow
def test_roofline_numbers_and_key_never_overlap_and_legends_sit_outside_the_data():
    from matplotlib.text import Annotation

    rows = _part_b_rows()
    fig = timing.draw_roofline(rows, _ceilings())
    ax = fig.axes[0]
    numbers = [t for t in ax.texts if isinstance(t, Annotation)]
    key = [t for t in ax.texts if not isinstance(t, Annotation)]
    assert len(numbers) == len(timing.roofline_points(rows)) == 23
    assert _overlapping(_boxes(fig, ax.texts)) == []
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    assert all(
        frame.contains(b.x0, b.y0) and frame.contains(b.x1, b.y1) for _, b in _boxes(fig, numbers)
    )
    assert not any(b.overlaps(frame) for _, b in _boxes(fig, key))
    assert not ax.get_legend().get_window_extent(renderer).overlaps(frame)
    # Each number names its point in the key: "n" then "backend, problem".
    names = [t.get_text() for t in key]
    assert names[:2] == ["1", "student, gemm 256x256x256"]


def test_bar_labels_never_overlap_and_legends_sit_outside_the_bars():
    fig = timing.draw_throughput(_part_b_rows(), _ceilings())
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        boxes = _boxes(fig, ax.texts)
        assert len(boxes) >= 3 and _overlapping(boxes) == []
        frame = ax.get_window_extent(renderer)
        assert all(frame.contains(b.x0, b.y1) for _, b in boxes)  # inside: no clipped label
        assert not ax.get_legend().get_window_extent(renderer).overlaps(frame)


def test_the_tile_explorer_reads_at_the_extremes_and_its_sliders_can_be_hit():
    tiles = TileExplorer(37, 23, 1, 64)  # K = 1, the gate's largest tile
    assert tiles.error is None and tiles.sliders["tile"].max >= 64
    for slider in tiles.sliders.values():
        assert int(slider.layout.width.removesuffix("px")) >= 350
        assert slider.continuous_update is False
    fig = draw_ragged_tiles(37, 23, 1, 7)
    ax_a, ax_b, ax_c = fig.axes
    fig.canvas.draw()
    widths = [ax.get_window_extent().width for ax in (ax_a, ax_b, ax_c)]
    assert min(widths) >= 0.25 * max(widths), widths  # no sliver at K = 1
    assert "sums 1 K-block product:" in fig._suptitle.get_text()
    full = draw_ragged_tiles(16, 16, 64, 64)  # the tile divides K: one full block
    legend = " ".join(t.get_text() for t in full.legends[0].get_texts())
    assert "ragged last K-block" not in legend and "1 K-block product:" in full._suptitle.get_text()


@pytest.mark.slow
@pytest.mark.parametrize(("c", "padding"), [(3, 0), (3, 2), (1, 0)])
def test_im2col_channel_panels_stay_readable(c, padding):
    fig = draw_im2col(c, 9, 9, 3, 1, padding, (0, 0))
    channels = fig.axes[:c]
    titles = _boxes(fig, [ax.title for ax in channels])
    assert _overlapping(titles) == []
    for ax in channels:  # a panel, not a thumbnail: at least 1.6 in on its short side
        box = ax.get_window_extent()
        assert min(box.width, box.height) / fig.dpi >= 1.6


@pytest.mark.slow
def test_the_im2col_output_sliders_follow_the_output_on_every_geometry_change():
    view = Im2colExplorer(c=3, h=9, w=9, k=1, stride=1, padding=2)  # a 13x13 output
    assert (view.sliders["out_row"].max, view.sliders["out_col"].max) == (12, 12)
    view.sliders["out_col"].value = 12
    view.sliders["k"].value = 5  # 9x9 output now
    assert view.sliders["out_col"].max == 8 and view.sliders["out_col"].value == 8
    view.sliders["padding"].value = 0  # 5x5
    assert (view.sliders["out_row"].max, view.sliders["out_col"].max) == (4, 4)
    assert view.kwargs()["field"] == (0, 4) and view.error is None


@pytest.mark.slow
def test_explorers_keep_their_height_and_show_a_busy_state_while_drawing():
    from tinytorch.viz import im2col, style, tiles

    seen = []
    view = TileExplorer(10, 10, 10, 4)
    assert view.out.layout.min_height == f"{round(tiles.FIG_HEIGHT_IN * style.DPI)}px"
    assert Im2colExplorer().out.layout.min_height == f"{round(im2col.FIG_HEIGHT_IN * style.DPI)}px"
    draw = view.draw
    view.draw = lambda **kw: (
        seen.append((view.status.value, list(view.out._dom_classes))),
        draw(**kw),
    )[1]
    view.sliders["m"].value = 11
    assert seen and "drawing" in seen[0][0] and "tt-busy" in seen[0][1]
    assert "tt-busy" not in view.out._dom_classes and view.status.value == ""


def test_notebook_text_wraps_between_words_never_inside_one():
    from tinytorch.render.notebook_record import text_bundle

    table = text_bundle("  your tiled_matmul   12.0 ms  [noisy: rerun] a long detail <x>")
    assert "word-break:normal" in table["text/html"] and "break-all" not in table["text/html"]
    assert "white-space:pre-wrap" in table["text/html"] and "&lt;x&gt;" in table["text/html"]
    assert table["text/plain"].startswith("  your tiled_matmul")
    prose = text_bundle("call `tiled_matmul` here", prose=True)["text/html"]
    assert "<code>tiled_matmul</code>" in prose and "word-break:normal" in prose


def test_the_speed_view_says_whose_kernel_it_times_when_an_example_bug_is_picked():
    from tinytorch.viz.bugs import BUGS
    from tinytorch.viz.widget import SPEED, TileHeatmap

    def grid(impl, shapes, tiles, *, seed=0, timeout=5.0):
        return [SimpleNamespace(status="pass", max_error=0.0) for _ in shapes for _ in tiles]

    timed = []

    def timer(impl, *, seed=0):
        timed.append(impl)
        return {"size": 8, "tiles": [2], "gflops": [1.0], "numpy_gflops": 9.0, "errors": []}

    heat = TileHeatmap("student.py", grid=grid, timer=timer)
    heat.source.value = next(iter(BUGS))
    heat.view.value = SPEED
    assert timed == ["student.py"]  # the student's kernel, never the example bug
    assert "always times your kernel" in heat.status.value and "example bug" in heat.status.value
    heat.source.value = "your kernel"
    assert "always times your kernel" not in heat.status.value
    assert "tt-busy" not in heat.out._dom_classes  # the busy dimming is lifted after each redraw


# ---- one colour language: red and green mean fail and pass, nothing else -------------------------


def _hue_deg(colour) -> tuple[float, float]:
    """(hue in degrees, saturation) of a matplotlib colour."""
    import colorsys

    from matplotlib.colors import to_rgb

    h, _, s = colorsys.rgb_to_hls(*to_rgb(colour))
    return 360 * h, s


def _verdict_like(colour) -> bool:
    """A saturated colour within 25 degrees of the pass green or the fail red."""
    from tinytorch.viz import style

    hue, sat = _hue_deg(colour)
    if sat < 0.25:
        return False
    for verdict in (style.PASS_COLOUR, style.FAIL_COLOUR):
        ref, _ = _hue_deg(verdict)
        if min(abs(hue - ref), 360 - abs(hue - ref)) < 25:
            return True
    return False


def test_backend_palette_never_uses_the_pass_or_fail_colours():
    from tinytorch.viz import style

    palette = {**style.BACKEND_COLOURS, **{f"spare {c}": c for c in style._SPARE}}
    assert [name for name, c in palette.items() if _verdict_like(c)] == []
    assert _verdict_like(style.PASS_COLOUR) and _verdict_like(style.FAIL_COLOUR)  # the check bites
    assert not _verdict_like(style.HIGHLIGHT_COLOUR)
    unknown = style.backend_colour("some new backend")
    assert not _verdict_like(unknown) and unknown == style.backend_colour("some new backend")


def test_the_heatmap_draws_verdicts_in_the_style_verdict_colours():
    from matplotlib.colors import to_hex

    from tinytorch.viz import style

    data = hm.heatmap_data(
        [_res("pass", 0.0), _res("fail", 1.0), _res("timeout", None)], [(5, 3, 4)], [7, 8, 16]
    )
    fig = hm.draw_heatmap(data)
    image = fig.axes[0].images[0]
    drawn = [to_hex(image.cmap(image.norm(v))) for v in (data.status[0] + 1)]
    assert drawn == [style.PASS_COLOUR, style.FAIL_COLOUR, style.ERROR_COLOUR]


def _artist_colours(fig) -> list:
    """Every face and edge colour of every patch and line, and every image's pixels, drawn in fig."""
    from matplotlib.colors import to_hex

    out = []
    for ax in fig.axes:
        for patch in ax.patches:
            if patch.get_fill():
                out.append(to_hex(patch.get_facecolor()))
            if patch.get_linewidth() > 0:
                out.append(to_hex(patch.get_edgecolor()))
        out += [to_hex(line.get_color()) for line in ax.lines]
        for image in ax.images:
            arr = image.get_array()
            rgb = image.to_rgba(arr)[..., :3] if arr.ndim == 2 else np.asarray(arr)[..., :3]
            out += [to_hex(c) for c in {tuple(v) for v in rgb.reshape(-1, 3)}]
    return out


@pytest.mark.parametrize(
    "make",
    [
        lambda: draw_ragged_tiles(37, 23, 29, 7),
        lambda: draw_ragged_tiles(80, 80, 80, 1, coarse=True),
        lambda: draw_im2col(3, 9, 9, 3, 2, 1, (1, 2)),
    ],
)
def test_teaching_drawings_use_no_pass_or_fail_colour(make):
    assert [c for c in _artist_colours(make()) if _verdict_like(c)] == []


# ---- the im2col explorer: the whole column matrix at every size --------------------------------


@pytest.mark.parametrize(
    "geometry",
    [
        (2, 5, 5, 3, 1, 1, (1, 1)),  # the default: 25 x 18
        (3, 9, 9, 5, 1, 2, (4, 4)),  # 81 x 75, the widest the sliders reach
        (3, 9, 9, 1, 1, 2, (12, 12)),  # 169 x 3, the tallest
        (1, 2, 2, 1, 3, 0, (0, 0)),  # 1 x 1
    ],
)
def test_im2col_draws_every_row_of_the_column_matrix_in_its_channel_colours(geometry):
    from matplotlib.colors import to_rgb

    from tinytorch.viz.im2col import OTHER_ROWS_FADE, PADDING_GREY, matrix_colours

    c, h, w, k, stride, padding, field = geometry
    lay = im2col_layout(c, h, w, k, stride, padding, field)
    fig = draw_im2col(*geometry)
    matrix = fig.axes[-1]
    (image,) = matrix.images
    drawn = np.asarray(image.get_array())
    assert drawn.shape == (lay.oh * lay.ow, c * k * k, 3)  # every row and column, not one strip
    np.testing.assert_allclose(drawn, matrix_colours(lay))
    ys, xs = lay.source[..., 1], lay.source[..., 2]
    padded = (ys < padding) | (ys >= padding + h) | (xs < padding) | (xs >= padding + w)
    grey = np.array(PADDING_GREY)
    faded = grey + OTHER_ROWS_FADE * (1 - grey)  # another row's padded zero, faded toward white
    for r, j in zip(*np.nonzero(padded), strict=True):
        np.testing.assert_allclose(drawn[r, j], grey if r == lay.row else faded)
    row = drawn[lay.row]  # the picked row: unfaded, each entry its column's colour or grey
    for j, (ch, ky, kx) in enumerate(lay.columns):
        want = PADDING_GREY if padded[lay.row, j] else column_colour(ch, ky, kx, k)
        np.testing.assert_allclose(row[j], want)
    # hue follows the channel in every non-padded entry of every row
    import colorsys

    for j, (ch, _, _) in enumerate(lay.columns):
        base_hue = colorsys.rgb_to_hls(*column_colour(ch, 0, 0, k))[0]
        for r in np.flatnonzero(~padded[:, j]):
            assert abs(colorsys.rgb_to_hls(*drawn[r, j])[0] - base_hue) < 0.02
    fig.canvas.draw()
    row_px = matrix.get_window_extent().height / (lay.oh * lay.ow)
    assert row_px >= 1.5, row_px  # 169 rows still each get their own pixels
    assert to_rgb("#000000") in [to_rgb(p.get_edgecolor()) for p in matrix.patches]  # the frame
    assert f"row {lay.row} framed" in matrix.get_title()


# ---- cost: explorers coarsen a drawing estimated above the budget ------------------------------


def test_the_tile_explorer_coarsens_tile_1_at_80_cubed_and_says_so():
    from tinytorch.viz.redraw import BUDGET_S
    from tinytorch.viz.tiles import tiles_cost

    assert tiles_cost(80, 80, 80, 1) > BUDGET_S  # 6,400 framed patches: ~19 s in the browser
    assert max(tiles_cost(80, 80, 80, t, coarse=True) for t in range(1, 65)) <= BUDGET_S
    seen = []
    view = TileExplorer(80, 80, 80, 2)
    view._learn = lambda *_: None  # at the cost model's speed, whatever this machine's load
    view.slowdown = 1.0
    draw = view.draw
    view.draw = lambda **kw: seen.append(kw.get("coarse", False)) or draw(**kw)
    assert not view.coarse
    view.sliders["tile"].value = 1
    assert seen == [True] and view.coarse and "Drawn coarse" in view.status.value
    view.sliders["tile"].value = 8
    assert seen == [True, False] and not view.coarse and view.status.value == ""


def test_a_coarse_tile_drawing_shows_every_tile_kind_as_one_image():
    fig = draw_ragged_tiles(37, 23, 29, 7, coarse=True)
    ax_c = fig.axes[2]
    (image,) = ax_c.images
    lay = tile_layout(37, 23, 29, 7)
    kinds = np.asarray(image.get_array())
    assert kinds.shape == (37, 23)
    for t in lay.tiles:  # the same kind, entry by entry, as the full drawing's patches
        block = kinds[
            t.row.start : t.row.start + t.row.size, t.col.start : t.col.start + t.col.size
        ]
        assert (block == list(TILE_COLOURS).index(t.kind)).all()
    assert "coarse" in ax_c.get_title() and len(ax_c.patches) == 1  # the corner frame only


# ---- Section 3: an im2col column-order bug is drawn as the column order, not only an error map --


_ORDER = {
    "kind": "im2col", "c": 2, "k": 2, "wrong": [1, 2, 3, 4, 5, 6],
    "expected": [[j // 4, (j // 2) % 2, j % 2] for j in range(8)],
    "actual": [[j % 2, j // 4, (j // 2) % 2] for j in range(8)],
}  # fmt: skip
_CONV_EV = {"kind": "im2col_conv2d", "error": [[0.0, 0.5], [0.25, 0.0]], "shape": [1, 1, 2, 2]}


def test_a_conv_failure_caused_by_im2col_order_draws_the_wrong_columns_and_says_it_once():
    from tinytorch.viz.failures import first_failures

    conv = SimpleNamespace(name="im2col_conv2d/pad1", group="im2col_conv2d", evidence=_CONV_EV)
    layout = SimpleNamespace(name="im2col layout", status="fail", evidence=_ORDER)
    drawn = first_failures([conv], [layout], merge=True)
    assert len(drawn) == 1  # the layout check is inside the conv drawing, not drawn again
    fig = draw_case(drawn[0])
    order, errors = fig.axes[0], fig.axes[1]
    texts = [t.get_text() for t in order.texts]
    assert texts[:2] == ["0,0,0", "0,0,0"] and "1,0,0" in texts  # expected, then yours, per column
    assert [t.get_text() for t in order.get_yticklabels()] == ["expected", "yours"]
    assert "column order" in order.get_title() and "6 of 8" in order.get_title()
    assert errors.images and "|error|" in errors.get_title()
    assert len(first_failures([conv], [layout])) == 2  # tito --plots: a file per failure
    plain = draw_case(conv)  # without the check: the error map alone, as before
    assert len(plain.axes) == 2 and "column" not in plain.axes[0].get_title()


def test_a_machine_slower_than_the_cost_model_coarsens_sooner():
    import time

    from tinytorch.viz.tiles import tiles_cost

    view = TileExplorer(80, 80, 80, 8)
    draw = view.draw
    view.draw = lambda **kw: (time.sleep(1.5), draw(**kw))[1]  # a busy machine: 1.5 s more
    view.sliders["tile"].value = 16
    assert view.slowdown >= 1.5 / tiles_cost(80, 80, 80, 16)  # learnt from the figure it showed
    assert tiles_cost(80, 80, 80, 3) * view.slowdown > 3.0 > tiles_cost(80, 80, 80, 3)
    view.sliders["tile"].value = 3  # drawn in full on a quiet machine, coarse on this one
    assert view.coarse and "Drawn coarse" in view.status.value


def test_the_im2col_explorer_speaks_of_its_sliders_not_of_our_functions() -> None:
    """Before: 'im2col_layout: kernel_size 5x5 is larger...' reached the student as is."""
    from tinytorch.viz.explore import Im2colExplorer

    view = Im2colExplorer()
    view.redraw.display = lambda fig: None
    view.sliders["padding"].value = 0
    view.sliders["h"].value = 3
    view.sliders["k"].value = 5
    view.refresh()
    said = view.redraw.status.value
    assert "larger than the padded input" in said and "im2col_layout" not in said, said
    assert "move k down" in said
