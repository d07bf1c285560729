"""Part B figures: tables from the rows' own numbers, flags honoured, ceilings from profiling."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tinytorch import profiling
from tinytorch.viz import timing

G256, G1024, BG = profiling.gemm(256), profiling.gemm(1024), profiling.bias_gelu(512, 1024)


def _row(p, backend, status="ok", ms=None, rate=None, detail="", flags=()):
    gemm = p.kind == "gemm"
    return SimpleNamespace(
        problem=p.name,
        kind=p.kind,
        backend=backend,
        status=status,
        ms=ms,
        gflops=rate if gemm else None,
        gbps=None if gemm else rate,
        detail=detail,
        flags=list(flags),
        flops=p.flops,
        bytes=p.bytes,
    )


ROWS = [
    _row(G256, "numpy", ms=0.5, rate=67.1),
    _row(G256, "student", ms=5.0, rate=6.7),
    _row(G1024, "numpy", ms=12.0, rate=179.0),
    _row(G256, "triton", "unavailable", detail="no CUDA GPU"),
    _row(G256, "c++ simd", "mismatch", detail="max err 3.0"),
    _row(BG, "numpy", ms=1.0, rate=4.2),
]
CEIL = profiling.Ceilings({1: 100.0, 2: 200.0}, {1: 15.0, 2: 30.0}, "test")


def test_throughput_table_places_credited_rows_only():
    table = timing.throughput_table(ROWS, "gemm")
    assert table.problems == ("gemm 256x256x256", "gemm 1024x1024x1024")
    assert table.backends == ("numpy", "student")
    assert table.values[0].tolist() == [67.1, 6.7]
    assert table.values[1, 0] == 179.0 and np.isnan(table.values[1, 1])
    assert not table.noisy.any()
    assert timing.throughput_table(ROWS, "bias_gelu").unit == "GB/s"
    with pytest.raises(ValueError, match="kind"):
        timing.throughput_table(ROWS, "conv")


def test_a_baseline_below_the_student_is_marked_noisy_even_unflagged():
    rows = [_row(G256, "student", ms=1.0, rate=20.0), _row(G256, "numpy", ms=9.0, rate=2.1)]
    table = timing.throughput_table(rows, "gemm")
    assert table.noisy.tolist() == [[False, True]]
    fig = timing.draw_throughput(rows, CEIL)
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert any("noisy: rerun" in t and t.startswith("2") for t in labels)


def test_the_roofline_marks_a_baseline_below_the_student_noisy_even_unflagged():
    rows = [_row(G256, "student", ms=1.0, rate=20.0), _row(G256, "numpy", ms=9.0, rate=2.1)]
    noisy = {p.backend: p.noisy for p in timing.roofline_points(rows)}
    assert noisy == {"student": False, "numpy": True}
    fig = timing.draw_roofline(rows, CEIL)
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert "numpy, gemm 256x256x256 (noisy: rerun)" in labels
    assert "student, gemm 256x256x256" in labels


def test_incorrect_and_not_credible_rows_are_listed_never_drawn():
    rows = [
        _row(G256, "student", ms=1.0, rate=None, flags=["incorrect"]),
        _row(G256, "student fused_gelu", ms=1e-9, rate=None, flags=["not_credible"]),
        _row(G256, "numpy", ms=0.5, rate=67.1),
    ]
    assert timing.throughput_table(rows, "gemm").backends == ("numpy",)
    assert [p.backend for p in timing.roofline_points(rows)] == ["numpy"]
    notes = timing.not_timed(rows)
    assert "student [gemm 256x256x256]: incorrect: not credited" in notes
    assert "student fused_gelu [gemm 256x256x256]: not credible: not credited" in notes


def test_not_timed_gives_full_reasons_once_and_blames_mismatch_on_us():
    long = (
        "triton 3.9.0 is installed but there is no CUDA GPU (pip install 'tinytorch-m07[triton]')"
    )
    rows = [
        *ROWS,
        _row(G1024, "mps", "unavailable", detail=long),
        _row(BG, "mps", "unavailable", detail=long),
    ]
    notes = timing.not_timed(rows)
    assert any("triton" in n and "no CUDA GPU" in n for n in notes)
    assert any("c++ simd" in n and "TinyTorch bug" in n for n in notes)
    assert f"mps: {long}" in notes and sum(n.startswith("mps") for n in notes) == 1


def test_roofline_points_use_the_rows_flops_and_bytes():
    points = {(p.backend, p.problem): p for p in timing.roofline_points(ROWS)}
    p = points[("numpy", "gemm 256x256x256")]
    assert p.intensity == pytest.approx(2 * 256**3 / (4 * 3 * 256**2))
    assert p.gflops == pytest.approx(2 * 256**3 / 0.5e-3 / 1e9)
    assert ("triton", "gemm 256x256x256") not in points
    renamed = [_row(G256, "numpy", ms=0.5, rate=67.1)]
    renamed[0].problem = "a name with no digits"  # nothing is parsed back from names
    assert timing.roofline_points(renamed)[0].intensity == pytest.approx(p.intensity)


def test_figures_label_ceilings_in_full_and_name_every_roofline_point():
    fig = timing.draw_throughput(ROWS, CEIL)
    legends = [t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts()]
    assert "measured peak 200 GFLOP/s" in legends and "copy bandwidth 30 GB/s" in legends
    assert "not timed" in " ".join(t.get_text() for t in fig.texts)
    roof = timing.draw_roofline(ROWS, CEIL)
    xs, ys = roof.axes[0].lines[0].get_data()
    np.testing.assert_allclose(ys, np.minimum(200.0, xs * 30.0))
    names = {t.get_text() for t in roof.axes[0].texts}
    assert {
        "numpy, gemm 256x256x256",
        "student, gemm 256x256x256",
        "numpy, bias+gelu 512x1024",
    } <= names


def test_ceilings_round_trip_through_json_data():
    d = CEIL.to_dict()
    back = profiling.Ceilings.from_dict(d)
    assert back.fma_gflops == CEIL.fma_gflops and back.copy_gbs == CEIL.copy_gbs
    with pytest.raises(ValueError, match="fma_gflops"):
        profiling.Ceilings.from_dict({"how": "x"})


# ---- the tile-size timing: "noisy: rerun" tags clear of the legend, the NumPy line, each other ----
TILE_DATA = {  # the widget's measured case: tile 256 noisy, at the right edge, under NumPy's line
    "size": 256,
    "tiles": [8, 16, 32, 64, 128, 256],
    "gflops": [0.3, 1.1, 3.0, 7.5, 12.0, 13.0],
    "noisy": [False, False, False, False, True, True],
    "load": [0.1] * 6,
    "numpy_gflops": 14.0,
    "numpy_noisy": False,
}


@pytest.mark.parametrize("draw", [timing.draw_tile_throughput])
def test_noisy_tags_stay_inside_the_axes_off_the_numpy_line_and_off_each_other(draw):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = draw(TILE_DATA)
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    legend = ax.get_legend().get_window_extent(renderer)
    numpy_y = ax.transData.transform((1.0, TILE_DATA["numpy_gflops"]))[1]
    tags = [t for t in ax.texts if t.get_text() == "noisy: rerun"]
    assert len(tags) == 2
    boxes = [matplotlib.text.Text.get_window_extent(t, renderer) for t in tags]
    for box in boxes:
        assert frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1), box
        assert not box.overlaps(legend)
        assert not box.y0 <= numpy_y <= box.y1  # the NumPy line never crosses a tag
    assert not boxes[0].overlaps(boxes[1])
    plt.close(fig)


def test_part_b_charts_draw_backends_in_the_backend_palette_never_pass_or_fail_colours():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from tinytorch.viz import style

    rows = [*ROWS, _row(G256, "c++ simd", ms=0.3, rate=111.8), _row(BG, "student", ms=8, rate=0.5)]
    for fig in (timing.draw_throughput(rows, CEIL), timing.draw_roofline(rows, CEIL),
                timing.draw_tile_throughput(TILE_DATA)):  # fmt: skip
        used = {to_hex(p.get_facecolor()) for p in fig.findobj(matplotlib.patches.Rectangle)}
        used |= {to_hex(c) for coll in fig.findobj(matplotlib.collections.PathCollection)
                 for c in coll.get_facecolors()}  # fmt: skip
        used |= {to_hex(line.get_color()) for line in fig.findobj(matplotlib.lines.Line2D)}
        assert not used & {style.PASS_COLOUR, style.FAIL_COLOUR}, used
        plt.close(fig)


def test_a_rate_below_one_is_labelled_with_its_digits_never_zero():
    """A busy run's torch bias+GELU at 0.45 GB/s was labelled "0" above its bar."""
    rows = [_row(BG, "numpy", ms=1.0, rate=3.21), _row(BG, "student", ms=9.0, rate=0.45)]
    rows.append(_row(G256, "numpy", ms=0.5, rate=67.1))
    fig = timing.draw_throughput(rows, CEIL)
    shown = {t.get_text() for ax in fig.axes for t in ax.texts}
    assert {"0.45", "3.2", "67"} <= shown, shown
    assert "0" not in shown
    assert timing.labels_of(timing.throughput_table(rows, "bias_gelu")) == ["3.2", "0.45"]
