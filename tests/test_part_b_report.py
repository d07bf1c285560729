"""render_part_b: full reasons, each untimed backend once, flags spelled out, columns aligned."""

from __future__ import annotations

import sys

from tinytorch.extensions import mps
from tinytorch.extensions.torch_worker import TorchWorker

from tinytorch import extensions, profiling
from tinytorch.cli.info import backend_report
from tinytorch.milestone07 import bench_tasks
from tinytorch.milestone07.report import render_part_b
from tinytorch.milestone07.results import BenchRow, PartBResult

LONG = (
    "triton 3.9.0 is installed but there is no CUDA GPU (set TRITON_INTERPRET=1 before import to "
    "run the kernels slowly on the CPU; on Linux: pip install 'tinytorch-m07[triton]')"
)
G, BG = profiling.gemm(256), profiling.bias_gelu(512, 1024)


def _row(p, backend, status="ok", ms=1.0, rate=10.0, detail="", **kw) -> BenchRow:
    gemm = p.kind == "gemm"
    return BenchRow(
        p.name,
        p.kind,
        backend,
        status,
        ms if status == "ok" else None,
        rate if gemm and status == "ok" else None,
        None if gemm or status != "ok" else rate,
        detail,
        flops=p.flops,
        bytes=p.bytes,
        **kw,
    )


def _result() -> PartBResult:
    rows = [
        _row(G, "student", rate=None, flags=["incorrect"], detail="your tiled_matmul"),
        _row(G, "numpy", rate=1234.5, spread=0.5, load=1.7, flags=["noisy"]),
        _row(G, "mps", "unavailable", detail="MPS needs macOS with Metal; this is Linux"),
        _row(BG, "student", rate=None, flags=["not_credible"], detail="forged"),
        _row(BG, "triton", "unavailable", detail=LONG),
        _row(BG, "mps", "unavailable", detail="MPS needs macOS with Metal; this is Linux"),
        _row(BG, "student unfused_gelu", "unavailable", detail="unfused_gelu not in this module"),
    ]
    backends = [
        {"name": "mps", "available": False, "reason": "MPS needs macOS with Metal; this is Linux"},
        {"name": "triton", "available": False, "reason": LONG},
    ]
    ceilings = profiling.Ceilings({1: 90.0, 2: 170.0}, {1: 14.0, 2: 31.0}, "test").to_dict()
    return PartBResult(rows, backends, 3.0, ["the machine was busy: rerun"], ceilings)


def test_reasons_are_whole_and_each_untimed_backend_is_listed_once():
    text = render_part_b(_result())
    assert LONG in text and text.count(LONG) == 1
    assert text.count("MPS needs macOS with Metal") == 1
    assert "unfused_gelu not in this module" in text


def test_flags_are_spelled_out_and_uncredited_rows_show_no_rate():
    text = render_part_b(_result())
    assert "[incorrect: not credited] your tiled_matmul" in text
    assert "[not credible: not credited] forged" in text
    assert "[noisy: rerun]" in text and "1234.5" in text
    assert "WARNING: the machine was busy: rerun" in text
    assert "measured peak 170 GFLOP/s, copy bandwidth 31.0 GB/s" in text


def test_problem_blocks_line_up():
    lines = render_part_b(_result()).splitlines()
    heads = [i for i, line in enumerate(lines) if "median ms" in line]
    assert len(heads) == 2
    for i in heads:
        head = lines[i]
        ends = [head.index(t) + len(t) for t in ("median ms", "best ms", "/s", "spread", "load")]
        rows = []
        for line in lines[i + 1 :]:  # the block: the indented lines right under its header
            if not line.startswith("  "):
                break
            rows.append(line)
        assert rows
        for row in rows:  # every cell, a number or "-", ends under its column's title
            assert all(row[e - 1] != " " and row[e] == " " for e in ends), (head, row)


def test_tito_info_part_b_the_torch_worker_and_mps_give_one_torch_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # as if torch were not installed
    said = {
        "tito info": next(r["reason"] for r in backend_report() if r["name"] == "torch"),
        "part b": bench_tasks._torch()[1],
        "torch worker": TorchWorker().reason,
        "mps": mps.available(system="Darwin")[1],  # the hint MPS gives on a Mac
    }
    assert set(said.values()) == {extensions.TORCH_MISSING}, said
    assert "pip install torch==2.13.0" in extensions.TORCH_HINT  # README command 2's pin
