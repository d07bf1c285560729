"""Module 17: acceleration kernels in NumPy, graded by Milestone 07.

    tiled_matmul   C = A @ B, computed tile by tile (the loop nest every fast GEMM is built on)
    fused_gelu     GELU (tanh approximation) in a few in-place passes over one buffer
    im2col         (N, C, H, W) -> (N*oh*ow, C*kh*kw): every receptive field becomes one row
    col2im         the adjoint of im2col: scatter-add each row back to the pixels it came from
    im2col_conv2d  conv = im2col, then one matrix multiply with weight.reshape(O, -1)

Each function accepts Tensors or array-likes and returns a float32 Tensor; inputs are never
modified. Code between `### BEGIN SOLUTION` and `### END SOLUTION` is what the student edition
(`tito release 17`) replaces with `raise NotImplementedError`; argument checking stays outside
those regions so that the student edition still rejects bad input with a clear error.
"""

from __future__ import annotations

import math
from numbers import Integral
from typing import Any

import numpy as np

from tinytorch.core.autograd import Function
from tinytorch.core.tensor import Tensor
from tinytorch.nn.geometry import ConvGeometry, conv_geometry

__all__ = ["col2im", "fused_gelu", "im2col", "im2col_conv2d", "tiled_matmul"]

ArrayLike = Any  # a Tensor or anything np.asarray turns into a real-valued array


def _as_float32(value: ArrayLike, name: str, where: str) -> np.ndarray:
    """The float32 data of a Tensor or array-like; errors name the argument."""
    if isinstance(value, Tensor):
        return value.data
    try:
        return Tensor(value).data
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{where}: {name} could not be read as a float32 array ({exc})") from None


# --------------------------------------------------------------------------------------------
# tiled_matmul
# --------------------------------------------------------------------------------------------


def _check_matmul(a: np.ndarray, b: np.ndarray, tile_size: object) -> int:
    where = "tiled_matmul"
    if a.ndim != 2:
        raise ValueError(f"{where}: a must be 2-D (M, K), got shape {a.shape}")
    if b.ndim != 2:
        raise ValueError(f"{where}: b must be 2-D (K, N), got shape {b.shape}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"{where}: inner dimensions differ: a is {a.shape} and b is {b.shape} "
            f"(a.shape[1] must equal b.shape[0])"
        )
    if isinstance(tile_size, bool) or not isinstance(tile_size, Integral):
        raise TypeError(
            f"{where}: tile_size must be a positive int, got {type(tile_size).__name__} "
            f"{tile_size!r}"
        )
    if tile_size < 1:
        raise ValueError(f"{where}: tile_size must be a positive int, got {tile_size}")
    return int(tile_size)


def tiled_matmul(a: ArrayLike, b: ArrayLike, tile_size: int = 64) -> Tensor:
    """C[i, j] = sum_k A[i, k] B[k, j], one (tile x tile) block of C at a time.

    Blocked loop nest (T = tile_size; the last tile on each axis may be smaller):

        for i0 in 0, T, 2T, ... < M:
            for j0 in 0, T, 2T, ... < N:
                C[i0:i0+T, j0:j0+T]  = A[i0:i0+T, 0:T]  @ B[0:T,  j0:j0+T]
                C[i0:i0+T, j0:j0+T] += A[i0:i0+T, T:2T] @ B[T:2T, j0:j0+T]   # ... every k-tile

    Each block product touches three T x T tiles, which stay in cache while each element is
    reused T times. Slicing past the end of an axis stops at the end, so the ragged last tile on
    every axis is covered by the same code. Partial products go through one preallocated T x T
    buffer (`out=`), so the loop allocates nothing per tile.
    """
    a_ = _as_float32(a, "a", "tiled_matmul")
    b_ = _as_float32(b, "b", "tiled_matmul")
    t = _check_matmul(a_, b_, tile_size)
    ### BEGIN SOLUTION
    # HINT: C = np.zeros((M, N)); for each (i0, j0) output tile, for each k-tile:
    # HINT: np.matmul(A_tile, B_tile, out=buffer), then C_tile += buffer
    m, k = a_.shape
    n = b_.shape[1]
    c = np.zeros((m, n), dtype=np.float32)  # (M, N); stays zero when K == 0
    partial = np.empty((min(t, m), min(t, n)), dtype=np.float32)  # (<=T, <=T), reused
    for i0 in range(0, m, t):
        for j0 in range(0, n, t):
            c_tile = c[i0 : i0 + t, j0 : j0 + t]  # (<=T, <=T) view of C
            buf = partial[: c_tile.shape[0], : c_tile.shape[1]]
            for k0 in range(0, k, t):
                a_tile = a_[i0 : i0 + t, k0 : k0 + t]  # (<=T, <=T)
                b_tile = b_[k0 : k0 + t, j0 : j0 + t]  # (<=T, <=T)
                if k0 == 0:
                    np.matmul(a_tile, b_tile, out=c_tile)  # the first k-tile writes C directly
                else:
                    np.matmul(a_tile, b_tile, out=buf)
                    c_tile += buf  # accumulate: the k-tiles sum into the same output tile
    return Tensor(c)
    ### END SOLUTION


# --------------------------------------------------------------------------------------------
# fused_gelu
# --------------------------------------------------------------------------------------------

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715
# Beyond these bounds float32 GELU is exactly x (above) or rounds to 0 (below); clipping the
# argument of the cubic keeps t*t*t and exp() far from overflow for every finite float32.
_GELU_HI = 10.0  # exp(2u(10)) = 8.3e37 < float32 max, and sigmoid(2u(10)) rounds to 1
_GELU_LO = -20.0  # exp(2u(-20)) underflows to exactly 0, so gelu(x) = x * 0 for x <= -20


def fused_gelu(x: ArrayLike) -> Tensor:
    """gelu(x) = 0.5 x (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3), computed as x * sigmoid(2u).

    Why x * sigmoid(2u) and not 0.5 x (1 + tanh u): they are equal, but for negative x the
    second form subtracts two numbers close to 1 and loses all relative accuracy, while
    sigmoid(2u) = e / (1 + e), e = exp(2u), keeps it. The cubic is evaluated on a copy of x
    clipped to [-20, 10] so that nothing overflows: for x > 10, sigmoid(2u) is exactly 1 in
    float32, and for x < -20, e underflows to exactly 0 (so even x = -3.4e38 gives -0.0).

    Two float32 buffers (the output and one temporary) and nine in-place passes; the cubic is
    written t * (2k + 2kc t*t) (Horner form of 2k(t + c t*t*t)), never with a power.
    """
    xs = _as_float32(x, "x", "fused_gelu")
    ### BEGIN SOLUTION
    # HINT: y = x * sigmoid(2u); compute u on np.clip(x, -20, 10) with in-place ufuncs (out=)
    two_k = np.float32(2.0 * _SQRT_2_OVER_PI)
    two_kc = np.float32(2.0 * _SQRT_2_OVER_PI * _GELU_C)
    t = np.empty_like(xs)  # (...) temporary (explicit buffers: 0-d ufunc results are scalars)
    y = np.empty_like(xs)  # (...) output
    # Underflow to 0 or to a subnormal is intended here (tiny t*t, e for x < -10, tiny gelu).
    with np.errstate(under="ignore"):
        np.clip(xs, _GELU_LO, _GELU_HI, out=t)  # x clipped for the cubic
        np.multiply(t, t, out=y)  # t*t
        y *= two_kc  # 2kc t^2
        y += two_k  # 2k + 2kc t^2
        y *= t  # z = 2u = 2k (t + c t^3)
        np.exp(y, out=y)  # e = exp(2u) in [0, 8.3e37]
        np.add(y, 1.0, out=t)  # 1 + e (the clipped copy is no longer needed)
        y /= t  # sigmoid(2u) = e / (1 + e)
        y *= xs  # gelu = x sigmoid(2u)
    return Tensor(y)
    ### END SOLUTION


# --------------------------------------------------------------------------------------------
# im2col / col2im
# --------------------------------------------------------------------------------------------


def _pad(x: np.ndarray, p: int) -> np.ndarray:
    """Zero-pad the two spatial axes of (N, C, H, W) by p on every side."""
    return np.pad(x, ((0, 0), (0, 0), (p, p), (p, p))) if p else x


def _patches(x: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """Every receptive field, as a C-contiguous (N, C*kh*kw, oh*ow) array; one gather pass."""
    ### BEGIN SOLUTION
    # HINT: sliding_window_view of the padded input, step by stride, then reorder the axes
    xp = _pad(x, g.padding)  # (N, C, Hp, Wp)
    win = np.lib.stride_tricks.sliding_window_view(xp, (g.kh, g.kw), axis=(2, 3))
    s = g.stride
    win = win[:, :, : s * (g.oh - 1) + 1 : s, : s * (g.ow - 1) + 1 : s]  # (N, C, oh, ow, kh, kw)
    patches = np.empty((g.n, g.c, g.kh, g.kw, g.oh, g.ow), dtype=np.float32)
    # The buffer's fastest axis is ow, so the copy's inner loop is long (ow) on both sides
    # instead of kw (often 3).
    np.copyto(patches, win.transpose(0, 1, 4, 5, 2, 3))
    return patches.reshape(g.n, g.c * g.kh * g.kw, g.oh * g.ow)
    ### END SOLUTION


def im2col(
    x: ArrayLike,
    kernel_size: int | tuple[int, int],
    stride: int = 1,
    padding: int = 0,
) -> Tensor:
    """cols[(n, i, j), (c, p, q)] = xpad[n, c, i*stride + p, j*stride + q].

    Returns (N*oh*ow, C*kh*kw): one row per output position (image, out row, out col), one column
    per (channel, kernel row, kernel col), so `cols @ weight.reshape(O, -1).T` is the convolution.
    """
    xs = _as_float32(x, "x", "im2col")
    g = conv_geometry(xs.shape, kernel_size, stride, padding, where="im2col")
    patches = _patches(xs, g)  # (N, C*kh*kw, oh*ow)
    return Tensor(patches.transpose(0, 2, 1).reshape(g.n * g.oh * g.ow, -1))


def _fold(patches: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """The adjoint of `_patches`: (N, C*kh*kw, oh*ow) -> (N, C, H, W), overlaps summed."""
    ### BEGIN SOLUTION
    # HINT: for each kernel offset (p, q), += its (N, C, oh, ow) slab into a strided window of a
    # zero padded image, then crop the padding
    pad, s = g.padding, g.stride
    p6 = patches.reshape(g.n, g.c, g.kh, g.kw, g.oh, g.ow)  # a view for any layout of the rows
    xp = np.zeros((g.n, g.c, g.h + 2 * pad, g.w + 2 * pad), dtype=np.float32)  # (N, C, Hp, Wp)
    for p in range(g.kh):
        for q in range(g.kw):
            # One kernel offset hits each pixel at most once, so a sliced += is a correct
            # scatter-add; overlaps between offsets accumulate across iterations.
            window = xp[:, :, p : p + s * (g.oh - 1) + 1 : s, q : q + s * (g.ow - 1) + 1 : s]
            window += p6[:, :, p, q]  # (N, C, oh, ow)
    return np.ascontiguousarray(xp[:, :, pad : pad + g.h, pad : pad + g.w])
    ### END SOLUTION


def _check_x_shape(x_shape: object) -> tuple[int, ...]:
    where = "col2im"
    if not isinstance(x_shape, (tuple, list)) or not all(
        isinstance(d, Integral) and not isinstance(d, bool) for d in x_shape
    ):
        raise TypeError(f"{where}: x_shape must be a tuple of ints (N, C, H, W), got {x_shape!r}")
    if any(d < 1 for d in x_shape):
        raise ValueError(f"{where}: x_shape must have positive sizes, got {tuple(x_shape)}")
    return tuple(int(d) for d in x_shape)


def col2im(
    cols: ArrayLike,
    x_shape: tuple[int, int, int, int],
    kernel_size: int | tuple[int, int],
    stride: int = 1,
    padding: int = 0,
) -> Tensor:
    """x[n, c, h, w] = sum of cols[(n, i, j), (c, p, q)] over all h = i*stride + p - padding, ...

    The adjoint of im2col: <im2col(x), g> = <x, col2im(g)> for every x and g. Overlapping windows
    add up, and values that landed in the padding are dropped.
    """
    where = "col2im"
    cs = _as_float32(cols, "cols", where)
    g = conv_geometry(_check_x_shape(x_shape), kernel_size, stride, padding, where=where)
    expected = (g.n * g.oh * g.ow, g.c * g.kh * g.kw)
    if cs.shape != expected:
        raise ValueError(
            f"{where}: cols must have shape (N*oh*ow, C*kh*kw) = {expected} for x_shape "
            f"{tuple(x_shape)}, kernel {g.kh}x{g.kw}, stride {g.stride}, padding {g.padding}; "
            f"got {cs.shape}"
        )
    patches = cs.reshape(g.n, g.oh * g.ow, g.c * g.kh * g.kw).transpose(0, 2, 1)
    return Tensor(_fold(patches, g))  # patches: (N, C*kh*kw, oh*ow)


# --------------------------------------------------------------------------------------------
# im2col_conv2d
# --------------------------------------------------------------------------------------------


class Im2colConv2dFunction(Function):
    """out[n] = W2 @ patches[n] (+ bias); backward: dW2 = sum_n g[n] @ patches[n]^T,
    dx = col2im(W2^T @ g[n]). W2 = weight.reshape(O, C*kh*kw)."""

    def forward(
        self,
        x: np.ndarray,
        weight: np.ndarray,
        bias: np.ndarray | None = None,
        *,
        geom: ConvGeometry,
    ) -> np.ndarray:
        ### BEGIN SOLUTION
        # HINT: cols = im2col(x); out = cols @ weight.reshape(O, -1).T, reshaped to (N, O, oh, ow)
        g = geom
        o = weight.shape[0]
        patches = _patches(x, g)  # (N, C*kh*kw, oh*ow): im2col, one image at a time
        w2 = weight.reshape(o, -1)  # (O, C*kh*kw)
        out = np.empty((g.n, o, g.oh * g.ow), dtype=np.float32)  # (N, O, oh*ow)
        # One GEMM per image writes (O, oh*ow) straight into NCHW order: no reorder pass after.
        np.matmul(w2, patches, out=out)
        if bias is not None:
            out += bias.reshape(1, o, 1)
        self.save_for_backward(patches, w2, g, weight.shape)
        return out.reshape(g.n, o, g.oh, g.ow)
        ### END SOLUTION

    def backward(self, grad_output: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ### BEGIN SOLUTION
        # HINT: dW = grad @ cols (summed over images), dcols = grad^T @ W -> col2im, db = sum
        patches, w2, g, w_shape = self.saved
        o = w2.shape[0]
        g3 = grad_output.reshape(g.n, o, g.oh * g.ow)  # (N, O, oh*ow)
        x_in, w_in = self.inputs[0], self.inputs[1]
        gx = _fold(np.matmul(w2.T, g3), g) if x_in.requires_grad else None  # (N, C, H, W)
        gw = None
        if w_in.requires_grad:
            # (N, O, P) @ (N, P, C*kh*kw), then the sum over images
            gw = np.matmul(g3, patches.transpose(0, 2, 1)).sum(axis=0).reshape(w_shape)
        grads: tuple[np.ndarray | None, ...] = (gx, gw)
        if len(self.inputs) == 3:
            grads += (grad_output.sum(axis=(0, 2, 3)),)  # (O,)
        return grads
        ### END SOLUTION


def im2col_conv2d(
    x: ArrayLike,
    weight: ArrayLike,
    bias: ArrayLike | None = None,
    stride: int = 1,
    padding: int = 0,
) -> Tensor:
    """out[n, o] = weight.reshape(O, -1) @ im2col(x)[rows of image n]^T + bias[o], as (N, O, oh, ow).

    Differentiable: when x, weight or bias requires grad, the backward pass runs one matmul per
    gradient and col2im for the input gradient.
    """
    where = "im2col_conv2d"
    x_t = x if isinstance(x, Tensor) else Tensor(_as_float32(x, "x", where))
    w_t = weight if isinstance(weight, Tensor) else Tensor(_as_float32(weight, "weight", where))
    if w_t.ndim != 4:
        raise ValueError(f"{where}: weight must be 4-D (O, C, kh, kw), got shape {w_t.shape}")
    g = conv_geometry(x_t.shape, w_t.shape[2:], stride, padding, where=where)
    if w_t.shape[1] != g.c:
        raise ValueError(
            f"{where}: x has {g.c} channels but weight expects {w_t.shape[1]} "
            f"(x shape {x_t.shape}, weight shape {w_t.shape})"
        )
    if bias is None:
        return Im2colConv2dFunction.apply(x_t, w_t, geom=g)
    b_t = bias if isinstance(bias, Tensor) else Tensor(_as_float32(bias, "bias", where))
    if b_t.shape != (w_t.shape[0],):
        raise ValueError(f"{where}: bias must have shape ({w_t.shape[0]},), got {b_t.shape}")
    return Im2colConv2dFunction.apply(x_t, w_t, b_t, geom=g)
