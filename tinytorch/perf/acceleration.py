"""Module 17: acceleration kernels in NumPy, graded by Milestone 07.

    vectorized_matmul     C = A @ B for batched, broadcast operands, in one call (like np.matmul)
    tiled_matmul          C = A @ B, computed tile by tile (the loop nest every fast GEMM is built on)
    unfused_gelu          GELU, one NumPy operation at a time: nine passes, eight temporaries
    fused_gelu            GELU (tanh approximation) in nine in-place passes over two buffers
    im2col                (N, C, H, W) -> (N*oh*ow, C*kh*kw): every receptive field becomes one row
    col2im                the adjoint of im2col: scatter-add each row back to the pixels it came from
    Im2colConv2dFunction  the autograd node of the convolution: im2col + GEMM, backward via col2im
    im2col_conv2d         conv = im2col, then one matrix multiply with weight.reshape(O, -1);
                          inference only (no graph), as in the course: the differentiable
                          path is Im2colConv2dFunction.apply(x, weight, bias, stride=, padding=)

The course's import works as written:

    from tinytorch.perf.acceleration import vectorized_matmul, fused_gelu, tiled_matmul, im2col, col2im, Im2colConv2dFunction

Each function accepts Tensors or array-likes and returns a float32 Tensor; inputs are never
modified. Code between `### BEGIN SOLUTION` and `### END SOLUTION` is what the student edition
(`tito release 17`) replaces with `raise NotImplementedError`; argument checking stays outside
those regions so that the student edition still rejects bad input with a clear error. Every public
function (and each method of Im2colConv2dFunction) holds its own region, so the student edition's
stubs sit exactly where the student writes, and no private helper hides one.
"""

from __future__ import annotations

import math
from numbers import Integral
from typing import Any

import numpy as np

from tinytorch.core.autograd import Function, no_grad
from tinytorch.core.tensor import Tensor
from tinytorch.nn.geometry import conv_geometry

__all__ = [
    "Im2colConv2dFunction",
    "col2im",
    "fused_gelu",
    "im2col",
    "im2col_conv2d",
    "tiled_matmul",
    "unfused_gelu",
    "vectorized_matmul",
]

ArrayLike = Any  # a Tensor or anything np.asarray turns into a real-valued array

# The constants the course's first cell of Module 17 defines (its timing helpers use them).
BYTES_PER_FLOAT32 = 4
DEFAULT_WARMUP_ITERATIONS = 3
DEFAULT_TIMING_ITERATIONS = 10


def _as_float32(value: ArrayLike, name: str, where: str) -> np.ndarray:
    """The float32 data of a Tensor or array-like; errors name the argument."""
    if isinstance(value, Tensor):
        return value.data
    try:
        return Tensor(value).data
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{where}: {name} could not be read as a float32 array ({exc})") from None


# --------------------------------------------------------------------------------------------
# vectorized_matmul
# --------------------------------------------------------------------------------------------


def _check_vectorized(a: np.ndarray, b: np.ndarray) -> None:
    where = "vectorized_matmul"
    for name, arr in (("a", a), ("b", b)):
        if arr.ndim < 2:  # the course's rule: a matrix or a batch of them, never a vector
            raise ValueError(
                f"{where}: {name} must have at least 2 dimensions (matmul requires 2D+ "
                f"inputs), got shape {arr.shape}"
            )
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(
            f"{where}: inner dimensions differ (shape mismatch): a is {a.shape} and b is "
            f"{b.shape} (a.shape[-1] must equal b.shape[-2])"
        )
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])  # batch axes, () for 2-D
    except ValueError:
        raise ValueError(
            f"{where}: batch dimensions do not broadcast: a is {a.shape} and b is {b.shape} "
            f"(batch axes {a.shape[:-2]} and {b.shape[:-2]})"
        ) from None


def vectorized_matmul(a: ArrayLike, b: ArrayLike) -> Tensor:
    """C = A @ B with NumPy's rules: (..., M, K) @ (..., K, N) -> (..., M, N), batch axes broadcast.

    Both operands are 2-D or more, as in the course (a 1-D vector is a ValueError). One call into the BLAS (per batch element) instead of Python loops: the baseline
    every hand-written kernel of this module is measured against.
    """
    a_ = _as_float32(a, "a", "vectorized_matmul")
    b_ = _as_float32(b, "b", "vectorized_matmul")
    _check_vectorized(a_, b_)
    ### BEGIN SOLUTION
    # HINT: one np.matmul of the two arrays does it: batching and broadcasting included
    return Tensor.wrap(np.asarray(np.matmul(a_, b_), dtype=np.float32))  # (..., M, N)
    ### END SOLUTION


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
            f"{where}: inner dimensions differ (shape mismatch): a is {a.shape} and b is "
            f"{b.shape} (a.shape[1] must equal b.shape[0])"
        )
    if isinstance(tile_size, bool) or not isinstance(tile_size, Integral):
        raise ValueError(  # noqa: TRY004 (the course's type for a non-integer tile_size)
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
    return Tensor.wrap(c)  # c is ours: no copy
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


def unfused_gelu(x: ArrayLike) -> Tensor:
    """gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), one NumPy operation at a time.

    The version the fusion lesson starts from: nine elementwise operations, each a full pass over
    memory that reads its operands and writes a new temporary array (eight temporaries). Right,
    and finite for every finite float32 (x^3 may overflow to inf, where tanh saturates to +-1),
    but memory-bound: compare its GB/s with fused_gelu and with the C++ kernel (one pass).
    """
    xs = _as_float32(x, "x", "unfused_gelu")
    ### BEGIN SOLUTION
    # HINT: write the formula as it reads: x * x * x, times 0.044715, plus x, ... np.tanh
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        cube = xs * xs * xs  # passes 1-2
        inner = xs + np.float32(_GELU_C) * cube  # passes 3-4
        u = np.float32(_SQRT_2_OVER_PI) * inner  # pass 5
        th = np.tanh(u)  # pass 6
        y = np.float32(0.5) * xs * (np.float32(1.0) + th)  # passes 7-9
    return Tensor.wrap(np.asarray(y, dtype=np.float32))
    ### END SOLUTION


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
    return Tensor.wrap(y)  # y is ours: no copy
    ### END SOLUTION


# --------------------------------------------------------------------------------------------
# im2col / col2im
# --------------------------------------------------------------------------------------------


def im2col(
    x: ArrayLike,
    kernel_size: int | tuple[int, int],
    stride: int = 1,
    padding: int = 0,
) -> Tensor:
    """cols[(n, i, j), (c, p, q)] = xpad[n, c, i*stride + p, j*stride + q].

    Returns (N*oh*ow, C*kh*kw): one row per output position (image, out row, out col), one column
    per (channel, kernel row, kernel col), so `cols @ weight.reshape(O, -1).T` is the convolution.
    One gather pass: a strided window view of the padded input, copied once into the rows.
    """
    xs = _as_float32(x, "x", "im2col")
    g = conv_geometry(xs.shape, kernel_size, stride, padding, where="im2col")
    ### BEGIN SOLUTION
    # HINT: pad H and W, take sliding_window_view(xpad, (kh, kw), axis=(2, 3)) stepped by
    # stride, reorder its axes to (N, oh, ow, C, kh, kw) and reshape to (N*oh*ow, C*kh*kw)
    pad, s = g.padding, g.stride
    xp = np.pad(xs, ((0, 0), (0, 0), (pad, pad), (pad, pad))) if pad else xs  # (N, C, Hp, Wp)
    win = np.lib.stride_tricks.sliding_window_view(xp, (g.kh, g.kw), axis=(2, 3))
    win = win[:, :, : s * (g.oh - 1) + 1 : s, : s * (g.ow - 1) + 1 : s]  # (N, C, oh, ow, kh, kw)
    cols = np.empty((g.n, g.oh, g.ow, g.c, g.kh, g.kw), dtype=np.float32)
    np.copyto(cols, win.transpose(0, 2, 3, 1, 4, 5))  # the one gather pass
    return Tensor.wrap(cols.reshape(g.n * g.oh * g.ow, g.c * g.kh * g.kw))
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
            f"got {cs.shape}, which does not match"
        )
    ### BEGIN SOLUTION
    # HINT: for each kernel offset (p, q), += its (N, C, oh, ow) slab into a strided window of a
    # zero padded image, then crop the padding
    pad, s = g.padding, g.stride
    c6 = cs.reshape(g.n, g.oh, g.ow, g.c, g.kh, g.kw)  # a view of the rows
    xp = np.zeros((g.n, g.c, g.h + 2 * pad, g.w + 2 * pad), dtype=np.float32)  # (N, C, Hp, Wp)
    for p in range(g.kh):
        for q in range(g.kw):
            # One kernel offset hits each pixel at most once, so a sliced += is a correct
            # scatter-add; overlaps between offsets accumulate across iterations.
            window = xp[:, :, p : p + s * (g.oh - 1) + 1 : s, q : q + s * (g.ow - 1) + 1 : s]
            window += c6[:, :, :, :, p, q].transpose(0, 3, 1, 2)  # (N, C, oh, ow)
    return Tensor.wrap(np.ascontiguousarray(xp[:, :, pad : pad + g.h, pad : pad + g.w]))
    ### END SOLUTION


# --------------------------------------------------------------------------------------------
# im2col_conv2d
# --------------------------------------------------------------------------------------------


class Im2colConv2dFunction(Function):
    """out = im2col(x) @ W2^T (+ bias), as (N, O, oh, ow); W2 = weight.reshape(O, C*kh*kw).

    The course's call: `Im2colConv2dFunction.apply(x, weight, bias, stride=1, padding=0)`; bias
    may be None. `apply` keeps the Tensors in `self.inputs` and stride/padding as attributes.
    Backward, with g2 = grad_output as (N*oh*ow, O):
        grad weight = g2^T @ cols        (reshaped to weight's shape; sums over images)
        grad x      = col2im(g2 @ W2)    (scatter-ADD: overlapping windows add up)
        grad bias   = g2.sum(axis=0)
    """

    stride: int = 1  # apply(..., stride=s, padding=p) overrides both on the node
    padding: int = 0

    def forward(
        self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None
    ) -> np.ndarray:
        where = "Im2colConv2dFunction"
        if weight.ndim != 4:
            raise ValueError(
                f"{where}: weight must be 4-D (O, C, kh, kw), got shape {weight.shape}"
            )
        g = conv_geometry(x.shape, weight.shape[2:], self.stride, self.padding, where=where)
        if weight.shape[1] != g.c or (bias is not None and bias.shape != weight.shape[:1]):
            raise ValueError(
                f"{where}: x {x.shape}, weight {weight.shape} and bias "
                f"{None if bias is None else bias.shape} do not fit (C of x = C of weight, "
                f"bias (O,))"
            )
        ### BEGIN SOLUTION
        # HINT: cols = im2col(x, (kh, kw), stride, padding); out = cols @ weight.reshape(O, -1).T
        # (+ bias), reshaped to (N, oh, ow, O) and transposed to (N, O, oh, ow); save for backward
        o = weight.shape[0]
        cols = im2col(x, (g.kh, g.kw), g.stride, g.padding).data  # (N*oh*ow, C*kh*kw)
        w2 = weight.reshape(o, -1)  # (O, C*kh*kw)
        out = cols @ w2.T  # (N*oh*ow, O)
        if bias is not None:
            out += bias  # (O,) broadcast over every output position
        self.save_for_backward(cols, w2, g)
        return np.ascontiguousarray(out.reshape(g.n, g.oh, g.ow, o).transpose(0, 3, 1, 2))
        ### END SOLUTION

    def backward(self, grad_output: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ### BEGIN SOLUTION
        # HINT: g2 = grad_output as (N*oh*ow, O); dW = g2.T @ cols, dx = col2im(g2 @ W2) (it
        # scatter-adds), db = g2.sum(axis=0); one gradient (or None) per input
        cols, w2, g = self.saved
        o = w2.shape[0]
        x_in, w_in, b_in = (*self.inputs, None)[:3]
        g2 = grad_output.transpose(0, 2, 3, 1).reshape(-1, o)  # (N*oh*ow, O)
        gx = gw = gb = None
        if x_in is not None and x_in.requires_grad:
            dcols = g2 @ w2  # (N*oh*ow, C*kh*kw)
            gx = col2im(dcols, (g.n, g.c, g.h, g.w), (g.kh, g.kw), g.stride, g.padding).data
        if w_in is not None and w_in.requires_grad:
            gw = (g2.T @ cols).reshape(w_in.shape)  # (O, C*kh*kw) -> (O, C, kh, kw)
        if b_in is not None and b_in.requires_grad:
            gb = g2.sum(axis=0)  # (O,)
        return (gx, gw, gb)[: len(self.inputs)]
        ### END SOLUTION


def im2col_conv2d(
    x: ArrayLike,
    weight: ArrayLike,
    bias: ArrayLike | None = None,
    stride: int = 1,
    padding: int = 0,
) -> Tensor:
    """out[n, o] = weight.reshape(O, -1) @ im2col(x)[rows of image n]^T + bias[o], as (N, O, oh, ow).

    Inference only, as in the course: the result is a plain Tensor with no graph, whatever its
    inputs require. The differentiable path (what the milestone's backward check grades) is
    `Im2colConv2dFunction.apply(x, weight, bias, stride=..., padding=...)`.
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
    b_t = None
    if bias is not None:
        b_t = bias if isinstance(bias, Tensor) else Tensor(_as_float32(bias, "bias", where))
        if b_t.shape != (w_t.shape[0],):
            raise ValueError(f"{where}: bias must have shape ({w_t.shape[0]},), got {b_t.shape}")
    ### BEGIN SOLUTION
    # HINT: the forward of Im2colConv2dFunction without a graph: with no_grad(), apply it
    with no_grad():
        return Im2colConv2dFunction.apply(x_t, w_t, b_t, stride=g.stride, padding=g.padding)
    ### END SOLUTION
