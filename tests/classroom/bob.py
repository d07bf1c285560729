"""A Module 17 written independently of tests/mutants/student_base.py, with one bug: the last,
ragged K tile of tiled_matmul is never added (so every case whose K is not a multiple of the
tile size fails). tests/test_class_grader.py grades it as a student of a small class."""

import numpy as np

from tinytorch.core.tensor import Tensor


def _data(v):
    if isinstance(v, Tensor):
        return v.data
    return np.asarray(v, dtype=np.float32)


def _out_size(size, k, s, p):
    return (size + 2 * p - k) // s + 1


def tiled_matmul(a, b, tile_size=64):
    left, right = _data(a), _data(b)
    rows, inner = left.shape
    cols = right.shape[1]
    result = np.zeros((rows, cols), dtype=np.float32)
    for r in range(0, rows, tile_size):
        for c in range(0, cols, tile_size):
            acc = np.zeros((min(tile_size, rows - r), min(tile_size, cols - c)), np.float32)
            p = 0
            while p + tile_size <= inner:  # the bug: the ragged K tile is never added
                acc += (
                    left[r : r + tile_size, p : p + tile_size]
                    @ right[p : p + tile_size, c : c + tile_size]
                )
                p += tile_size
            result[r : r + tile_size, c : c + tile_size] = acc
    return Tensor(result)


def fused_gelu(x):
    v = _data(x)
    c = np.float32(0.7978845608028654)
    return Tensor((v * 0.5 * (1 + np.tanh(c * (v + 0.044715 * v**3)))).astype(np.float32))


def im2col(x, kernel_size, stride=1, padding=0):
    img = np.pad(_data(x), [(0, 0), (0, 0), (padding, padding), (padding, padding)])
    n = img.shape[0]
    oh = _out_size(img.shape[2] - 2 * padding, kernel_size, stride, padding)
    ow = _out_size(img.shape[3] - 2 * padding, kernel_size, stride, padding)
    rows = []
    for b in range(n):
        for y in range(oh):
            for x0 in range(ow):
                ys, xs = y * stride, x0 * stride
                rows.append(img[b, :, ys : ys + kernel_size, xs : xs + kernel_size].ravel())
    return Tensor(np.stack(rows).astype(np.float32))


def im2col_conv2d(x, weight, bias=None, stride=1, padding=0):
    w = _data(weight)
    n, _, h, wd = _data(x).shape
    f, k = w.shape[0], w.shape[2]
    oh, ow = _out_size(h, k, stride, padding), _out_size(wd, k, stride, padding)
    y = im2col(x, k, stride, padding).data @ w.reshape(f, -1).T
    if bias is not None:
        y = y + _data(bias)
    return Tensor(np.ascontiguousarray(y.reshape(n, oh, ow, f).transpose(0, 3, 1, 2)))


def col2im(cols, x_shape, kernel_size, stride=1, padding=0):
    g = _data(cols)
    n, ch, h, wd = x_shape
    k = kernel_size
    oh, ow = _out_size(h, k, stride, padding), _out_size(wd, k, stride, padding)
    canvas = np.zeros((n, ch, h + 2 * padding, wd + 2 * padding), dtype=np.float32)
    row = 0
    for b in range(n):
        for y in range(oh):
            for x0 in range(ow):
                ys, xs = y * stride, x0 * stride
                canvas[b, :, ys : ys + k, xs : xs + k] += g[row].reshape(ch, k, k)
                row += 1
    return Tensor(canvas[:, :, padding : padding + h, padding : padding + wd])


class Im2colConv2dFunction:
    """Bob never wrote the backward pass: his differentiable path is his inference-only forward,
    so the backward check finds no gradients (as it found no graph before it graded this path)."""

    @staticmethod
    def apply(x, weight, bias=None, stride=1, padding=0):
        return im2col_conv2d(x, weight, bias, stride, padding)
