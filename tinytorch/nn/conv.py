"""Module 09: a direct (sliding-window) 2-D convolution, the reference that im2col must reproduce.

    out[n, o, i, j] = bias[o] + sum_{c, p, q} weight[o, c, p, q] * xpad[n, c, i*s + p, j*s + q]

The loop runs over the kh*kw kernel offsets; each offset is one strided view of the padded input
contracted with one (O, C) slice of the weights. No patch matrix is ever built.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinytorch.core import ops
from tinytorch.core.autograd import Function, no_grad
from tinytorch.core.tensor import Tensor
from tinytorch.nn.geometry import ConvGeometry, conv_geometry, pair


def _window(xp: np.ndarray, g: ConvGeometry, p: int, q: int) -> tuple[slice, ...]:
    """Index of the input pixels that kernel offset (p, q) touches, for every output position."""
    return (
        slice(None),
        slice(None),
        slice(p, p + g.stride * (g.oh - 1) + 1, g.stride),
        slice(q, q + g.stride * (g.ow - 1) + 1, g.stride),
    )


class Conv2dFunction(Function):
    """Direct convolution; backward scatters through the same windows."""

    geom: ConvGeometry  # set by apply(x, weight, bias, geom=...)

    def forward(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
        g = self.geom
        pad = g.padding
        xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))) if pad else x  # (N, C, Hp, Wp)
        out = np.zeros((g.n, weight.shape[0], g.oh, g.ow), dtype=np.float32)  # (N, O, oh, ow)
        for p in range(g.kh):
            for q in range(g.kw):
                patch = xp[_window(xp, g, p, q)]  # (N, C, oh, ow)
                out += np.einsum("nchw,oc->nohw", patch, weight[:, :, p, q], optimize=True)
        out += bias.reshape(1, -1, 1, 1)
        self.save_for_backward(xp, weight, g)
        return out

    def backward(self, grad: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        xp, weight, g = self.saved
        gxp = np.zeros_like(xp)  # (N, C, Hp, Wp)
        gw = np.zeros_like(weight)  # (O, C, kh, kw)
        for p in range(g.kh):
            for q in range(g.kw):
                win = _window(xp, g, p, q)
                gw[:, :, p, q] = np.einsum("nohw,nchw->oc", grad, xp[win], optimize=True)
                gxp[win] += np.einsum("nohw,oc->nchw", grad, weight[:, :, p, q], optimize=True)
        pad = g.padding
        gx = gxp[:, :, pad : pad + g.h, pad : pad + g.w] if pad else gxp
        return np.ascontiguousarray(gx), gw, grad.sum(axis=(0, 2, 3))


def conv2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int = 1,
    padding: int = 0,
) -> Tensor:
    """Direct 2-D convolution of x (N, C, H, W) with weight (O, C, kh, kw) -> (N, O, oh, ow)."""
    x = x if isinstance(x, Tensor) else Tensor(x)
    weight = weight if isinstance(weight, Tensor) else Tensor(weight)
    if weight.ndim != 4:
        raise ValueError(f"conv2d: weight must be 4-D (O, C, kh, kw), got shape {weight.shape}")
    geom = conv_geometry(x.shape, weight.shape[2:], stride, padding, where="conv2d")
    if weight.shape[1] != geom.c:
        raise ValueError(
            f"conv2d: x has {geom.c} channels but weight expects {weight.shape[1]} "
            f"(weight shape {weight.shape})"
        )
    if bias is None:
        bias = Tensor(np.zeros(weight.shape[0], dtype=np.float32))
    bias = bias if isinstance(bias, Tensor) else Tensor(bias)
    if bias.shape != (weight.shape[0],):
        raise ValueError(f"conv2d: bias must have shape ({weight.shape[0]},), got {bias.shape}")
    return Conv2dFunction.apply(x, weight, bias, geom=geom)


class Conv2d:
    """A 2-D convolution layer: weight (out_channels, in_channels, kh, kw), optional bias."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        stride: int = 1,
        padding: int = 0,
        bias: bool = True,
        *,
        seed: int | None = None,
    ) -> None:
        where = "Conv2d"
        for name, value in (("in_channels", in_channels), ("out_channels", out_channels)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{where}: {name} must be a positive int, got {value!r}")
        kh, kw = pair(kernel_size, "kernel_size", where)
        if kh < 1 or kw < 1:
            raise ValueError(f"{where}: kernel_size must be >= 1, got {kernel_size!r}")
        # Validate stride and padding now, with a 1x1-kernel-sized dummy input that always fits.
        conv_geometry((1, 1, kh, kw), (kh, kw), stride, padding, where=where)
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = (kh, kw)
        self.stride, self.padding = int(stride), int(padding)
        rng = np.random.default_rng(seed)
        bound = 1.0 / np.sqrt(in_channels * kh * kw)  # Kaiming-uniform bound, as in PyTorch
        self.weight = Tensor(
            rng.uniform(-bound, bound, (out_channels, in_channels, kh, kw)), requires_grad=True
        )
        # The bias starts at zero, as in the course's Module 09 (PyTorch draws it at random):
        # so im2col_conv2d(x, conv.weight, ...) without the bias reproduces conv(x) at first.
        self.bias = Tensor(np.zeros(out_channels), requires_grad=True) if bias else None

    def parameters(self) -> list[Tensor]:
        return [self.weight] + ([self.bias] if self.bias is not None else [])

    def forward(self, x: Tensor) -> Tensor:
        x = x if isinstance(x, Tensor) else Tensor(x)
        if x.ndim == 4 and x.shape[1] != self.in_channels:
            raise ValueError(
                f"Conv2d: input x has {x.shape[1]} channels but in_channels={self.in_channels}"
            )
        return conv2d(x, self.weight, self.bias, self.stride, self.padding)

    __call__ = forward

    # ---- the course's Module 09 helpers (course code calls them; forward does not need them) ----

    def _apply_padding(self, x: Any, padding: int | None = None) -> Any:
        """x (N, C, H, W) with `padding` (default self.padding) zeros on both sides of H and W
        -> (N, C, H + 2p, W + 2p); N and C are never padded.

        A Tensor gives a new Tensor (differentiable: its gradient is the padded one cropped);
        an ndarray or array-like gives a new float32 ndarray.
        """
        where = "Conv2d._apply_padding"
        p = self.padding if padding is None else padding
        if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 0:
            raise ValueError(f"{where}: padding must be an int >= 0, got {p!r}")
        t = x if isinstance(x, Tensor) else Tensor(x)
        if t.ndim != 4:
            raise ValueError(f"{where}: x must be 4-D (N, C, H, W), got shape {t.shape}")
        out = ops.Pad2d.apply(t, padding=int(p))  # (N, C, H + 2p, W + 2p)
        return out if isinstance(x, Tensor) else out.data

    def _compute_output_shape(self, input_shape: Any) -> tuple[int, int, int, int]:
        """(N, out_channels, oh, ow) for an input of `input_shape` (N, C, H, W), with
        oh = (H + 2 * padding - kh) // stride + 1 (ow likewise). A Tensor or an array counts by
        its shape."""
        where = "Conv2d._compute_output_shape"
        shape = getattr(input_shape, "shape", input_shape)
        if not isinstance(shape, (tuple, list)) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise ValueError(
                f"{where}: input_shape must be a shape of ints (N, C, H, W), a Tensor or an "
                f"array, got {input_shape!r}"
            )
        shape = tuple(int(d) for d in shape)
        if len(shape) != 4:
            raise ValueError(f"{where}: input_shape must be 4-D (N, C, H, W), got {shape}")
        if shape[1] != self.in_channels:
            raise ValueError(
                f"{where}: input_shape {shape} has {shape[1]} channels but "
                f"in_channels={self.in_channels}"
            )
        g = conv_geometry(shape, self.kernel_size, self.stride, self.padding, where=where)
        return g.n, self.out_channels, g.oh, g.ow

    def _convolve_loops(self, x_padded: Any) -> Any:
        """The direct sliding-window convolution of an input that is already padded
        (see _apply_padding), bias included: (N, C, Hp, Wp) -> (N, out_channels, oh, ow), so
        that _convolve_loops(_apply_padding(x)) is forward(x).

        A Tensor gives a Tensor (differentiable, as forward); an ndarray or array-like gives a
        float32 ndarray, with no graph.
        """
        where = "Conv2d._convolve_loops"
        t = x_padded if isinstance(x_padded, Tensor) else Tensor(x_padded)
        if t.ndim != 4 or t.shape[1] != self.in_channels:
            raise ValueError(
                f"{where}: x_padded must be (N, {self.in_channels}, H + 2*padding, "
                f"W + 2*padding), got shape {t.shape}"
            )
        conv_geometry(t.shape, self.kernel_size, self.stride, 0, where=where)  # kernel fits?
        if isinstance(x_padded, Tensor):
            return conv2d(t, self.weight, self.bias, self.stride, padding=0)
        with no_grad():
            return conv2d(t, self.weight, self.bias, self.stride, padding=0).data

    def __repr__(self) -> str:
        return (
            f"Conv2d({self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}, bias={self.bias is not None})"
        )
