"""Example tiled_matmul bugs, so a student sees each bug's heatmap pattern before having one.

Our own code (never a student's), so the heatmap runs them in the notebook's process, graded by
the same grade_case as a student's kernel.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tinytorch.milestone07.cases import Case
from tinytorch.milestone07.part_a import grade_grid
from tinytorch.milestone07.results import CaseResult

Kernel = Callable[[np.ndarray, np.ndarray, int], np.ndarray]


def _tiled(a: np.ndarray, b: np.ndarray, tile: int, *, k_end: int, step_end: int, add: bool):
    m, k = a.shape
    n = b.shape[1]
    c = np.zeros((m, n), dtype=np.float32)  # (M, N)
    for i0 in range(0, m, tile):
        i1 = min(i0 + tile, m)
        for j0 in range(0, n, tile):
            j1 = min(j0 + tile, n)
            for k0 in range(0, k_end(k, tile), tile):
                k1 = min(k0 + tile - step_end, k)
                block = a[i0:i1, k0:k1] @ b[k0:k1, j0:j1]
                if add:
                    c[i0:i1, j0:j1] += block
                else:
                    c[i0:i1, j0:j1] = block
    return c


def drops_ragged_k(a: np.ndarray, b: np.ndarray, tile: int) -> np.ndarray:
    """`range(0, K - K % tile, tile)`: the last, shorter K-block is never added."""
    return _tiled(a, b, tile, k_end=lambda k, t: k - k % t, step_end=0, add=True)


def assigns(a: np.ndarray, b: np.ndarray, tile: int) -> np.ndarray:
    """`C[...] = A @ B` instead of `+=`: only the last K-block survives."""
    return _tiled(a, b, tile, k_end=lambda k, t: k, step_end=0, add=False)


def off_by_one(a: np.ndarray, b: np.ndarray, tile: int) -> np.ndarray:
    """`k1 = min(k0 + tile - 1, K)`: the last k of every full K-block is skipped."""
    return _tiled(a, b, tile, k_end=lambda k, t: k, step_end=1, add=True)


YOURS = "your kernel"
BUGS: dict[str, Kernel] = {
    "example bug: drops the ragged K tile": drops_ragged_k,
    "example bug: = instead of +=": assigns,
    "example bug: off-by-one tile end": off_by_one,
}


def bug_grid(kernel: Kernel) -> Callable[..., list[CaseResult]]:
    """A stand-in for check_matmul_grid that grades `kernel` (ours, run in this process) through
    the same grade_grid, on the same cases and data."""

    def grid(
        impl: str,
        shapes: Sequence[tuple[int, int, int]],
        tile_sizes: Sequence[int],
        *,
        seed: int = 0,
        timeout: float = 5.0,
    ) -> list[CaseResult]:
        def call(case: Case, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
            start = time.perf_counter()
            c = kernel(args[0], args[1], kwargs["tile_size"])
            return {"status": "ok", "output": c, "seconds": time.perf_counter() - start}

        return grade_grid(call, shapes, tile_sizes, seed=seed)

    return grid
