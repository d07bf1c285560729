"""Module 14: latency and peak-memory measurements return sane numbers and reject bad arguments."""

from __future__ import annotations

import os
import time
import tracemalloc

import numpy as np
import pytest

from tinytorch.profiling import (
    Ceilings,
    LoadMeter,
    Timing,
    bias_gelu,
    gelu,
    gemm,
    interleaved,
    interleaved_calls,
    measure_ceilings,
    measure_latency,
    measure_peak_memory,
    numpy_bias_gelu,
    paired_speedup,
    per_call,
    spread,
)
from tinytorch.profiling.load import NOISY_LOAD, cpu_jiffies

MiB = 2**20


def test_latency_statistics_are_ordered_and_count_the_calls():
    calls = []
    stats = measure_latency(calls.append, "x", warmup=3, repeats=7)
    assert len(calls) == 3 + 7  # warm-up calls are made but not timed
    assert stats.repeats == 7 and stats.warmup == 3 and len(stats.samples) == 7
    assert 0 < stats.min_s <= stats.median_s <= stats.max_s
    assert stats.min_s <= stats.mean_s <= stats.max_s
    assert stats.min_s == min(stats.samples) and stats.max_s == max(stats.samples)
    assert stats.median_s == sorted(stats.samples)[3]
    assert stats.median_ms == pytest.approx(stats.median_s * 1e3)


def test_latency_of_a_sleep_is_at_least_the_sleep():
    # time.sleep sleeps at least as long as asked; only a lower bound is safe on a busy machine.
    stats = measure_latency(time.sleep, 0.005, warmup=0, repeats=3)
    assert stats.min_s >= 0.005


def test_latency_passes_keyword_arguments():
    seen = {}
    measure_latency(seen.update, warmup=0, repeats=1, key="value")
    assert seen == {"key": "value"}


def test_latency_of_zero_warmup_and_one_repeat():
    stats = measure_latency(lambda: None, warmup=0, repeats=1)
    assert stats.min_s == stats.median_s == stats.max_s > 0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"repeats": 0}, "repeats"),
        ({"repeats": 2.5}, "repeats"),
        ({"repeats": True}, "repeats"),
        ({"warmup": -1}, "warmup"),
        ({"warmup": "2"}, "warmup"),
    ],
)
def test_latency_rejects_bad_counts(kwargs, name):
    with pytest.raises(ValueError, match=name):
        measure_latency(lambda: None, **kwargs)


def test_fn_must_be_callable():
    with pytest.raises(TypeError, match="fn"):
        measure_latency(42)
    with pytest.raises(TypeError, match="fn"):
        measure_peak_memory("not a function")


def test_peak_memory_sees_a_4_mib_array():
    stats = measure_peak_memory(np.ones, 4 * MiB // 8)  # 4 MiB of float64, returned
    assert stats.peak_bytes >= 4 * MiB
    assert stats.peak_bytes < 6 * MiB
    assert stats.peak_mib == pytest.approx(stats.peak_bytes / MiB)


def test_peak_memory_sees_a_temporary_that_is_freed():
    def temporary():
        a = np.ones(4 * MiB // 8)
        return float(a.sum())

    stats = measure_peak_memory(temporary)
    assert stats.peak_bytes >= 4 * MiB
    assert stats.retained_bytes < 64 * 1024


def test_peak_memory_of_a_no_op_is_small():
    stats = measure_peak_memory(lambda: None)
    assert 0 <= stats.peak_bytes < 64 * 1024


def test_peak_memory_leaves_tracemalloc_as_it_found_it():
    assert not tracemalloc.is_tracing()
    measure_peak_memory(lambda: None)
    assert not tracemalloc.is_tracing()
    with pytest.raises(ZeroDivisionError):
        measure_peak_memory(lambda: 1 / 0)
    assert not tracemalloc.is_tracing()
    tracemalloc.start()
    try:
        before = np.ones(2 * MiB // 8)  # allocated before the call: not part of its peak
        spike = np.ones(8 * MiB // 8)  # an earlier peak, over before the call starts
        del spike
        stats = measure_peak_memory(np.ones, MiB // 8)
        assert tracemalloc.is_tracing()
        assert MiB <= stats.peak_bytes < 2 * MiB
        del before
    finally:
        tracemalloc.stop()


def test_latency_accepts_numpy_integer_counts():
    stats = measure_latency(lambda: None, warmup=np.int64(1), repeats=np.int64(3))
    assert stats.repeats == 3 and type(stats.repeats) is int and len(stats.samples) == 3


# ---- the one timing policy, driven by a fake clock ----------------------------------------------


class FakeClock:
    """A clock that only moves when a fake call says how long it took."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def call(self, seconds: float) -> None:
        self.now += seconds


def test_per_call_takes_one_sample_per_call_after_the_warmup():
    clock = FakeClock()
    durations = iter([9.0, 1.0, 3.0, 2.0, 5.0, 4.0] + [1.0] * 100)
    timing = per_call(
        lambda: clock.call(next(durations)),
        warmup=1,
        min_time=0.0,
        min_calls=5,
        max_calls=5,
        clock=clock,
    )
    assert timing.samples == (1.0, 3.0, 2.0, 5.0, 4.0)  # the 9 s warm-up is not a sample
    assert timing.median == 3.0 and timing.min == 1.0 and timing.max == 5.0
    assert timing.spread == pytest.approx((4.0 - 2.0) / 3.0)  # (q3 - q1) / median, inclusive


def test_per_call_samples_a_fast_kernel_until_min_time_and_min_calls():
    clock = FakeClock()
    timing = per_call(lambda: clock.call(0.001), warmup=0, min_time=0.01, min_calls=3, clock=clock)
    assert len(timing.samples) == 10  # 10 x 1 ms reach min_time = 10 ms
    timing = per_call(lambda: clock.call(0.03), warmup=0, min_time=0.01, min_calls=3, clock=clock)
    assert len(timing.samples) == 3  # min_calls holds even when one call outlasts min_time
    timing = per_call(lambda: clock.call(0.2), warmup=0, min_time=0.01, min_calls=3, clock=clock)
    assert len(timing.samples) == 1  # past 10 x min_time a slow kernel needs no more


def test_per_call_keeps_a_slow_warmup_as_the_only_sample():
    clock = FakeClock()
    calls = []

    def slow():
        calls.append(1)
        clock.call(3.0)

    timing = per_call(slow, warmup=1, min_calls=5, slow_s=2.0, clock=clock)
    assert timing.samples == (3.0,) and len(calls) == 1


def test_per_call_runs_before_and_after_untimed_around_every_sample():
    clock = FakeClock()
    seen = []
    timing = per_call(
        lambda: clock.call(1.0) or len(seen),
        warmup=1,
        min_time=0.0,
        min_calls=3,
        max_calls=3,
        before=lambda i: (seen.append(("before", i)), clock.call(100.0)),
        after=lambda i, result: seen.append(("after", i)),
        clock=clock,
    )
    assert timing.samples == (1.0, 1.0, 1.0)  # the 100 s of `before` is never inside a sample
    assert seen[:2] == [("before", -1), ("after", -1)]  # the warm-up is checked too
    assert [s for s in seen[2:] if s[0] == "before"] == [
        ("before", 0),
        ("before", 1),
        ("before", 2),
    ]


def test_a_failing_after_check_stops_the_timing():
    def check(i, result):
        raise AssertionError(f"wrong output at sample {i}")

    with pytest.raises(AssertionError, match="sample -1"):
        per_call(lambda: 0, after=check)


def test_interleaved_rotates_who_goes_first_and_settles_after_each_sample():
    order, pauses = [], []

    def backend(name, seconds):
        return lambda: order.append(name) or seconds

    out = interleaved(
        {"a": backend("a", 1.0), "b": backend("b", 2.0), "c": backend("c", 4.0)},
        rounds=3,
        settle={"b": 0.25},
        default_settle=0.001,
        sleep=pauses.append,
    )
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert pauses.count(0.25) == 3 and pauses.count(0.001) == 6
    assert out["c"].samples == (4.0, 4.0, 4.0) and out["b"].median == 2.0
    assert isinstance(out["a"], Timing)


def test_interleaved_calls_warms_up_then_times_one_call_per_round():
    order, ticks = [], iter(range(1000))

    def backend(name):
        return lambda: order.append(name)

    out = interleaved_calls(
        {"a": backend("a"), "b": backend("b")},
        rounds=3,
        warmup=2,
        sleep=lambda s: None,
        clock=lambda: float(next(ticks)),
    )
    assert order == ["a", "a", "b", "b", "a", "b", "b", "a", "a", "b"]
    assert [len(t.samples) for t in out.values()] == [3, 3]
    assert all(s > 0 for t in out.values() for s in t.samples)


def test_paired_speedup_compares_samples_of_the_same_round():
    # the machine slows down over the run (both kernels alike), and base's round-3 sample hits
    # a stall of its own: every round says 1.25 but that one
    fast = Timing((1.0, 2.0, 3.0, 4.0, 5.0))
    base = Timing((1.25, 2.5, 20.0, 5.0, 6.25))
    assert paired_speedup(fast, base) == pytest.approx(1.25)
    assert base.median / fast.median == pytest.approx(5.0 / 3.0)  # the medians' ratio: 1.67
    assert paired_speedup(base, fast) == pytest.approx(0.8)  # and the other way round


def test_paired_speedup_scales_by_the_work_and_leaves_out_missing_rounds():
    fast, base = Timing((2.0, 2.0, 4.0)), Timing((1.0, 1.0, float("nan")))
    assert paired_speedup(fast, base, work_ratio=3.0) == pytest.approx(1.5)  # 3 * 1 / 2
    assert paired_speedup(Timing((1.0,)), Timing((float("nan"),))) is None
    with pytest.raises(ValueError, match="one sample per round each, got 3 and 2"):
        paired_speedup(fast, Timing((1.0, 1.0)))
    with pytest.raises(ValueError, match="work_ratio must be > 0"):
        paired_speedup(fast, base, work_ratio=0.0)


def test_spread_is_none_below_three_samples_and_zero_when_all_agree():
    assert spread([1.0, 2.0]) is None
    assert spread([2.0, 2.0, 2.0, 2.0]) == 0.0
    assert spread([1.0, 1.0, 1.0, 10.0]) > 0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"min_calls": 0}, "min_calls"),
        ({"warmup": -1}, "warmup"),
        ({"max_calls": 1.5}, "max_calls"),
    ],
)
def test_per_call_rejects_bad_counts(kwargs, name):
    with pytest.raises(ValueError, match=name):
        per_call(lambda: None, **kwargs)


def test_interleaved_rejects_zero_rounds():
    with pytest.raises(ValueError, match="rounds"):
        interleaved({"a": lambda: 1.0}, rounds=0)


# ---- problem definitions: the work per call as numbers --------------------------------------------
def test_problem_flops_and_bytes_are_the_napkin_math():
    p = gemm(2, 3, 4)
    assert (p.flops, p.bytes, p.name) == (2 * 2 * 3 * 4, 4 * (6 + 12 + 8), "gemm 2x3x4")
    assert gemm(256).dims == (256, 256, 256)
    q = bias_gelu(512, 1024)
    assert q.bytes == 4 * (2 * 512 * 1024 + 1024) and q.flops == 10 * 512 * 1024
    assert q.name == "bias+gelu 512x1024"
    assert gelu(8, 16).bytes == 4 * 2 * 8 * 16
    assert p.intensity == pytest.approx(48 / 104)


def test_problem_inputs_are_seeded_float32_and_the_reference_is_float64():
    p = gemm(5, 7, 3)
    a, b = p.inputs(seed=1)
    assert a.shape == (5, 7) and b.shape == (7, 3) and a.dtype == np.float32
    assert np.array_equal(a, p.inputs(seed=1)[0]) and not np.array_equal(a, p.inputs(seed=2)[0])
    ref = p.reference(a, b)
    assert ref.dtype == np.float64
    np.testing.assert_allclose(ref, a.astype(np.float64) @ b.astype(np.float64))


def test_the_numpy_baseline_matches_the_float64_gelu():
    p = bias_gelu(33, 65)
    x, bias = p.inputs()
    x[0, :5] = [-20.0, -9.0, 0.0, 9.0, 20.0]
    ref = p.reference(x, bias)
    # an independent formula: 0.5 y (1 + erf-free tanh form) written out here
    y = x.astype(np.float64) + bias
    np.testing.assert_allclose(
        ref, 0.5 * y * (1 + np.tanh(0.7978845608 * (y + 0.044715 * y**3))), atol=1e-9
    )
    got = numpy_bias_gelu(x, bias, out=np.empty_like(x), tmp=np.empty_like(x))
    assert np.abs(got - ref).max() < 1e-5 and np.isfinite(got).all()


@pytest.mark.parametrize("bad", [(0,), (2, -1), (2.5,), (True,)])
def test_problem_dims_must_be_positive_ints(bad):
    with pytest.raises(ValueError, match="gemm"):
        gemm(*bad)


# ---- ceilings and load ------------------------------------------------------------------------------
def test_ceilings_api_gives_one_figure_per_thread_count():
    c = measure_ceilings(threads=(1, 2), quick=True, rounds=1)
    assert isinstance(c, Ceilings)
    # every thread count has its figure, or (a busy machine) says why it was withheld
    for name, figures in (("fma_gflops", c.fma_gflops), ("copy_gbs", c.copy_gbs)):
        assert all((t in figures) != (f"{name}_{t}t" in c.withheld) for t in (1, 2)), c
        assert 1 in figures  # nothing fewer to fall below
    assert all(v > 0 and np.isfinite(v) for v in [*c.fma_gflops.values(), *c.copy_gbs.values()])
    assert c.gflops == max(c.fma_gflops.values()) and c.gbps == max(c.copy_gbs.values())
    d = c.to_dict()
    assert d["fma_gflops_1t"] == c.fma_gflops[1] and d.get("copy_gbs_2t") == c.copy_gbs.get(2)
    assert "copy" in c.how


STAT = "cpu  {u} 0 {s} {i} 0 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"


def test_cpu_jiffies_reads_the_aggregate_line():
    assert cpu_jiffies(STAT.format(u=10, s=5, i=85)) == (15, 100)
    with pytest.raises(ValueError, match="cpu"):
        cpu_jiffies("intr 1 2 3\n")


def test_load_meter_subtracts_this_process_own_cpu_time():
    tick = os.sysconf("SC_CLK_TCK")
    # 2 CPUs for 1 s of wall time = 2 * tick jiffies; 1.5 s of it busy, 0.5 s of that ours.
    stats = iter([(0, 0), (int(1.5 * tick), 2 * tick)])
    cpu = iter([10.0, 10.5])
    m = LoadMeter(read_stat=lambda: next(stats), cpu_clock=lambda: next(cpu), cpus=2)
    m.start()
    load = m.stop()
    assert load.source == "/proc/stat" and load.cores == pytest.approx(1.0)
    assert load.busy == (1.0 > NOISY_LOAD)


def test_load_meter_on_a_quiet_machine_reads_zero():
    tick = os.sysconf("SC_CLK_TCK")
    stats = iter([(0, 0), (tick, 2 * tick)])  # the busy second was all ours
    cpu = iter([0.0, 1.0])
    m = LoadMeter(read_stat=lambda: next(stats), cpu_clock=lambda: next(cpu), cpus=2)
    m.start()
    assert m.stop().cores == 0.0 and not m.load.busy


def test_load_meter_without_proc_stat_falls_back_to_the_load_average():
    m = LoadMeter(read_stat=lambda: None, cpu_clock=lambda: 0.0, cpus=2)
    m.start()
    load = m.stop()
    assert load.source in ("loadavg", "unknown") and load.cores >= 0.0
    with pytest.raises(RuntimeError, match="start"):
        LoadMeter().stop()


# ---- ceilings that keep their rules: rounds that moved, figures that cannot be a ceiling ---------
def test_measure_ceilings_marks_moved_rounds_and_withholds_an_impossible_figure(monkeypatch):
    from tinytorch.profiling import ceilings as ceilings_module

    def rounds_of(fns, rounds):  # seconds per sample, as measure_ceilings's fns return them
        assert set(fns) == {"fma 1", "fma 2", "copy 1", "copy 2"} and rounds == 3
        return {
            "fma 1": Timing((1 / 90, 1 / 50, 1 / 88)),  # one round 1.8x slower: moved
            "fma 2": Timing((1 / 180, 1 / 178, 1 / 175)),
            "copy 1": Timing((0.010, 0.010, 0.011)),
            "copy 2": Timing((0.100, 0.100, 0.100)),  # 10x slower on 2 threads than on 1
        }

    monkeypatch.setattr(ceilings_module, "_simd", lambda: None)
    monkeypatch.setattr(ceilings_module, "interleaved", rounds_of)
    got = ceilings_module.measure_ceilings(quick=True, rounds=3)
    assert got.moved == ("fma_gflops_1t",) and got.fma_gflops[1] == pytest.approx(90.0)
    assert 2 not in got.copy_gbs and "impossible for a ceiling" in got.withheld["copy_gbs_2t"]
    assert got.gbps == got.copy_gbs[1]  # the withheld figure never becomes the ceiling


@pytest.mark.parametrize(
    ("rate", "ceiling", "above"),
    [(121.0, 100.0, True), (120.0, 100.0, False), (None, 100.0, False), (float("nan"), 1.0, False),
     (5.0, 0.0, False), (True, 0.5, False)],
)  # fmt: skip
def test_above_ceiling_is_strictly_past_1_2_x_and_ignores_what_is_not_a_number(
    rate, ceiling, above
):
    from tinytorch.profiling.credible import CREDIBLE, above_ceiling

    assert CREDIBLE == 1.2 and above_ceiling(rate, ceiling) is above


def test_combine_rounds_needs_a_round_and_keeps_each_figures_best():
    from tinytorch.profiling import combine_rounds

    with pytest.raises(ValueError, match="rounds"):
        combine_rounds([])
    a = Ceilings({1: 80.0, 2: 150.0}, {1: 14.0, 2: 28.0}, "C++")
    b = Ceilings({1: 85.0, 2: 140.0}, {1: 13.0, 2: 30.0}, "C++")
    got = combine_rounds([a, b])
    assert got.fma_gflops == {1: 85.0, 2: 150.0} and got.copy_gbs == {1: 14.0, 2: 30.0}
    assert got.moved == () and got.withheld == {} and "2 rounds spread over the run" in got.how


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "4096"])
def test_measure_ceilings_rejects_a_bad_copy_size_by_name(bad):
    with pytest.raises(ValueError, match="copy_floats"):
        measure_ceilings(quick=True, rounds=1, copy_floats=bad)


def test_measure_ceilings_copies_an_array_of_the_size_asked(monkeypatch):
    from tinytorch.profiling import ceilings as ceilings_module

    monkeypatch.setattr(ceilings_module, "_simd", lambda: None)
    got = ceilings_module.measure_ceilings(quick=True, rounds=1, copy_floats=256 * 1024)
    assert "np.copyto of 1 MiB" in got.how
