"""Part B out of the student's reach, and its flags: memoising and patching submissions are not
credited, a kernel that failed Part A is "incorrect", noisy rows and busy runs are flagged.

No timed assertions: the fake submissions report absurd times, and flags are set on rows built here.
"""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import numpy as np
import pytest

from tinytorch.bench import part_b
from tinytorch.bench.tasks import TASKS, student_bias_gelu, student_gemm
from tinytorch.milestone07.results import BenchRow, PartBResult
from tinytorch.profiling import Ceilings

BASE = Path(__file__).resolve().parents[1] / "tinytorch" / "perf" / "acceleration.py"
CEIL = Ceilings({1: 50.0, 2: 100.0}, {1: 10.0, 2: 20.0}, "test")


def memoising_module() -> types.SimpleNamespace:
    """Computes once per input object, then returns the remembered answer: 'infinitely fast'."""
    memo: dict[int, np.ndarray] = {}

    def tiled_matmul(a, b, tile_size=64):
        key = id(a)
        if key not in memo:
            memo[key] = a.data @ b.data
        return memo[key]

    def fused_gelu(x):
        key = id(x)
        if key not in memo:
            y = x.data.astype(np.float64)
            memo[key] = (0.5 * y * (1 + np.tanh(0.7978845608 * (y + 0.044715 * y**3)))).astype(
                np.float32
            )
        return memo[key]

    return types.SimpleNamespace(tiled_matmul=tiled_matmul, fused_gelu=fused_gelu)


def test_a_kernel_memoising_by_input_identity_is_not_credited():
    module = memoising_module()
    gemm = student_gemm(module, n=32, repeats=3)
    gelu = student_bias_gelu(module, m=8, n=64, repeats=3)
    for row in (gemm, gelu):
        assert row["status"] == "wrong" and row["ms"] is None, row
        assert "rotated inputs" in row["detail"]


def test_a_correct_kernel_passes_every_rotated_sample():
    module = types.SimpleNamespace(tiled_matmul=lambda a, b, tile_size=64: a.data @ b.data)
    row = student_gemm(module, n=32, repeats=4)
    assert row["status"] == "ok" and row["samples"] >= 4 and row["ms"] > 0


def test_a_missing_unfused_gelu_says_not_in_this_module():
    row = TASKS["student_unfused_gelu"](types.SimpleNamespace(), m=4, n=8, repeats=1)
    assert row["status"] == "unavailable" and row["detail"] == "unfused_gelu not in this module"


def _course_module() -> types.ModuleType:
    path = Path(__file__).parent / "course" / "course_module.py"
    spec = importlib.util.spec_from_file_location("course_module_for_part_b", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("task", ["student_unfused_gelu", "student_fused_gelu"])
def test_both_student_gelu_tasks_time_a_course_module_on_a_tiny_input(task):
    row = TASKS[task](_course_module(), m=3, n=5, repeats=2)
    assert row["status"] == "ok" and row["samples"] >= 2 and row["ms"] > 0, row
    fn = task.removeprefix("student_")
    assert row["detail"].startswith(f"your {fn} ") and "reference" not in row["detail"]


def test_no_tensor_is_built_inside_a_timed_call(monkeypatch):
    """Tensor(data) copies: Part B builds the inputs' Tensors before timing, never in the timed
    call. Counted around each timed call, with kernels that build no Tensor themselves."""
    from tinytorch.bench import tasks as bench_tasks
    from tinytorch.core.tensor import Tensor
    from tinytorch.milestone07.references import ref_gelu

    built: list[str] = []
    init, wrap = Tensor.__init__, Tensor.wrap.__func__

    def counting_init(self, *args, **kwargs):
        built.append("Tensor()")
        init(self, *args, **kwargs)

    def counting_wrap(cls, *args, **kwargs):
        built.append("Tensor.wrap()")
        return wrap(cls, *args, **kwargs)

    monkeypatch.setattr(Tensor, "__init__", counting_init)
    monkeypatch.setattr(Tensor, "wrap", classmethod(counting_wrap))
    in_timed_calls: list[int] = []
    per_call = bench_tasks.per_call

    def spy(fn, **kwargs):
        def timed():
            before = len(built)
            out = fn()
            in_timed_calls.append(len(built) - before)
            return out

        return per_call(timed, **kwargs)

    monkeypatch.setattr(bench_tasks, "per_call", spy)
    gelu = lambda x: ref_gelu(x.data).astype(np.float32)
    module = types.SimpleNamespace(
        tiled_matmul=lambda a, b, tile_size=64: a.data @ b.data,
        fused_gelu=gelu,
        unfused_gelu=gelu,
    )
    tasks = {"student_gemm": {"n": 16}, "student_bias_gelu": {"m": 3, "n": 5}}
    tasks |= {"student_fused_gelu": {"m": 3, "n": 5}, "student_unfused_gelu": {"m": 3, "n": 5}}
    for task, kwargs in tasks.items():
        assert TASKS[task](module, repeats=2, **kwargs)["status"] == "ok", task
    assert len(in_timed_calls) >= 4 * 3  # a warm-up and two samples per task
    assert set(in_timed_calls) == {0}
    assert built  # the inputs' Tensors were built, outside the timed calls


PATCH_TASKS = """
import tinytorch.bench.tasks as _bt
_bt.TASKS["student_gemm"] = lambda module, **kw: {"status": "ok", "ms": 1e-9, "min_ms": 1e-9,
                                                  "samples": 25, "detail": "patched"}
"""
PATCH_INTERNALS = """
import tinytorch.bench.tasks as _bt
_bt._student = lambda *a, **k: {"status": "ok", "ms": 1e-9, "min_ms": 1e-9, "samples": 25,
                                "spread": 0.0, "load": 0.0, "detail": "patched"}
"""


@pytest.fixture
def only_student_and_ceilings(monkeypatch):
    """Part B with the student's child and a baseline child that only measures the ceilings."""
    children = (part_b.CHILDREN[0], ("baseline", {}, (), {}))
    monkeypatch.setattr(part_b, "CHILDREN", children)
    monkeypatch.setitem(
        part_b.SIZES,
        "tiny",
        {"gemm": [(part_b.profiling.gemm(64), 2)], "bias_gelu": [], "gelu": []},
    )


@pytest.mark.slow
@pytest.mark.parametrize("patch", [PATCH_TASKS, PATCH_INTERNALS], ids=["TASKS", "internals"])
def test_a_submission_patching_the_timing_task_is_not_credited(
    tmp_path, patch, only_student_and_ceilings
):
    impl = tmp_path / "patcher.py"
    impl.write_text(BASE.read_text() + patch)
    result = part_b.run_part_b(str(impl), sizes="tiny")
    (row,) = [r for r in result.rows if r.backend == "student"]
    ceiling = result.ceilings["fma_gflops"]
    if patch is PATCH_TASKS:  # the registry was copied before the module loaded: a real timing
        assert row.detail != "patched" and row.ms > 1e-6
    else:  # the forged 1e-9 ms would be 5e8 GFLOP/s: flagged, no rate anywhere
        assert row.detail.startswith("patched") and "not_credible" in row.flags
        assert row.gflops is None
    assert row.gflops is None or row.gflops <= part_b.CREDIBLE * ceiling


RAGGED_BUG = """
_right = tiled_matmul
def tiled_matmul(a, b, tile_size=64):
    out = _right(a, b, tile_size)
    m, n = out.data.shape
    if m % tile_size or n % tile_size:  # the ragged last tile is dropped
        out.data[m - m % tile_size :, :] = 0.0
    return out
"""


@pytest.mark.slow
def test_a_kernel_that_failed_part_a_is_timed_but_not_credited(tmp_path, only_student_and_ceilings):
    from tinytorch.milestone07 import run_part_a
    from tinytorch.render.terminal import render_part_b

    impl = tmp_path / "ragged.py"
    impl.write_text(BASE.read_text() + RAGGED_BUG)
    cases = ["tiled_matmul/multiple/tile64", "tiled_matmul/ragged_all_axes/tile7"]
    part_a = run_part_a(str(impl), cases=cases, checks=False)
    assert part_a.verdict == "NOT_PASSED"
    result = part_b.run_part_b(str(impl), sizes="tiny", part_a=part_a)
    (row,) = [r for r in result.rows if r.backend == "student"]
    assert row.status == "ok" and row.ms > 0  # 64 x 64 with tile 64 is not ragged: it computes
    assert row.flags == ["incorrect"] or row.flags == ["incorrect", "noisy"]
    assert row.gflops is None
    assert "incorrect: not credited" in render_part_b(result)


def _row(backend: str, kind: str = "gemm", rate: float | None = 10.0, **kw) -> BenchRow:
    problem = "gemm 64x64x64" if kind == "gemm" else "gelu 8x8"
    gflops, gbps = (rate, None) if kind == "gemm" else (None, rate)
    return BenchRow(problem, kind, backend, kw.pop("status", "ok"), 1.0, gflops, gbps, "", **kw)


def test_a_kernel_that_failed_part_a_is_incorrect_and_has_no_rate():
    rows = [_row("student"), _row("numpy", rate=90.0)]
    part_b.flag_rows(rows, CEIL, failed={"tiled_matmul"})
    assert rows[0].flags == ["incorrect"] and rows[0].gflops is None
    assert rows[1].flags == [] and rows[1].gflops == 90.0


def test_a_student_rate_above_the_ceiling_is_not_credible():
    rows = [_row("student", rate=121.0), _row("student fused_gelu", "gelu", rate=25.0)]
    part_b.flag_rows(rows, CEIL, failed=())
    assert all("not_credible" in r.flags for r in rows)
    assert rows[0].gflops is None and rows[1].gbps is None
    ok = [_row("student", rate=119.0)]  # below 1.2 x the 100 GFLOP/s ceiling
    part_b.flag_rows(ok, CEIL, failed=())
    assert ok[0].flags == [] and ok[0].gflops == 119.0


def test_a_baseline_slower_than_the_student_is_flagged_noisy_and_the_run_warns():
    rows = [_row("student", rate=20.0), _row("numpy", rate=2.1), _row("c++ simd", rate=70.0)]
    warnings = part_b.flag_rows(rows, CEIL, failed=())
    assert rows[1].flags == ["noisy"] and rows[2].flags == [] and rows[0].flags == []
    assert any("Rerun Part B alone" in w and "numpy on gemm 64x64x64" in w for w in warnings)


def test_spread_and_load_make_a_row_noisy_and_a_busy_machine_warns():
    rows = [_row("numpy", spread=0.5), _row("c++ simd", load=1.4), _row("torch-cpu", spread=0.01)]
    warnings = part_b.flag_rows(rows, CEIL, failed=())
    assert [r.flags for r in rows] == [["noisy"], ["noisy"], []]
    assert any("machine was busy" in w and "1.4 cores" in w for w in warnings)


def test_one_loaded_row_is_noisy_but_the_machine_is_busy_only_when_most_rows_saw_load():
    quiet = [_row("numpy", load=0.1), _row("c++ simd", load=0.83), _row("torch-cpu", load=0.0)]
    warnings = part_b.flag_rows(quiet, CEIL, failed=())
    assert quiet[1].flags == ["noisy"] and not any("busy" in w for w in warnings)
    assert any("--part-b-only" in w for w in warnings)  # the rerun is a command, not Python
    busy = [_row("numpy", load=0.9), _row("c++ simd", load=1.2), _row("torch-cpu", load=0.0)]
    assert any("machine was busy" in w for w in part_b.flag_rows(busy, CEIL, failed=()))


def test_a_quiet_clean_run_has_no_flags_and_no_warnings():
    rows = [_row("student", rate=5.0, spread=0.02, load=0.0), _row("numpy", rate=90.0, spread=0.03)]
    assert part_b.flag_rows(rows, CEIL, failed=()) == []
    assert all(r.flags == [] for r in rows)


def test_every_child_task_is_a_registered_function():
    for _child, _env, status, group in part_b.CHILDREN:
        for task in [*status, *(t for tasks in group.values() for t in tasks.values())]:
            assert callable(TASKS[task])


@pytest.mark.parametrize(
    "value",
    ["ok", {"status": "forged"}, {"status": "ok", "ms": 0}, {"status": "ok", "ms": "1"},
     {"status": "ok", "ms": 1.0, "samples": "many"}, {"status": "ok", "ms": float("nan")}],
)  # fmt: skip
def test_a_forged_timing_value_is_an_error_row_not_a_grader_crash(value: object) -> None:
    from tinytorch.profiling.problems import gemm

    row = part_b.bench_row(gemm(64), "student", {"status": "ok", "value": value, "wall_s": 1.0})
    assert row.status == "error" and "malformed timing" in row.detail and row.gflops is None


# ---- the ceilings bound every row (issue: "c++ simd 143 GFLOP/s" drawn plain over a 92 peak) ----
LOW = Ceilings({1: 60.0, 2: 92.0}, {1: 10.0, 2: 20.0}, "a low ceiling, injected")


def _consistent(rows: list[BenchRow]) -> None:
    """Give each row the flops, bytes and median time its rate implies (a 64^3 GEMM, an 8x8 GELU)."""
    for r in rows:
        r.flops, r.bytes = (2.0 * 64**3, 3 * 4.0 * 64**2) if r.kind == "gemm" else (8 * 64.0, 512.0)
        work = r.flops if r.kind == "gemm" else r.bytes
        r.ms = work / ((r.gflops or r.gbps) * 1e9) * 1e3


def _injected_run() -> PartBResult:
    """Part B's result as run_part_b builds it, with a C++ row 1.55x over an injected low peak."""
    rows = [
        _row("student", rate=5.0),
        _row("numpy", rate=80.0),
        _row("c++ simd", rate=143.0),
        _row("c++ simd", "gelu", rate=31.0),
    ]
    _consistent(rows)
    warnings = part_b.flag_rows(rows, LOW, failed=())
    return PartBResult(rows, [], 1.0, warnings, LOW.to_dict())


def test_a_bundled_kernel_above_an_injected_low_ceiling_is_withheld_in_report_and_chart():
    import matplotlib

    matplotlib.use("Agg")
    from tinytorch.bench.report import part_b_text
    from tinytorch.viz import timing as viz_timing

    result = _injected_run()
    cxx = [r for r in result.rows if r.backend == "c++ simd"]
    assert all("not_credible" in r.flags for r in cxx)
    assert cxx[0].gflops is None and cxx[1].gbps is None  # withheld: no rate anywhere
    assert "143 GFLOP/s is above 1.2 x the measured peak (92 GFLOP/s)" in cxx[0].detail
    text = part_b_text(result)
    line = next(x for x in text.splitlines() if x.strip().startswith("c++ simd"))
    assert "not credible: not credited" in line and "143" not in line
    assert "143 GFLOP/s is above" in text  # the reason, spelled out under the row
    # the chart: not among the bars nor the roofline points, and listed with its reason
    table = viz_timing.throughput_table(result.rows, "gemm")
    assert "c++ simd" not in table.backends and "numpy" in table.backends
    assert all(p.backend != "c++ simd" for p in viz_timing.roofline_points(result.rows))
    fig = viz_timing.draw_throughput(result.rows, LOW)
    drawn = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    assert not any(t.strip() == "143" for t in drawn)
    assert any("c++ simd" in t and "not credible" in t for t in drawn)
    matplotlib.pyplot.close(fig)


def test_the_chart_guards_itself_an_unflagged_row_above_the_ceiling_is_not_drawn_plain():
    import matplotlib

    matplotlib.use("Agg")
    from tinytorch.viz import timing as viz_timing

    rows = [_row("numpy", rate=80.0), _row("c++ simd", rate=143.0)]  # flag_rows never ran
    _consistent(rows)
    table = viz_timing.throughput_table(rows, "gemm", LOW)
    assert "c++ simd" not in table.backends
    points = viz_timing.roofline_points(rows, LOW)
    assert [p.backend for p in points] == ["numpy"]
    fig = viz_timing.draw_roofline(rows, LOW)
    drawn = " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))
    assert "c++ simd" in drawn and "above 1.2 x" in drawn  # named, with why, not as a point
    matplotlib.pyplot.close(fig)


def test_ceiling_rounds_that_disagree_are_marked_moved_and_the_run_says_so():
    quiet = Ceilings({1: 90.0, 2: 170.0}, {1: 14.0, 2: 30.0}, "round")
    busy = Ceilings({1: 60.0, 2: 160.0}, {1: 13.0, 2: 29.0}, "round")
    both = part_b.profiling.combine_rounds([busy, quiet])
    assert both.fma_gflops == {1: 90.0, 2: 170.0}  # the best of each figure's rounds
    assert both.moved == ("fma_gflops_1t",)  # 90 / 60 = 1.5: beyond the noise rule
    warnings = part_b.ceiling_warnings(both)
    assert any("moved during Part B (FMA peak on 1 thread)" in w for w in warnings)
    assert Ceilings.from_dict(both.to_dict()) == both  # the JSON keeps the marks


def test_a_ceiling_below_its_fewer_thread_figure_is_withheld_with_the_reason():
    odd = Ceilings({1: 90.0, 2: 170.0}, {1: 43.0, 2: 4.2}, "round")
    got = part_b.profiling.combine_rounds([odd])
    assert got.copy_gbs == {1: 43.0} and "copy_gbs_2t" in got.withheld
    assert "4.2 on 2 threads is below 43 on 1" in got.withheld["copy_gbs_2t"]
    assert any("copy bandwidth on 2 threads withheld" in w for w in part_b.ceiling_warnings(got))


def test_a_busy_run_says_in_one_sentence_what_can_still_be_trusted():
    rows = [_row("numpy", load=1.5), _row("c++ simd", load=1.2), _row("torch-cpu", load=1.1)]
    (busy,) = [w for w in part_b.flag_rows(rows, CEIL, failed=()) if "busy" in w]
    trust = busy[busy.index("What a busy machine") :]
    assert trust.count(". ") == 0 and trust.endswith(".")  # one sentence
    assert "the verdict (Part A), always" in trust and "same round" in trust
    assert "absolute rates (GFLOP/s, GB/s), no" in trust


def test_run_part_b_spreads_ceiling_rounds_between_the_rows_and_reports_progress(monkeypatch):
    """The child protocol faked: which tasks run in which order, and one progress line per row."""
    calls: list[str] = []

    class Box:
        def __init__(self, impl, env):
            self.impl = impl

        def close(self):
            calls.append("close")

    def fake_run_task(box, name, timeout, **kwargs):
        calls.append(name)
        if name == "ceilings":
            assert kwargs["copy_floats"] == 512 * 1024  # quick's bias+GELU array: cache-sized
            peak = 92.0 if calls.count("ceilings") == 1 else 200.0  # the first round is low
            value = Ceilings({1: peak / 2, 2: peak}, {1: 10.0, 2: 20.0}, "fake").to_dict()
            return {"status": "ok", "value": value, "wall_s": 0.1}
        if name.endswith("_status"):
            return {"status": "ok", "value": [], "wall_s": 0.1}
        value = {"status": "ok", "ms": 1.0, "min_ms": 0.9, "samples": 3, "spread": 0.01}
        return {"status": "ok", "value": value | {"load": 0.0}, "wall_s": 1.0}

    monkeypatch.setattr(part_b, "open_box", Box)
    monkeypatch.setattr(part_b, "run_task", fake_run_task)
    lines: list[str] = []
    result = part_b.run_part_b("x.py", sizes="quick", progress=lines.append)
    assert len(lines) == len(result.rows) and lines[0].startswith(f"Part B 1/{len(result.rows)}: ")
    # no round in the student's child; one as each clean child starts, and between backends
    student = calls[: calls.index("close")]
    assert "ceilings" not in student
    assert calls.count("ceilings") == 4
    assert result.ceilings["fma_gflops_2t"] == 200.0 and "fma_gflops_2t" in result.ceilings["moved"]


def test_a_gpu_backend_is_not_bounded_by_the_cpus_ceilings():
    import matplotlib

    matplotlib.use("Agg")
    from tinytorch.viz import timing as viz_timing

    rows = [_row("mps", rate=2000.0), _row("numpy", rate=80.0)]  # an Apple GPU's GEMM
    _consistent(rows)
    assert part_b.flag_rows(rows, LOW, failed=()) == [] and rows[0].flags == []
    assert "mps" in viz_timing.throughput_table(rows, "gemm", LOW).backends
    assert "mps" in [p.backend for p in viz_timing.roofline_points(rows, LOW)]
    assert viz_timing.above_roof(rows, LOW) == []
