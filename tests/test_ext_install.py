"""A regular (non-editable) install ships kernels.cpp as package data and builds it on first use."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tinytorch.extensions import build

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_regular_install_imports_tinytorch_extensions_and_builds(tmp_path) -> None:
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "*.so")
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, src / name)
    for name in ("tinytorch", "extensions"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "-q"]
    if importlib.util.find_spec("setuptools") and importlib.util.find_spec("wheel"):
        pip.append("--no-build-isolation")  # offline; Python >= 3.12 venvs lack setuptools
    proc = subprocess.run(
        [*pip, "--target", str(target), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

    code = (
        "import json, numpy as np\n"
        "import tinytorch\n"
        "from pathlib import Path\n"
        "from tinytorch.extensions import simd, backend_status\n"
        "src = Path(simd.__file__).with_name('kernels.cpp')\n"
        "a = np.arange(6, dtype=np.float32).reshape(2, 3)\n"
        "c = simd.matmul(a, a.T) if simd.available()[0] else None\n"
        "print(json.dumps({'pkg': tinytorch.__file__, 'ext': simd.__file__,\n"
        "    'cpp': src.is_file(), 'ok': simd.available(),\n"
        "    'c': None if c is None else c.tolist(), 'info': simd.build_info(),\n"
        "    'rows': [r['name'] for r in backend_status()]}))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(target), TINYTORCH_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert data["pkg"].startswith(str(target)) and data["ext"].startswith(str(target))
    assert data["cpp"] is True
    assert data["rows"] == ["c++ simd", "torch", "mps", "triton"]
    if build.find_compiler() is None:
        pytest.skip("no C++ compiler: the install is importable but the kernel cannot build")
    assert data["ok"][0], data["ok"]
    assert data["c"] == [[5.0, 14.0], [14.0, 50.0]]
    lib = data["info"]["library"]
    assert lib.startswith(str(tmp_path / "cache")) and not lib.startswith(str(target))
