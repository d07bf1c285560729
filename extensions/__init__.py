"""Bundled native reference kernels, imported as `tinytorch.extensions`.

Backends: `simd` (C++ AVX2/NEON, built on first use), `mps` (Apple Metal via torch), `triton`
(CUDA GPUs, or the CPU interpreter). Each backend module exposes `available() -> (bool, reason)`.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Callable

# The one torch install hint: `tito info`, Part B's rows, the torch worker and MPS all say it.
TORCH_HINT = "pip install torch==2.13.0 for the CPU wheel"
TORCH_MISSING = f"torch is not installed ({TORCH_HINT})"


def _row(name: str, probe: Callable[[], tuple[bool, str]]) -> dict[str, object]:
    try:
        ok, reason = probe()
    except Exception as exc:  # noqa: BLE001 - a status report must never raise
        ok, reason = False, f"probe failed: {type(exc).__name__}: {exc}"
    return {"name": name, "available": bool(ok), "reason": str(reason)}


def _simd() -> tuple[bool, str]:
    from . import simd

    return simd.available()


def _torch_cpu() -> tuple[bool, str]:
    # Not imported here: torch loads its own libgomp into the process (see simd/bench notes).
    if importlib.util.find_spec("torch") is None:
        return False, TORCH_MISSING
    if "torch" in sys.modules:
        version = sys.modules["torch"].__version__
    else:
        version = importlib.metadata.version("torch")
    return True, f"torch {version} (CPU)"


def _mps() -> tuple[bool, str]:
    from . import mps

    return mps.available()


NO_GPU = (
    "triton {version} is installed but there is no CUDA GPU "
    "(set TRITON_INTERPRET=1 before import to run the kernels slowly on the CPU)"
)


def gpu_device_nodes() -> bool:
    """A cheap pre-check that needs no torch: NVIDIA, WSL or ROCm device nodes exist."""
    paths = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg", "/dev/kfd", "/proc/driver/nvidia")
    return any(os.path.exists(p) for p in paths)


def _triton() -> tuple[bool, str]:
    if importlib.util.find_spec("triton") is None:
        return False, "triton is not installed (Linux: pip install 'tinytorch-m07[triton]')"
    loaded = f"{__name__}.triton_kernels" in sys.modules
    if not loaded and os.environ.get("TRITON_INTERPRET", "") != "1" and not gpu_device_nodes():
        # Nothing could run the kernels: say so without importing triton, which costs 0.35 s of
        # every `tito milestone run` (its JSON environment lists the backends).
        return False, NO_GPU.format(version=importlib.metadata.version("triton"))
    from . import triton_kernels

    return triton_kernels.available()


def backend_status() -> list[dict[str, object]]:
    """One row per backend: {"name", "available", "reason"}. Never raises."""
    return [
        _row("c++ simd", _simd),
        _row("torch", _torch_cpu),
        _row("mps", _mps),
        _row("triton", _triton),
    ]
