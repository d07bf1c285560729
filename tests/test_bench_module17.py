"""benchmarks/bench_module17.py times with tinytorch.profiling itself: no second policy there."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tinytorch import profiling

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_module17.py"


@pytest.fixture(scope="module")
def bench17():
    spec = importlib.util.spec_from_file_location("bench_module17", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_it_uses_the_profiling_rounds_not_a_copy_of_them(bench17):
    assert bench17.interleaved_calls is profiling.interleaved_calls
    calls = {"a": 0, "b": 0}

    def count(name):
        return lambda: calls.__setitem__(name, calls[name] + 1)

    t = bench17.timed({"a": count("a"), "b": count("b")}, 3, 0.0)
    assert calls == {"a": 4, "b": 4}  # one warm-up call, then 3 timed rounds
    assert all(isinstance(v, profiling.Timing) and len(v.samples) == 3 for v in t.values())


def test_the_headline_is_the_median_of_per_round_ratios(bench17, capsys):
    t = {
        "ours": profiling.Timing((2.0, 4.0, 30.0)),
        "theirs": profiling.Timing((1.0, 1.0, 10.0)),
    }
    assert bench17.report(t, profiling.gemm(8).flops, "ours", "theirs") == 3.0  # 2, 4, 3
    assert "ratio of medians 4.00x" in capsys.readouterr().out
