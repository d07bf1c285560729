"""The tile-size widget's throughput view: Part B's tasks and flags, drawn with "noisy: rerun"."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from tinytorch import profiling
from tinytorch.bench import tasks as bench_tasks
from tinytorch.viz.widget import draw_tile_throughput, tile_throughput

IMPL = "tinytorch.perf.acceleration"


def _texts(fig) -> str:
    ax = fig.axes[0]
    parts = [t.get_text() for t in [*ax.texts, *fig.texts]]
    parts += [t.get_text() for t in ax.get_legend().get_texts()]
    return "\n".join(parts)


def test_tile_throughput_times_part_b_tasks_on_the_profiling_problem(monkeypatch):
    sizes = []
    gemm = profiling.gemm
    monkeypatch.setattr(profiling, "gemm", lambda *dims: sizes.append(dims) or gemm(*dims))
    data = tile_throughput(IMPL, size=64, tiles=(16, 32))
    assert (64,) in sizes and data["errors"] == []
    assert all(g > 0 for g in data["gflops"]) and data["numpy_gflops"] > 0
    assert all(s is not None for s in data["spread"]) and data["numpy_spread"] is not None
    assert all(v >= 0 for v in data["load"]) and data["numpy_load"] >= 0
    assert len(data["noisy"]) == 2 and isinstance(data["numpy_noisy"], bool)


def test_a_numpy_baseline_slower_than_a_tile_size_is_flagged_noisy(monkeypatch):
    slow = {"status": "ok", "ms": 1e6, "min_ms": 1e6, "samples": 5, "spread": 0.0, "load": 0.0}
    monkeypatch.setitem(bench_tasks.TASKS, "numpy_gemm", lambda _m, **_kw: slow | {"detail": ""})
    data = tile_throughput(IMPL, size=64, tiles=(32,))
    assert data["numpy_gflops"] < data["gflops"][0] and data["numpy_noisy"] is True
    assert any("noisy: rerun" in w for w in data["warnings"])


def test_a_missing_module_says_so_without_timing():
    data = tile_throughput("no_such_module_xyz", size=64, tiles=(16, 32))
    assert data["gflops"] == [None, None] and data["errors"]


def _data(**kw) -> dict:
    return {"size": 64, "tiles": [16, 32], "gflops": [0.5, 2.0], "numpy_gflops": 9.0} | kw


@pytest.mark.parametrize(
    ("data", "noisy"),
    [
        (_data(), False),
        (_data(numpy_gflops=1.0), True),  # below tile 32 and not flagged: the plot guards it
        (_data(numpy_noisy=True), True),
        (_data(noisy=[True, False]), True),
    ],
)
def test_the_plot_never_shows_a_baseline_below_the_student_without_the_flag(data, noisy):
    fig = draw_tile_throughput(data)
    try:
        assert ("noisy: rerun" in _texts(fig)) == noisy
        legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        below = data["numpy_gflops"] < max(data["gflops"])
        assert ("NumPy (BLAS), noisy: rerun" in legend) == (below or "numpy_noisy" in data)
    finally:
        plt.close(fig)
