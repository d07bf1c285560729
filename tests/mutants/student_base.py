"""A correct Module 17 written the way a student would: the base the bug mutants are cut from.

tests/test_milestone_mutants.py derives each mutant by replacing one exact snippet of this file,
so keep every line the mutants target unique (each function uses its own variable names).
"""

import numpy as np

from tinytorch.core.autograd import Function
from tinytorch.core.tensor import Tensor


def _arr(t):
    return t.data if isinstance(t, Tensor) else np.asarray(t, dtype=np.float32)


def tiled_matmul(a, b, tile_size=64):
    A = _arr(a)
    B = _arr(b)
    M, K = A.shape
    N = B.shape[1]
    C = np.zeros((M, N), dtype=np.float32)
    for i0 in range(0, M, tile_size):
        i1 = min(i0 + tile_size, M)
        for j0 in range(0, N, tile_size):
            j1 = min(j0 + tile_size, N)
            for k0 in range(0, K, tile_size):
                k1 = min(k0 + tile_size, K)
                C[i0:i1, j0:j1] += A[i0:i1, k0:k1] @ B[k0:k1, j0:j1]
    return Tensor(C)


def fused_gelu(x):
    xs = _arr(x)
    inner = np.sqrt(2 / np.pi) * (xs + 0.044715 * xs * xs * xs)
    return Tensor(0.5 * xs * (1.0 + np.tanh(inner)))


def im2col(x, kernel_size, stride=1, padding=0):
    X = _arr(x)
    N, C, H, W = X.shape
    k = kernel_size
    Xp = np.pad(X, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (H + 2 * padding - k) // stride + 1
    ow = (W + 2 * padding - k) // stride + 1
    cols = np.empty((N, oh, ow, C, k, k), dtype=np.float32)
    for di in range(k):
        for dj in range(k):
            win = Xp[:, :, di : di + stride * oh : stride, dj : dj + stride * ow : stride]
            cols[:, :, :, :, di, dj] = win.transpose(0, 2, 3, 1)
    return Tensor(cols.reshape(N * oh * ow, C * k * k))


class Im2colConv2dFunction(Function):
    """The course's convention: apply(x, w, b, stride=, padding=) sets self.stride/self.padding."""

    def forward(self, xd, wd, bias):
        F, _, k, _ = wd.shape
        N, _, H, W = xd.shape
        oh = (H + 2 * self.padding - k) // self.stride + 1
        ow = (W + 2 * self.padding - k) // self.stride + 1
        cols = im2col(xd, k, self.stride, self.padding).data
        out = cols @ wd.reshape(F, -1).T
        if bias is not None:
            out = out + _arr(bias)
        self.saved_cols = cols
        return out.reshape(N, oh, ow, F).transpose(0, 3, 1, 2)

    def backward(self, grad_out):
        xd, wd = self.inputs[0].data, self.inputs[1].data
        F, _, k, _ = wd.shape
        g2 = grad_out.transpose(0, 2, 3, 1).reshape(-1, F)
        grad_w = (g2.T @ self.saved_cols).reshape(wd.shape)
        dcols = g2 @ wd.reshape(F, -1)
        grad_x = col2im(dcols, xd.shape, k, self.stride, self.padding).data
        grad_b = g2.sum(axis=0) if self.inputs[2] is not None else None
        return grad_x, grad_w, grad_b


def im2col_conv2d(x, weight, bias=None, stride=1, padding=0):
    Wt = _arr(weight)
    if Wt.ndim != 4:
        raise ValueError("weight must be (F, C, k, k)")
    return Im2colConv2dFunction.apply(x, weight, bias, stride=stride, padding=padding)


def col2im(cols, x_shape, kernel_size, stride=1, padding=0):
    G = _arr(cols)
    N, C, H, W = x_shape
    k = kernel_size
    oh = (H + 2 * padding - k) // stride + 1
    ow = (W + 2 * padding - k) // stride + 1
    G6 = G.reshape(N, oh, ow, C, k, k)
    xp = np.zeros((N, C, H + 2 * padding, W + 2 * padding), dtype=np.float32)
    for di in range(k):
        for dj in range(k):
            patch = G6[:, :, :, :, di, dj].transpose(0, 3, 1, 2)
            xp[:, :, di : di + stride * oh : stride, dj : dj + stride * ow : stride] += patch
    return Tensor(xp[:, :, padding : padding + H, padding : padding + W])
