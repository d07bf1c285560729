"""Sliding-window geometry shared by Conv2d (Module 09) and im2col (Module 17).

For an input of H x W, a k x k kernel, stride s and padding p on every side:
    out = (H + 2p - k) // s + 1
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral


def _as_int(value: object, name: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{where}: {name} must be an int, got {type(value).__name__} {value!r}")
    return int(value)


def pair(value: object, name: str, where: str) -> tuple[int, int]:
    """An int or a pair of ints, as (rows, cols)."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{where}: {name} must be an int or a pair of ints, got {value!r}")
        return _as_int(value[0], name, where), _as_int(value[1], name, where)
    v = _as_int(value, name, where)
    return v, v


@dataclass(frozen=True)
class ConvGeometry:
    """Validated shape facts of one convolution: input (N, C, H, W), kernel kh x kw, output oh x ow."""

    n: int
    c: int
    h: int
    w: int
    kh: int
    kw: int
    stride: int
    padding: int
    oh: int
    ow: int


def conv_geometry(
    x_shape: tuple[int, ...],
    kernel_size: int | tuple[int, int],
    stride: int = 1,
    padding: int = 0,
    *,
    where: str = "conv2d",
) -> ConvGeometry:
    """Check the arguments of a 2-D convolution and compute its output size.

    Raises ValueError or TypeError naming the argument: a non-4-D input, a kernel < 1 or larger
    than the padded input, stride < 1, padding < 0.
    """
    if len(x_shape) != 4:
        raise ValueError(
            f"{where}: x must be 4-D (N, C, H, W): expected a 4D input, got shape {tuple(x_shape)}"
        )
    n, c, h, w = (int(d) for d in x_shape)
    kh, kw = pair(kernel_size, "kernel_size", where)
    stride = _as_int(stride, "stride", where)
    padding = _as_int(padding, "padding", where)
    if kh < 1 or kw < 1:
        raise ValueError(f"{where}: kernel_size must be >= 1, got {kernel_size!r}")
    if stride < 1:
        raise ValueError(f"{where}: stride must be >= 1, got {stride}")
    if padding < 0:
        raise ValueError(f"{where}: padding must be >= 0, got {padding}")
    if kh > h + 2 * padding or kw > w + 2 * padding:
        raise ValueError(
            f"{where}: kernel_size {kh}x{kw} is larger than the padded input "
            f"{h + 2 * padding}x{w + 2 * padding} (H={h}, W={w}, padding={padding})"
        )
    oh = (h + 2 * padding - kh) // stride + 1
    ow = (w + 2 * padding - kw) // stride + 1
    return ConvGeometry(n, c, h, w, kh, kw, stride, padding, oh, ow)
