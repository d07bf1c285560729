"""Apple Metal through PyTorch's MPS backend: C = A @ B on the "mps" device.

Only macOS on Apple silicon (or an AMD GPU) with an MPS-enabled torch can run it; everywhere else
`available()` says which of those is missing and `matmul` raises RuntimeError with that reason.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

import numpy as np

from .probe import TORCH_MISSING, torch_installed


def _torch_module() -> Any | None:
    """torch if it is installed, imported only on demand (it costs a second and ~300 MB)."""
    if "torch" in sys.modules:
        return sys.modules["torch"]
    if not torch_installed():
        return None
    import torch

    return torch


def available(torch_module: Any | None = None, system: str | None = None) -> tuple[bool, str]:
    """(True, reason) when torch can run on "mps"; the arguments let tests stand in for torch/OS."""
    system = system if system is not None else platform.system()
    if system != "Darwin":
        return False, f"MPS needs macOS with Metal; this is {system or 'an unknown OS'}"
    torch = torch_module if torch_module is not None else _torch_module()
    if torch is None:
        return False, TORCH_MISSING
    backend = getattr(getattr(torch, "backends", None), "mps", None)
    if backend is None:
        return False, f"torch {getattr(torch, '__version__', '?')} has no MPS backend"
    if not backend.is_built():
        return False, f"torch {torch.__version__} was built without MPS"
    if not backend.is_available():
        return False, "torch has MPS but no Metal device is available (macOS < 12.3 or no GPU?)"
    return True, f"torch {torch.__version__} on mps ({platform.machine()})"


def matmul(a: object, b: object) -> np.ndarray:
    """C = A @ B in float32 on the Metal GPU; NumPy in, NumPy out (copies both ways)."""
    ok, reason = available()
    if not ok:
        raise RuntimeError(f"MPS matmul unavailable: {reason}")
    import torch

    a32, b32 = _check(a, "a"), _check(b, "b")
    if a32.shape[1] != b32.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {a32.shape}, b is {b32.shape}")
    ta, tb = torch.from_numpy(a32).to("mps"), torch.from_numpy(b32).to("mps")
    out = ta @ tb
    torch.mps.synchronize()
    return out.cpu().numpy()


def _check(x: object, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
    return np.ascontiguousarray(arr, dtype=np.float32)
