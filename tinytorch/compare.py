"""The one comparison helper: shape, then dtype, then finiteness, then |a - ref| <= atol + rtol*|ref|.

Used by the gate, the deeper checks, Part B's mismatch flag, the notebook and the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# float32 tolerances against float64 references: |out - ref| <= atol + rtol * |ref|
GEMM_TOL = (1e-4, 1e-3)  # (rtol, atol): sums of K products, each rounded once in float32
ELEMENTWISE_TOL = (1e-5, 1e-5)  # one formula per element: a few float32 roundings


@dataclass(frozen=True)
class Comparison:
    """Outcome of one comparison; `where` is the index of the worst element (None if not reached)."""

    ok: bool
    reason: str  # "" | "shape" | "dtype" | "nonfinite" | "tolerance"
    max_error: float | None  # max |a - ref| over all elements (None when shapes differ)
    where: list[int] | None
    detail: str


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.unravel_index(flat, shape)] if shape else []


def within(actual: np.ndarray, expected: np.ndarray, *, rtol: float, atol: float) -> np.ndarray:
    """The one tolerance rule, elementwise: |actual - expected| <= atol + rtol * |expected|."""
    expected = np.asarray(expected, dtype=np.float64)
    return np.abs(np.asarray(actual, dtype=np.float64) - expected) <= atol + rtol * np.abs(expected)


def all_within(actual: np.ndarray, expected: np.ndarray, *, rtol: float, atol: float) -> bool:
    """Same shape, and every element `within` the tolerance (a quick yes/no for diagnoses)."""
    if np.shape(actual) != np.shape(expected):
        return False
    return bool(within(actual, expected, rtol=rtol, atol=atol).all())


def compare(
    actual: np.ndarray,
    expected: np.ndarray,
    *,
    rtol: float,
    atol: float,
    dtype: np.dtype | type | None = np.float32,
) -> Comparison:
    """Check `actual` against the float64 `expected`, in the order shape, dtype, finite, tolerance."""
    actual = np.asarray(actual)
    expected = np.asarray(expected, dtype=np.float64)
    if actual.shape != expected.shape:
        return Comparison(
            False, "shape", None, None, f"wrong shape {actual.shape}, expected {expected.shape}"
        )
    if dtype is not None and actual.dtype != np.dtype(dtype):
        return Comparison(
            False, "dtype", None, None, f"dtype {actual.dtype}, expected {np.dtype(dtype)}"
        )
    if actual.dtype.kind not in "fiub":
        return Comparison(False, "dtype", None, None, f"non-numeric dtype {actual.dtype}")
    a64 = actual.astype(np.float64)
    bad = ~np.isfinite(a64)
    if bad.any():
        first = _index(int(np.flatnonzero(bad)[0]), actual.shape)
        n_nan, n_inf = int(np.isnan(a64).sum()), int(np.isinf(a64).sum())
        return Comparison(
            False,
            "nonfinite",
            None,
            first,
            f"{n_nan} NaN and {n_inf} inf in the output, the first at {first}",
        )
    if actual.size == 0:
        return Comparison(True, "", 0.0, None, "empty output, shapes agree")
    ok = within(a64, expected, rtol=rtol, atol=atol)
    err = np.abs(a64 - expected)
    max_error = float(err.max())
    if not ok.all():
        excess = err - (atol + rtol * np.abs(expected))  # the worst offender has the most
        worst = int(np.argmax(excess))
        where = _index(worst, actual.shape)
        n_bad = int((~ok).sum())
        return Comparison(
            False,
            "tolerance",
            max_error,
            where,
            f"{n_bad} of {actual.size} values off; at {where} got {actual.flat[worst]:.6g}, "
            f"expected {expected.flat[worst]:.6g} (max |error| {max_error:.3g}, "
            f"allowed {atol:g} + {rtol:g}*|ref|)",
        )
    where = _index(int(np.argmax(err)), actual.shape)
    return Comparison(
        True, "", max_error, where, f"max |error| {max_error:.3g} within {atol:g} + {rtol:g}*|ref|"
    )
