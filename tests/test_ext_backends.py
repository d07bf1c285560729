"""Backend availability: MPS logic with stand-in torch modules, backend_status rows, tito bench."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import types

import numpy as np
import pytest
from tinytorch.extensions import backend_status, mps


def fake_torch(built: bool = True, available: bool = True, has_mps: bool = True) -> object:
    mps_ns = types.SimpleNamespace(is_built=lambda: built, is_available=lambda: available)
    backends = types.SimpleNamespace(mps=mps_ns) if has_mps else types.SimpleNamespace()
    return types.SimpleNamespace(__version__="9.9", backends=backends)


@pytest.mark.parametrize(
    "system,torch_mod,ok,why",
    [
        ("Linux", fake_torch(), False, "needs macOS"),
        ("Windows", fake_torch(), False, "needs macOS"),
        ("Darwin", fake_torch(has_mps=False), False, "no MPS backend"),
        ("Darwin", fake_torch(built=False), False, "built without MPS"),
        ("Darwin", fake_torch(available=False), False, "no Metal device"),
        ("Darwin", fake_torch(), True, "on mps"),
    ],
)
def test_mps_availability_reasons(system, torch_mod, ok, why) -> None:
    got_ok, reason = mps.available(torch_module=torch_mod, system=system)
    assert got_ok is ok and why in reason


def test_mps_without_torch_on_macos_says_so(monkeypatch) -> None:
    monkeypatch.setattr(mps, "_torch_module", lambda: None)
    ok, reason = mps.available(system="Darwin")
    assert not ok and "torch is not installed" in reason


@pytest.mark.skipif(sys.platform == "darwin", reason="tests the non-Apple fallback")
def test_mps_matmul_falls_back_with_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="MPS matmul unavailable: MPS needs macOS"):
        mps.matmul(np.ones((2, 2)), np.ones((2, 2)))


@pytest.mark.skipif(not mps.available()[0], reason=f"no MPS: {mps.available()[1]}")
def test_mps_matmul_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((37, 45)).astype(np.float32)
    b = rng.standard_normal((45, 29)).astype(np.float32)
    np.testing.assert_allclose(mps.matmul(a, b), a.astype(np.float64) @ b, atol=1e-3)


def test_backend_status_has_one_row_per_backend_and_never_imports_torch() -> None:
    code = (
        "import json, sys\n"
        "from tinytorch.extensions import backend_status\n"
        "rows = backend_status()\n"
        "print(json.dumps({'rows': rows, 'torch': 'torch' in sys.modules}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout.strip().splitlines()[-1])
    names = [r["name"] for r in data["rows"]]
    assert names == ["c++ simd", "torch", "mps", "triton"]
    for row in data["rows"]:
        assert set(row) == {"name", "available", "reason"}
        assert isinstance(row["available"], bool) and row["reason"]
    assert data["torch"] is False  # torch's libgomp must not be loaded just to ask


def test_backend_status_never_raises_when_a_probe_fails(monkeypatch) -> None:
    def boom() -> tuple[bool, str]:
        raise OSError("disk on fire")

    monkeypatch.setattr(mps, "available", boom)
    rows = {r["name"]: r for r in backend_status()}
    assert rows["mps"]["available"] is False and "disk on fire" in rows["mps"]["reason"]


def test_backend_status_without_torch_and_triton_installed(tmp_path) -> None:
    # A meta-path blocker makes torch and triton look uninstalled in a fresh interpreter.
    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('torch', 'triton'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import importlib.util\n"
        "_orig = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda n, *a: None if n.split('.')[0] in ('torch','triton') "
        "else _orig(n, *a)\n"
        "from tinytorch.extensions import backend_status\n"
        "rows = {r['name']: r for r in backend_status()}\n"
        "assert rows['torch']['available'] is False, rows\n"
        "assert 'not installed' in rows['torch']['reason']\n"
        "assert rows['triton']['available'] is False and 'not installed' in rows['triton']['reason']\n"
        "from tinytorch.extensions import triton_kernels as tk\n"
        "ok, why = tk.available()\n"
        "assert not ok and 'not installed' in why, why\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.slow
def test_tito_bench_quick_writes_json_with_ceilings_and_checks(tmp_path) -> None:
    path = tmp_path / "bench.json"
    # one ISA (an AVX-512 machine's default plan times the avx2 path as well: twice the time)
    exe = [sys.executable, "-m", "tinytorch.cli.main", "bench", "--quick", "--isa", "native"]
    out = subprocess.run(
        [*exe, "--json", str(path)], capture_output=True, text=True, timeout=300, check=False
    )
    doc = json.loads(path.read_text())
    assert doc["command"] == "tito bench --quick --isa native" and len(doc["runs"]) == 1
    report = doc["runs"][0]
    if "error" in report:
        pytest.skip(report["error"])
    assert out.returncode == 0, out.stdout + out.stderr
    assert "GEMM" in out.stdout and "bias+GELU" in out.stdout
    c = report["ceilings"]
    assert c["fma_gflops_1t"] > 0 and c["copy_gbs"] > 0
    assert report["checks"] and all(ch["ok"] for ch in report["checks"])
    row = report["gemm"][0]
    withheld = row.get("withheld", {})
    if row["c++ 1t"] is None:  # above 1.2x its ceiling on a busy machine: withheld, with the reason
        assert withheld.get("c++ 1t"), row
    else:
        peak = row["c++ 1t / peak"]
        assert row["c++ 1t"] > 0 and (peak is None and withheld or 0 < peak < 2), row
    assert row["flops"] == 2 * 256**3 and set(row["spread"]) >= {"c++ 1t", "numpy 1t"}
    assert row["load"] >= 0 and report["isa_requested"] in ("native", "avx2", "avx512")
    assert set(report["kernel"]) >= {"isa", "microkernel", "blocks"} and report["blas"]
    assert all({"target", "value", "want", "met"} <= set(t) for t in report["targets"])
    assert "n/a" not in out.stdout


@pytest.mark.slow
def test_a_torch_worker_that_does_not_answer_in_time_is_killed() -> None:
    from tinytorch.bench import native as benchmark

    worker = benchmark.TorchWorker(timeout=120)
    if not worker.ok:
        pytest.skip(f"no torch worker: {worker.reason}")
    worker.timeout = 0.001  # no 2048^3 GEMM answers within a millisecond
    assert math.isnan(worker.time({"op": "gemm", "n": 2048, "threads": 1}))
    assert not worker.ok  # killed, not waited for
    assert math.isnan(worker.time({"op": "gemm", "n": 8, "threads": 1}))


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton not installed")
def test_the_triton_row_without_a_gpu_does_not_import_triton() -> None:
    """Every `tito milestone run` lists the backends in its JSON: without a GPU (and without
    TRITON_INTERPRET) that row must not pay for importing triton, and must say what
    triton_kernels.available() says."""
    from tinytorch.extensions import gpu_device_nodes

    if gpu_device_nodes():
        pytest.skip("GPU device nodes exist here: the row imports triton to ask the GPU")
    code = (
        "import json, sys\n"
        "from tinytorch.extensions import backend_status\n"
        "row = backend_status()[-1]\n"
        "imported = 'triton' in sys.modules\n"
        "from tinytorch.extensions import triton_kernels\n"
        "print(json.dumps([row, imported, list(triton_kernels.available())]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    row, imported, direct = json.loads(out.stdout)
    assert not imported
    assert row["name"] == "triton" and [row["available"], row["reason"]] == direct
