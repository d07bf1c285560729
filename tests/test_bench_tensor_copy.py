"""benchmarks/bench_tensor_copy.py runs end to end, on one round and Part B's quick sizes: a smoke
test of the script, not of its figures (nothing here is timed against anything)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_tensor_copy.py"

pytestmark = pytest.mark.slow


def test_one_quick_round_prints_every_figure() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--rounds", "1", "--sizes", "quick"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    text = out.stdout
    assert re.search(r"Part A, run_part_a on the reference \(30 cases, \d+ checks\): median", text)
    assert re.search(r"\d+ calls, \d+ Tensors made from [\d.]+ MB handed over per run", text)
    assert "Tensor(value) copies" in text and "Tensor.wrap(value) shares" in text
    assert re.search(r"the copy costs [+-][\d.]+ ms per run .* % of Part A's wall time", text)
    rows = [line for line in text.splitlines() if "copying" in line and "sharing" in line]
    names = ["gemm 256x256x256", "bias+gelu 512x1024", "unfused_gelu, gelu", "fused_gelu, gelu"]
    assert len(rows) == 4 and all(any(n in r for r in rows) for n in names), rows
