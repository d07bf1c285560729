"""Module 14: latency and peak-memory measurements return sane numbers and reject bad arguments."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest

from tinytorch.profiling import measure_latency, measure_peak_memory

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
