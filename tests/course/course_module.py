"""A Module 17 written in the public course's conventions: the tests grade it as submitted.

- `im2col_conv2d` is inference only: it returns a plain Tensor, with no graph;
- the differentiable path is a Function subclass called as `Im2colConv2dFunction.apply(x, weight,
  bias, stride=, padding=)`; forward gets only arrays and reads self.stride / self.padding;
  backward tests `len(self.inputs) > 2` for the bias and returns the bias gradient with a kept
  axis, (1, F), which autograd sums down to the bias's shape;
- fused_gelu works in place on a copied Tensor: `Tensor(x.data)` copies, so x is untouched;
- the imports are the course's own.
"""

import numpy as np

from tinytorch.core.autograd import Function
from tinytorch.core.tensor import Tensor


def _data(t):
    return t.data if isinstance(t, Tensor) else np.asarray(t, dtype=np.float32)


def vectorized_matmul(a, b):
    return Tensor(np.matmul(_data(a), _data(b)))


def tiled_matmul(a, b, tile_size=64):
    A, B = _data(a), _data(b)
    M, K = A.shape
    N = B.shape[1]
    C = np.zeros((M, N), dtype=np.float32)
    t = tile_size
    for i in range(0, M, t):
        for j in range(0, N, t):
            for k in range(0, K, t):
                C[i : i + t, j : j + t] += A[i : i + t, k : k + t] @ B[k : k + t, j : j + t]
    return Tensor(C)


def unfused_gelu(x):
    X = _data(x)
    return Tensor(0.5 * X * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (X + 0.044715 * X**3))))


def fused_gelu(x):
    y = Tensor(x.data).data  # a private copy: the in-place passes below never reach x
    inner = y * y
    inner *= y
    inner *= np.float32(0.044715)
    inner += y
    inner *= np.float32(np.sqrt(2.0 / np.pi))
    np.tanh(inner, out=inner)
    inner += np.float32(1.0)
    y *= np.float32(0.5)
    y *= inner
    return Tensor(y)


def im2col(x, kernel_size, stride=1, padding=0):
    X = _data(x)
    N, C, H, W = X.shape
    k = kernel_size
    Xp = np.pad(X, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    out_h = (H + 2 * padding - k) // stride + 1
    out_w = (W + 2 * padding - k) // stride + 1
    cols = np.zeros((N * out_h * out_w, C * k * k), dtype=np.float32)
    row = 0
    for n in range(N):
        for i in range(out_h):
            for j in range(out_w):
                hs, ws = i * stride, j * stride
                cols[row] = Xp[n, :, hs : hs + k, ws : ws + k].reshape(-1)
                row += 1
    return Tensor(cols)


def col2im(cols, x_shape, kernel_size, stride=1, padding=0):
    G = _data(cols)
    N, C, H, W = x_shape
    k = kernel_size
    out_h = (H + 2 * padding - k) // stride + 1
    out_w = (W + 2 * padding - k) // stride + 1
    Xp = np.zeros((N, C, H + 2 * padding, W + 2 * padding), dtype=np.float32)
    row = 0
    for n in range(N):
        for i in range(out_h):
            for j in range(out_w):
                hs, ws = i * stride, j * stride
                Xp[n, :, hs : hs + k, ws : ws + k] += G[row].reshape(C, k, k)
                row += 1
    return Tensor(Xp[:, :, padding : padding + H, padding : padding + W])


class Im2colConv2dFunction(Function):
    def forward(self, x, weight, bias):
        F, _, k, _ = weight.shape
        N, _, H, W = x.shape
        out_h = (H + 2 * self.padding - k) // self.stride + 1
        out_w = (W + 2 * self.padding - k) // self.stride + 1
        self.cols = im2col(Tensor(x), k, self.stride, self.padding).data
        out = self.cols @ weight.reshape(F, -1).T
        if bias is not None:
            out = out + bias
        return out.reshape(N, out_h, out_w, F).transpose(0, 3, 1, 2)

    def backward(self, grad_output):
        x, weight = self.inputs[0], self.inputs[1]
        F, _, k, _ = weight.shape
        g = grad_output.transpose(0, 2, 3, 1).reshape(-1, F)
        grad_weight = (g.T @ self.cols).reshape(weight.shape)
        grad_cols = g @ weight.data.reshape(F, -1)
        grad_x = col2im(Tensor(grad_cols), x.shape, k, self.stride, self.padding).data
        if len(self.inputs) > 2:  # the course's test for a bias; kept axis: (1, F), not (F,)
            grad_bias = g.sum(axis=0, keepdims=True)
            return grad_x, grad_weight, grad_bias
        return grad_x, grad_weight


def im2col_conv2d(x, weight, bias=None, stride=1, padding=0):
    """Inference only, as in the course: a plain Tensor with no graph."""
    X, Wt = _data(x), _data(weight)
    F, _, k, _ = Wt.shape
    N, _, H, W = X.shape
    out_h = (H + 2 * padding - k) // stride + 1
    out_w = (W + 2 * padding - k) // stride + 1
    cols = im2col(X, k, stride, padding).data
    out = cols @ Wt.reshape(F, -1).T
    if bias is not None:
        out = out + _data(bias)
    return Tensor(out.reshape(N, out_h, out_w, F).transpose(0, 3, 1, 2))
