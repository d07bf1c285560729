"""Plain float64 references and the inputs of each case: the spec the student's kernels must meet.

Kept obvious on purpose (loops over kernel offsets and windows); never optimise them.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from tinytorch.milestone07.cases import Case

SQRT_2_OVER_PI = np.sqrt(2.0 / np.pi)


def ref_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C = A @ B in float64."""
    return a.astype(np.float64) @ b.astype(np.float64)


def ref_gelu(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in float64."""
    x = x.astype(np.float64)
    return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x**3)))


def out_size(size: int, k: int, stride: int, padding: int) -> int:
    """Number of window positions along one axis: (size + 2p - k) // s + 1."""
    return (size + 2 * padding - k) // stride + 1


def ref_im2col(x: np.ndarray, k: int, stride: int, padding: int) -> np.ndarray:
    """(N, C, H, W) -> (N*oh*ow, C*k*k); rows (image, out row, out col), cols (channel, kr, kc)."""
    n, c, h, w = x.shape
    oh, ow = out_size(h, k, stride, padding), out_size(w, k, stride, padding)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    cols = np.empty((n * oh * ow, c * k * k), dtype=np.float64)
    row = 0
    for img in range(n):
        for i in range(oh):
            for j in range(ow):
                window = xp[
                    img, :, i * stride : i * stride + k, j * stride : j * stride + k
                ]  # (C, k, k)
                cols[row] = window.reshape(-1)
                row += 1
    return cols


def ref_col2im(
    cols: np.ndarray, x_shape: tuple[int, ...], k: int, stride: int, padding: int
) -> np.ndarray:
    """The adjoint of ref_im2col: scatter-add each row back to its window, then crop the padding."""
    n, c, h, w = x_shape
    oh, ow = out_size(h, k, stride, padding), out_size(w, k, stride, padding)
    xp = np.zeros((n, c, h + 2 * padding, w + 2 * padding), dtype=np.float64)
    row = 0
    for img in range(n):
        for i in range(oh):
            for j in range(ow):
                window = cols[row].astype(np.float64).reshape(c, k, k)
                xp[img, :, i * stride : i * stride + k, j * stride : j * stride + k] += window
                row += 1
    return xp[:, :, padding : padding + h, padding : padding + w]


def ref_conv2d(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, stride: int, padding: int
) -> np.ndarray:
    """Direct sliding-window convolution in float64: out[n, f, i, j] = sum x_window * w[f] + b[f]."""
    n, _, h, w = x.shape
    f, k = weight.shape[0], weight.shape[-1]
    oh, ow = out_size(h, k, stride, padding), out_size(w, k, stride, padding)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    wt = weight.astype(np.float64)
    out = np.zeros((n, f, oh, ow), dtype=np.float64)
    for i in range(oh):
        for j in range(ow):
            window = xp[
                :, :, i * stride : i * stride + k, j * stride : j * stride + k
            ]  # (N, C, k, k)
            out[:, :, i, j] = np.einsum("nckl,fckl->nf", window, wt)
    if bias is not None:
        out += bias.astype(np.float64)[None, :, None, None]
    return out


def ref_conv2d_grads(
    x: np.ndarray,
    weight: np.ndarray,
    with_bias: bool,
    grad: np.ndarray,
    stride: int,
    padding: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(grad x, grad weight, grad bias or None) of sum(conv2d(x, weight, bias) * grad), float64.

    One window at a time: each output position (i, j) adds grad[:, :, i, j] times the weights
    into its window of grad x (scatter-add), and times its window of x into grad weight.
    """
    _, _, h, w = x.shape
    kh, kw = weight.shape[2:]
    oh, ow = grad.shape[2:]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    wt, g = weight.astype(np.float64), grad.astype(np.float64)
    gxp = np.zeros_like(xp)  # (N, C, Hp, Wp)
    gw = np.zeros_like(wt)  # (F, C, kh, kw)
    for i in range(oh):
        for j in range(ow):
            rows = slice(i * stride, i * stride + kh)
            cols = slice(j * stride, j * stride + kw)
            gij = g[:, :, i, j]  # (N, F)
            gxp[:, :, rows, cols] += np.einsum("nf,fckl->nckl", gij, wt)
            gw += np.einsum("nf,nckl->fckl", gij, xp[:, :, rows, cols])
    gx = gxp[:, :, padding : padding + h, padding : padding + w]
    return gx, gw, (g.sum(axis=(0, 2, 3)) if with_bias else None)


def case_rng(case_name: str, seed: int) -> np.random.Generator:
    """A generator that depends only on (seed, case name), so any subset of cases draws the same data."""
    return np.random.default_rng([seed, zlib.crc32(case_name.encode())])


def make_call(case: Case, seed: int) -> tuple[str, list[Any], dict[str, Any]]:
    """The student call of one case: (function name, positional args, keyword args).

    ndarrays in args are float32 and become Tensors in the child process; other values pass as-is.
    """
    p = case.params
    rng = case_rng(case.name, seed)
    if case.group == "tiled_matmul":
        a = rng.standard_normal((p["m"], p["k"])).astype(np.float32)
        b = rng.standard_normal((p["k"], p["n"])).astype(np.float32)
        return "tiled_matmul", [a, b], {"tile_size": p["tile_size"]}
    if case.group == "fused_gelu":
        shape = tuple(p["shape"])
        if p["dist"] == "normal":
            x = p["scale"] * rng.standard_normal(shape)
        elif p["dist"] == "linspace":
            x = np.linspace(p["low"], p["high"], int(np.prod(shape))).reshape(shape)
        else:
            x = np.zeros(shape)
        return "fused_gelu", [x.astype(np.float32)], {}
    if case.group == "im2col_conv2d":
        n, c, h, w = p["x_shape"]
        k = p["kernel_size"]
        x = rng.standard_normal((n, c, h, w)).astype(np.float32)
        weight = (rng.standard_normal((p["out_channels"], c, k, k)) / k).astype(np.float32)
        bias = rng.standard_normal(p["out_channels"]).astype(np.float32) if p["bias"] else None
        kwargs = {"stride": p["stride"], "padding": p["padding"]}
        return "im2col_conv2d", [x, weight, bias], kwargs
    if case.group == "im2col":
        x = rng.standard_normal(tuple(p["x_shape"])).astype(np.float32)
        return "im2col", [x, p["kernel_size"]], {"stride": p["stride"], "padding": p["padding"]}
    if case.group == "col2im":
        n, c, h, w = p["x_shape"]
        k, s, pad = p["kernel_size"], p["stride"], p["padding"]
        rows = n * out_size(h, k, s, pad) * out_size(w, k, s, pad)
        g = rng.standard_normal((rows, c * k * k)).astype(np.float32)
        return "col2im", [g, tuple(p["x_shape"]), k], {"stride": s, "padding": pad}
    raise ValueError(f"make_call: unknown group {case.group!r}")


def reference(case: Case, args: list[Any], kwargs: dict[str, Any]) -> np.ndarray:
    """The float64 answer for a case's call."""
    if case.group == "tiled_matmul":
        return ref_matmul(args[0], args[1])
    if case.group == "fused_gelu":
        return ref_gelu(args[0])
    if case.group == "im2col_conv2d":
        return ref_conv2d(args[0], args[1], args[2], kwargs["stride"], kwargs["padding"])
    if case.group == "im2col":
        return ref_im2col(args[0], args[1], kwargs["stride"], kwargs["padding"])
    if case.group == "col2im":
        return ref_col2im(args[0], args[1], args[2], kwargs["stride"], kwargs["padding"])
    raise ValueError(f"reference: unknown group {case.group!r}")
