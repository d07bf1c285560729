"""Where a wrong output is wrong, as small JSON-able data: what `tinytorch.viz.draw_case` draws.

Computed in the PARENT from the output the sandbox already returned, so drawing a failure never
runs student code again. Every array is rounded to 3 significant digits and pooled to at most
MAX_CELLS entries, so a case result stays a few kB in JSON and in the notebook.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinytorch.milestone07.cases import Case
from tinytorch.milestone07.references import ref_col2im

MAX_CELLS = 4096  # entries of an error map kept before max-pooling
MAX_POINTS = 600  # (x, error) pairs kept for the GELU drawing


def _sig(a: np.ndarray) -> list:
    """3 significant digits, as nested lists (JSON has no ndarray)."""
    a = np.asarray(a, dtype=np.float64)
    return [float(f"{v:.3g}") for v in a.ravel()] if a.ndim <= 1 else [_sig(r) for r in a]


def pool_max(err: np.ndarray, max_cells: int = MAX_CELLS) -> tuple[np.ndarray, int]:
    """Max-pool a 2-D map by the smallest integer factor that leaves <= max_cells entries."""
    h, w = err.shape
    f = 1
    while -(-h // f) * -(-w // f) > max_cells:
        f += 1
    if f == 1:
        return err, 1
    hp, wp = -(-h // f) * f, -(-w // f) * f
    padded = np.zeros((hp, wp))
    padded[:h, :w] = err
    return padded.reshape(hp // f, f, wp // f, f).max(axis=(1, 3)), f


def matmul_evidence(a: np.ndarray, b: np.ndarray, out: np.ndarray, tile: int) -> dict[str, Any]:
    """|C - A @ B| over (M, N), and how much of each k's product A[:, k] B[k, :] is missing.

    k_missing[k] solves residual = sum_k c_k A[:, k] B[k, :] by least squares: 1 where the
    kernel left k's contribution out, 0 where it was summed once, -1 where it was summed twice.
    """
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = a64 @ b64  # (M, N)
    err = np.abs(out.astype(np.float64) - ref)
    m, k = a.shape
    n = b.shape[1]
    missing: list[float] | None = None
    if m * n >= k:  # enough equations to tell the k's apart
        basis = np.einsum("ik,kj->ijk", a64, b64).reshape(m * n, k)  # (M*N, K): one column per k
        coef, *_ = np.linalg.lstsq(basis, (ref - out.astype(np.float64)).ravel(), rcond=None)
        missing = [round(float(c), 3) for c in coef]
    pooled, factor = pool_max(err)
    return {
        "kind": "tiled_matmul",
        "shape": [m, k, n],
        "tile": int(tile),
        "pool": factor,
        "error": _sig(pooled),
        "k_missing": missing,
    }


def gelu_evidence(x: np.ndarray, out: np.ndarray, ref: np.ndarray) -> dict[str, Any]:
    """|error| against x (sorted, subsampled), beside the float64 formula's values."""
    xs = x.astype(np.float64).ravel()
    err = np.abs(out.astype(np.float64).ravel() - ref.ravel())
    order = np.argsort(xs, kind="stable")
    pick = order[np.linspace(0, xs.size - 1, min(xs.size, MAX_POINTS)).astype(int)]
    worst = np.argsort(np.nan_to_num(err, nan=np.inf))[-20:]  # keep the worst points visible
    pick = np.unique(np.concatenate([pick, worst]))
    pick = pick[np.argsort(xs[pick], kind="stable")]
    return {
        "kind": "fused_gelu",
        "x": _sig(xs[pick]),
        "error": [None if not np.isfinite(e) else float(f"{e:.3g}") for e in err[pick]],
        "ref": _sig(ref.ravel()[pick]),
    }


def conv_evidence(out: np.ndarray, ref: np.ndarray) -> dict[str, Any]:
    """The worst |error| over images and filters at each output position (oh, ow)."""
    err = np.abs(out.astype(np.float64) - ref).max(axis=(0, 1))  # (oh, ow)
    return {"kind": "im2col_conv2d", "error": _sig(err), "shape": list(ref.shape)}


def col2im_evidence(out: np.ndarray, ref: np.ndarray, args: list[Any], kw: dict) -> dict[str, Any]:
    """The worst |error| over images and channels at each pixel, beside the window counts."""
    cols, x_shape, k = args[0], tuple(args[1]), args[2]
    c = x_shape[1]
    cover = ref_col2im(np.ones((cols.shape[0], c * k * k)), x_shape, k, kw["stride"], kw["padding"])
    err = np.abs(out.astype(np.float64) - ref).max(axis=(0, 1))  # (H, W)
    return {
        "kind": "col2im",
        "error": _sig(err),
        "coverage": cover[0, 0].astype(int).tolist(),  # (H, W) windows covering each pixel
        "geometry": {"k": int(k), "stride": kw["stride"], "padding": kw["padding"]},
    }


def im2col_evidence(out: np.ndarray, ref: np.ndarray, c: int, k: int) -> dict[str, Any]:
    """For each column of the student's im2col: which reference column it holds, as labels.

    expected[j] is (channel, kernel row, kernel col) of column j; actual[j] is the label of the
    reference column that column j equals (None when it equals none); wrong lists the j that differ.
    """
    labels = [[ch, ky, kx] for ch in range(c) for ky in range(k) for kx in range(k)]
    actual: list[list[int] | None] = []
    for j in range(out.shape[1]):
        col = out[:, j].astype(np.float64)
        match = np.flatnonzero(np.all(np.abs(ref - col[:, None]) <= 1e-6 + 1e-6 * np.abs(ref), 0))
        actual.append(labels[int(match[0])] if match.size else None)
    wrong = [j for j in range(len(labels)) if actual[j] != labels[j]]
    return {"kind": "im2col", "c": c, "k": k, "expected": labels, "actual": actual, "wrong": wrong}


def shape_evidence(out: np.ndarray, ref: np.ndarray) -> dict[str, Any]:
    """A wrong shape: the expected and the returned shapes (the last two axes are drawn)."""
    return {"kind": "shape", "expected": list(ref.shape), "actual": list(out.shape)}


def case_evidence(
    case: Case, args: list[Any], kwargs: dict[str, Any], out: np.ndarray, ref: np.ndarray
) -> dict[str, Any] | None:
    """The drawing data of a failing case: where it is wrong, or its wrong shape."""
    if out.shape != ref.shape:
        return shape_evidence(out, ref)
    if out.dtype.kind != "f":
        return None
    if case.group == "tiled_matmul":
        return matmul_evidence(args[0], args[1], out, kwargs["tile_size"])
    if case.group == "fused_gelu":
        return gelu_evidence(args[0], out, ref)
    if case.group == "im2col_conv2d":
        return conv_evidence(out, ref)
    if case.group == "col2im":
        return col2im_evidence(out, ref, args, kwargs)
    if case.group == "im2col":
        return im2col_evidence(out, ref, args[0].shape[1], args[1])
    return None
