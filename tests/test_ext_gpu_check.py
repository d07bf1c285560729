"""benchmarks/gpu_check.py cannot meet a GPU here: check its no-GPU exit and a CPU dry run of it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"
HAVE = importlib.util.find_spec("triton") is not None and importlib.util.find_spec("torch")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )


def test_without_a_cuda_device_it_says_so_and_exits_2() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["CUDA_VISIBLE_DEVICES"] = ""  # hides any GPU, so this path is tested everywhere
    out = run(env=env)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "no CUDA GPU" in out.stdout and "nothing was run" in out.stdout


@pytest.mark.skipif(not HAVE, reason="triton and torch are not installed")
def test_cpu_interpreter_dry_run_executes_every_section(tmp_path) -> None:
    path = tmp_path / "gpu.json"
    out = run("--cpu-interpreter", "--json", str(path))
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    report = json.loads(path.read_text())
    assert report["checks"] and all(c["ok"] for c in report["checks"])
    assert {"copy_gbs", "triton_bias_gelu_gbs", "torch_bias_gelu_gbs"} <= set(report["bandwidth"])
    assert "triton gemm+bias+gelu ieee" in report["gemm_tflops"]
    assert report["numpy_roundtrip_gemm_s"] > 0
