"""Part B's text (bench.report.part_b_text, which the terminal report and the notebook show): full
reasons, each untimed backend once, flags spelled out, columns aligned, descriptions under their
row, plain sentences, one progress line per row; the fusion lesson's rows state their time in
copies of the array, and the reference's passes are counted from the reference's code."""

from __future__ import annotations

import sys
import types
from typing import ClassVar

import numpy as np
import pytest
from tinytorch.extensions import mps

from tinytorch import extensions, profiling
from tinytorch.bench import part_b
from tinytorch.bench import tasks as bench_tasks
from tinytorch.bench.report import WIDTH, part_b_text, progress_line
from tinytorch.bench.tasks import GELU_PASSES
from tinytorch.bench.torch_worker import TorchWorker
from tinytorch.core.tensor import Tensor
from tinytorch.milestone07.references import ref_gelu
from tinytorch.milestone07.results import BenchRow, PartBResult
from tinytorch.profiling.environment import backend_report

render_part_b = part_b_text  # what tinytorch.render.terminal.render_part_b prints

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
    text = " ".join(render_part_b(_result()).split())  # wrapped lines joined back
    assert LONG in text and text.count(LONG) == 1
    assert text.count("MPS needs macOS with Metal") == 1
    assert "unfused_gelu not in this module" in text


def test_flags_are_spelled_out_and_uncredited_rows_show_no_rate():
    text = render_part_b(_result())
    lines = text.splitlines()
    for flag, detail in (("[incorrect: not credited]", "your tiled_matmul"),
                         ("[not credible: not credited]", "forged")):  # fmt: skip
        i = next(i for i, line in enumerate(lines) if line.endswith(flag))
        assert lines[i + 1] == f"    {detail}"  # the description, under its row
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
            if not line.startswith("    "):  # a row, not the description under one
                rows.append(line)
        assert rows
        for row in rows:  # every cell, a number or "-", ends under its column's title
            assert all(row[e - 1] != " " and row[e] == " " for e in ends), (head, row)


class _CountingArray(np.ndarray):
    """Counts the ufunc calls made on it (each one pass over memory) and stays itself."""

    calls: ClassVar[list[str]] = []

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        _CountingArray.calls.append(ufunc.__name__)
        plain = [i.view(np.ndarray) if isinstance(i, _CountingArray) else i for i in inputs]
        if out is not None:
            kwargs["out"] = tuple(o.view(np.ndarray) for o in out)
        result = getattr(ufunc, method)(*plain, **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return result.view(_CountingArray) if isinstance(result, np.ndarray) else result


@pytest.mark.parametrize("name", ["unfused_gelu", "fused_gelu"])
def test_the_stated_pass_counts_are_the_reference_gelus_ufunc_calls(name) -> None:
    from tinytorch.perf import acceleration

    x = np.linspace(-5, 5, 64, dtype=np.float32).view(_CountingArray)
    _CountingArray.calls = []
    out = getattr(acceleration, name)(Tensor.wrap(x))
    calls = list(_CountingArray.calls)
    assert len(calls) == GELU_PASSES[name], calls
    got = out.data.view(np.ndarray)
    np.testing.assert_allclose(got, ref_gelu(x.view(np.ndarray)), rtol=1e-5, atol=1e-6)


def test_the_gelu_block_states_each_rows_passes_over_memory(monkeypatch) -> None:
    from tinytorch.perf import acceleration

    m, n = 4, 8
    fake_simd = types.SimpleNamespace(  # the C++ row's own task and wording, without a build
        fused_bias_gelu=lambda y, bias, out: np.copyto(out, ref_gelu(y + bias)) or out,
        copy=lambda y, out: np.copyto(out, y) or out,  # one pass, timed in the same rounds
    )
    monkeypatch.setattr(bench_tasks, "_simd", lambda: (fake_simd, "avx2, OpenMP, 2 threads"))
    replies = {
        "student unfused_gelu": bench_tasks.student_unfused_gelu(acceleration, m=m, n=n, repeats=1),
        "student fused_gelu": bench_tasks.student_fused_gelu(acceleration, m=m, n=n, repeats=1),
        "c++ simd": bench_tasks.simd_fused_gelu(None, m=m, n=n, repeats=1),
    }
    problem = profiling.gelu(m, n)
    rows = [
        part_b.bench_row(problem, backend, {"status": "ok", "value": value, "wall_s": 60.0})
        for backend, value in replies.items()
    ]
    assert all(r.status == "ok" and r.gbps for r in rows), rows
    ceilings = profiling.Ceilings({1: 90.0}, {1: 14.0}, "test").to_dict()
    lines = render_part_b(PartBResult(rows, [], 1.0, [], ceilings)).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(problem.name))
    block: dict[str, str] = {}  # backend's last word -> its row line and the description under it
    last = ""
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        if line.startswith("    "):
            block[last] += " " + line.strip()
        else:
            last = line.split()[1]
            block[last] = line
    assert "reference" not in block["unfused_gelu"] + block["fused_gelu"]  # the student's rows
    assert "C++ fused kernel (avx2, OpenMP, 2 threads): 1 pass over memory" in block["simd"]
    fusion = lines[lines.index(next(x for x in lines if x.startswith("Fusion:"))) :]
    for backend in replies:
        assert any(line.startswith(f"  {backend} ") and "copies" in line for line in fusion)
    said = " ".join(" ".join(fusion).split())  # the reference's counts, said as the reference's
    assert "the reference's unfused_gelu makes 9 passes over memory, each into a new array" in said
    assert "its fused_gelu 9 in-place passes into 2 buffers" in said


def test_a_time_under_one_pass_is_marked_impossible_never_stated() -> None:
    row = BenchRow("gelu 8x8", "gelu", "c++ simd", "ok", 0.001, None, 40.0, "C++", pass_ms=0.002)
    ceilings = profiling.Ceilings({1: 90.0}, {1: 20.0}, "test").to_dict()
    text = render_part_b(PartBResult([row], [], 1.0, [], ceilings))
    assert "under 1 copy (0.5 measured): impossible" in text and "as long as   0.5" not in text


def test_each_gelu_row_times_its_pass_in_its_own_rounds() -> None:
    from tinytorch.perf import acceleration

    value = bench_tasks.student_fused_gelu(acceleration, m=4, n=8, repeats=3)
    assert value["status"] == "ok" and value["pass_ms"] > 0  # a copy before each sample
    row = part_b.bench_row(profiling.gelu(4, 8), "student fused_gelu",
                           {"status": "ok", "value": value, "wall_s": 60.0})  # fmt: skip
    assert row.pass_ms == value["pass_ms"]
    text = render_part_b(PartBResult([row], [], 1.0, [], None))  # no ceiling needed
    assert f"(one copy: {row.pass_ms:.2f} ms)" in text


def test_descriptions_wrap_under_their_own_column_and_every_line_fits() -> None:
    result = _result()
    result.rows.append(_row(G, "c++ simd", detail=LONG + "; " + LONG))  # two lines and more
    lines = render_part_b(result).splitlines()
    assert all(len(line) <= WIDTH for line in lines), max(lines, key=len)
    i = next(i for i, line in enumerate(lines) if line.startswith("  c++ simd"))
    described = []
    for line in lines[i + 1 :]:
        if not line.startswith("    "):
            break
        described.append(line)
    assert len(described) >= 3 and all(line[4] != " " for line in described)  # under the row
    assert " ".join(x.strip() for x in described) == LONG + "; " + LONG  # whole, in order
    warning = next(i for i, line in enumerate(lines) if line.startswith("WARNING: "))
    assert lines[warning + 1].startswith(" " * len("WARNING: ")) or len(lines[warning]) < WIDTH - 20


def test_the_words_are_plain_sentences_a_student_reads_once() -> None:
    from tinytorch.bench import report

    text = render_part_b(_result())
    assert "a pass being" not in text and "q3 - q1" not in text
    for paragraph in (*report.INTRO, report.FUSION):
        for sentence in paragraph.replace(": ", ". ").split(". "):
            assert len(sentence.split()) <= 22, sentence  # one idea per sentence
            assert ";" not in sentence, sentence


def test_ceilings_that_moved_say_so_beside_the_figures_they_set() -> None:
    result = _result()
    moved = profiling.Ceilings({1: 90.0, 2: 170.0}, {1: 14.0}, "test", moved=("fma_gflops_2t",))
    result.ceilings = moved.to_dict()
    text = " ".join(render_part_b(result).split())
    assert "measured peak 170 GFLOP/s, copy bandwidth 14.0 GB/s (test). They moved" in text
    result.ceilings = profiling.Ceilings({1: 90.0}, {1: 14.0}, "test").to_dict()
    assert "moved" not in render_part_b(result)


def test_one_progress_line_per_row_names_the_row_and_its_time_not_an_unchecked_rate() -> None:
    row = _row(G, "numpy", ms=0.52, rate=64.3, samples=12)
    line = progress_line(3, 17, row)
    assert line == "Part B 3/17: numpy, gemm 256x256x256: 0.52 ms (12 runs)"
    assert "\n" not in line and "GFLOP/s" not in line  # rates come checked, in the table
    gone = _row(BG, "mps", "unavailable", detail="MPS needs macOS")
    assert progress_line(17, 17, gone).endswith("bias+gelu 512x1024: not available")


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
