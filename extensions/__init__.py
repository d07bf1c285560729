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

from .probe import NO_GPU, TORCH_HINT, TORCH_MISSING, gpu_device_nodes, torch_version

__all__ = ["NO_GPU", "TORCH_HINT", "TORCH_MISSING", "backend_status", "gpu_device_nodes"]


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
    return torch_version()


def _mps() -> tuple[bool, str]:
    from . import mps

    return mps.available()


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
