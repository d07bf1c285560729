"""Bundled native reference kernels, imported as `tinytorch.extensions`.

Each backend module exposes `available() -> (bool, reason)`.
"""

from __future__ import annotations


def backend_status() -> list[dict[str, object]]:
    """One row per backend: {"name", "available", "reason"}. Never raises."""
    return []
