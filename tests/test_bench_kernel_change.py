"""benchmarks/bench_kernel_change.py: the base library really is built from the base revision, and
the script runs end to end on one tiny round (a smoke test; nothing here is timed against anything)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from tinytorch.extensions import simd

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_kernel_change.py"
OK, REASON = simd.available()
pytestmark = [
    pytest.mark.skipif(not OK, reason=f"C++ kernels unavailable: {REASON}"),
    pytest.mark.skipif(shutil.which("git") is None, reason="no git: the base comes from git show"),
]


def _script() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("bench_kernel_change", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.mark.slow
def test_the_base_library_is_compiled_from_the_base_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    (repo / "extensions").mkdir(parents=True)
    source = (ROOT / "extensions" / "kernels.cpp").read_text()
    assert '#define TT_UKERNEL_NAME "' in source
    marked = re.sub(r'(#define TT_UKERNEL_NAME ")', r"\1base-rev ", source)
    (repo / "extensions" / "kernels.cpp").write_text(marked)
    shutil.copytree(ROOT / "extensions" / "csrc", repo / "extensions" / "csrc")  # its parts
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    # the working tree moves on: the base must still be what was committed
    (repo / "extensions" / "kernels.cpp").write_text(source)
    module = _script()
    monkeypatch.setattr(module, "REPO", repo)
    monkeypatch.setenv("TINYTORCH_CACHE_DIR", str(tmp_path / "cache"))
    lib = module.base_library("HEAD", tmp_path)
    assert lib.tt_microkernel().decode().startswith("base-rev ")
    assert not simd.build_info()["microkernel"].startswith("base-rev")


def test_an_unknown_base_is_refused_by_name() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--base", "no-such-revision", "--sizes", "8"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode != 0
    assert "--base 'no-such-revision'" in out.stderr, out.stderr[-2000:]


@pytest.mark.slow
def test_one_round_prints_the_paired_ratios_of_both_kernels() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--base", "HEAD", "--sizes", "40", "--gelu", "64x40",
         "--threads", "1,2", "--rounds", "1"],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert re.search(r"^anchor: NumPy's BLAS, \w+ kernels \w+", out.stdout, re.MULTILINE), (
        out.stdout
    )
    for label, anchor, unit in (
        ("gemm 40", "OpenBLAS", "GFLOP/s"),
        ("bias\\+gelu 64x40", "copy", "GB/s"),
    ):
        rows = [
            line for line in out.stdout.splitlines()
            if re.match(rf"\s*{label} \|\s+[12] \|.* {anchor} [\d.]+ \|", line)
        ]  # fmt: skip
        assert len(rows) == 2, out.stdout
        for row in rows:
            assert len(re.findall(r"\d+\.\d{3}x", row)) == 3 and row.endswith(unit), row


def test_a_bad_gelu_shape_is_refused_by_name() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--gelu", "4096by4096"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 2
    assert "--gelu" in out.stderr and "ROWSxCOLS" in out.stderr, out.stderr
