"""Backend probing's one home: is torch installed, are there GPU device nodes, and the words used
to say why not. Imports nothing heavy (torch and triton are looked up, not imported)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys

# The one torch install hint: `tito info`, Part B's rows, the torch worker and MPS all say it.
TORCH_HINT = "pip install torch==2.13.0 for the CPU wheel"
TORCH_MISSING = f"torch is not installed ({TORCH_HINT})"

NO_GPU = (
    "triton {version} is installed but there is no CUDA GPU "
    "(set TRITON_INTERPRET=1 before import to run the kernels slowly on the CPU)"
)


def torch_installed() -> bool:
    """Whether torch can be imported, without importing it (it brings its own OpenMP runtime)."""
    return importlib.util.find_spec("torch") is not None


def torch_version() -> tuple[bool, str]:
    """(True, "torch X (CPU)") or (False, TORCH_MISSING)."""
    if not torch_installed():
        return False, TORCH_MISSING
    if "torch" in sys.modules:
        version = sys.modules["torch"].__version__
    else:
        version = importlib.metadata.version("torch")
    return True, f"torch {version} (CPU)"


def gpu_device_nodes() -> bool:
    """A cheap pre-check that needs no torch: NVIDIA, WSL or ROCm device nodes exist."""
    paths = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg", "/dev/kfd", "/proc/driver/nvidia")
    return any(os.path.exists(p) for p in paths)
