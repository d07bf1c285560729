"""Module 06: the differentiable operations behind Tensor's operators.

Each op is a `Function`: forward on float32 ndarrays, backward by the chain rule. Parameters
(an exponent, an axis) come in as keywords of `apply` and live on the node as attributes. Binary ops
broadcast like NumPy, so their backward sums the gradient back over the broadcast axes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinytorch.core.autograd import Function, unbroadcast


class Add(Function):
    """c = a + b"""

    def forward(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        self.save_for_backward(a.shape, b.shape)
        return a + b

    def backward(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a_shape, b_shape = self.saved
        return unbroadcast(g, a_shape), unbroadcast(g, b_shape)


class Sub(Function):
    """c = a - b"""

    def forward(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        self.save_for_backward(a.shape, b.shape)
        return a - b

    def backward(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a_shape, b_shape = self.saved
        return unbroadcast(g, a_shape), unbroadcast(-g, b_shape)


class Mul(Function):
    """c = a * b"""

    def forward(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        self.save_for_backward(a, b)
        return a * b

    def backward(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.saved
        return unbroadcast(g * b, a.shape), unbroadcast(g * a, b.shape)


class Div(Function):
    """c = a / b"""

    def forward(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        self.save_for_backward(a, b)
        return a / b

    def backward(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.saved
        return unbroadcast(g / b, a.shape), unbroadcast(-g * a / (b * b), b.shape)


class Neg(Function):
    """c = -a"""

    def forward(self, a: np.ndarray) -> np.ndarray:
        return -a

    def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
        return (-g,)


class Pow(Function):
    """c = a ** p for a constant exponent p."""

    exponent: float  # set by apply(a, exponent=p)

    def forward(self, a: np.ndarray) -> np.ndarray:
        self.save_for_backward(a, self.exponent)
        return np.power(a, np.float32(self.exponent))

    def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
        a, p = self.saved
        if p == 0:  # d/da a**0 = 0 everywhere; the general formula gives 0 * inf = nan at a = 0
            return (np.zeros_like(g),)
        return (g * np.float32(p) * np.power(a, np.float32(p - 1)),)


class MatMul(Function):
    """c = a @ b for a (..., M, K) and b (..., K, N): dA = g @ b.T, dB = a.T @ g.

    A 1-D operand is a row (a) or a column (b) that NumPy drops from the result; backward puts
    that axis back into g, works on the (..., M, K) @ (..., K, N) form, then drops it again.
    """

    def forward(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        self.save_for_backward(a, b)
        return a @ b

    def backward(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.saved
        a2 = a.reshape(1, -1) if a.ndim == 1 else a  # (..., M, K)
        b2 = b.reshape(-1, 1) if b.ndim == 1 else b  # (..., K, N)
        if b.ndim == 1:
            g = np.expand_dims(g, -1)  # (..., M, 1); first, so that a 0-d g becomes (1,)
        if a.ndim == 1:
            g = np.expand_dims(g, -2)  # (..., 1, N)
        ga = g @ np.swapaxes(b2, -1, -2)  # (..., M, K), batch axes not yet reduced
        gb = np.swapaxes(a2, -1, -2) @ g  # (..., K, N)
        return (
            unbroadcast(ga, a2.shape).reshape(a.shape),
            unbroadcast(gb, b2.shape).reshape(b.shape),
        )


class Sum(Function):
    """c = a.sum(axis, keepdims)"""

    axis: int | tuple[int, ...] | None = None  # apply(a, axis=..., keepdims=...)
    keepdims: bool = False

    def forward(self, a: np.ndarray) -> np.ndarray:
        self.save_for_backward(a.shape, self.axis, self.keepdims)
        return np.asarray(a.sum(axis=self.axis, keepdims=self.keepdims))

    def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
        shape, axis, keepdims = self.saved
        if not keepdims and axis is not None:
            axes = (axis,) if isinstance(axis, int) else axis
            g = np.expand_dims(g, tuple(ax % len(shape) for ax in axes))
        return (np.broadcast_to(g, shape).copy(),)


class Reshape(Function):
    """c = a.reshape(shape)"""

    shape: tuple[int, ...]  # set by apply(a, shape=...)

    def forward(self, a: np.ndarray) -> np.ndarray:
        self.save_for_backward(a.shape)
        return a.reshape(self.shape)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
        (shape,) = self.saved
        return (g.reshape(shape),)


class Transpose(Function):
    """c = a.transpose(axes); the backward applies the inverse permutation."""

    axes: tuple[int, ...] | None = None  # apply(a, axes=...); None reverses them all

    def forward(self, a: np.ndarray) -> np.ndarray:
        axes = tuple(reversed(range(a.ndim))) if self.axes is None else self.axes
        # Normalise negative axes: argsort of (-1, 0) would not invert the permutation (1, 0).
        axes = tuple(ax % a.ndim for ax in axes) if a.ndim else axes
        self.save_for_backward(axes)
        return np.transpose(a, axes)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
        (axes,) = self.saved
        return (np.transpose(g, np.argsort(axes)),)


class Contiguous(Function):
    """c = a copied into a new C-ordered array; the gradient passes through unchanged."""

    def forward(self, a: np.ndarray) -> np.ndarray:
        return np.array(a, dtype=np.float32, order="C", copy=True)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
        return (g,)


class Pad2d(Function):
    """c = a with `padding` zeros before and after each of its last two axes (H and W);
    backward crops the padding off again."""

    padding: int  # set by apply(a, padding=p), p >= 0

    def forward(self, a: np.ndarray) -> np.ndarray:
        p = self.padding
        width = [(0, 0)] * (a.ndim - 2) + [(p, p), (p, p)]
        return np.pad(a, width)  # (..., H + 2p, W + 2p), a new array

    def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
        p = self.padding
        h, w = g.shape[-2] - 2 * p, g.shape[-1] - 2 * p
        return (np.ascontiguousarray(g[..., p : p + h, p : p + w]),)


class GetItem(Function):
    """c = a[key] with NumPy's indexing; backward scatter-adds g into zeros of a's shape."""

    key: Any = None  # apply(a, key=...)

    def forward(self, a: np.ndarray) -> np.ndarray:
        self.save_for_backward(a.shape)
        return np.array(a[self.key], dtype=np.float32, copy=True)  # its own array, even 0-d

    def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
        (shape,) = self.saved
        out = np.zeros(shape, dtype=np.float32)
        np.add.at(out, self.key, g)  # a repeated index (fancy indexing) adds up, as it should
        return (out,)


class Max(Function):
    """c = a.max(axis, keepdims); the gradient is shared equally between tied maxima."""

    axis: int | tuple[int, ...] | None = None  # apply(a, axis=..., keepdims=...)
    keepdims: bool = False

    def forward(self, a: np.ndarray) -> np.ndarray:
        m = np.max(a, axis=self.axis, keepdims=True)
        self.save_for_backward(a == m)
        return np.asarray(m if self.keepdims else np.squeeze(m, axis=self.axis), np.float32)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
        (hit,) = self.saved
        if not self.keepdims:
            axes = range(hit.ndim) if self.axis is None else self.axis
            axes = (axes,) if isinstance(axes, int) else tuple(axes)
            g = np.expand_dims(g, tuple(ax % hit.ndim for ax in axes))
        share = hit / hit.sum(axis=self.axis, keepdims=True)  # (a.shape), 1/ties at each max
        return ((share * g).astype(np.float32),)


class Exp(Function):
    """c = exp(a)"""

    def forward(self, a: np.ndarray) -> np.ndarray:
        out = np.exp(a)
        self.save_for_backward(out.copy())  # out becomes the result's .data, which may be edited
        return out

    def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
        (out,) = self.saved
        return (g * out,)


class Tanh(Function):
    """c = tanh(a)"""

    def forward(self, a: np.ndarray) -> np.ndarray:
        out = np.tanh(a)
        self.save_for_backward(out.copy())  # out becomes the result's .data, which may be edited
        return out

    def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
        (out,) = self.saved
        return (g * (1 - out * out),)


class ReLU(Function):
    """c = max(a, 0)"""

    def forward(self, a: np.ndarray) -> np.ndarray:
        self.save_for_backward(a > 0)
        return np.maximum(a, 0)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
        (mask,) = self.saved
        return (g * mask,)
