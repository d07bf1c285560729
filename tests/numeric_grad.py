"""Central finite differences in float64: the reference every autograd test compares against.

Tests write each function once, so that it runs both on Tensors (autograd, float32) and on float64
ndarrays (this module). `exp`, `tanh` and `relu` below dispatch on the argument's type for that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tinytorch.core.tensor import Tensor

# float32 results against an exact float64 reference. 1e-5 is about 80 float32 ulps; the worst
# case seen over 300 examples per test was 5e-7 (forward) and 2.5e-7 (backward).
RTOL = 1e-5


def exp(x):
    return x.exp() if isinstance(x, Tensor) else np.exp(x)


def tanh(x):
    return x.tanh() if isinstance(x, Tensor) else np.tanh(x)


def relu(x):
    return x.relu() if isinstance(x, Tensor) else np.maximum(x, 0.0)


def as_float32_exact(x: np.ndarray) -> np.ndarray:
    """Round to float32 and back, so Tensor and the float64 reference see the same numbers."""
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def numeric_grad(
    f: Callable[..., np.ndarray],
    inputs: Sequence[np.ndarray],
    weight: np.ndarray,
    h: float = 1e-6,
) -> list[np.ndarray]:
    """d/dx_i of L = sum(f(*inputs) * weight), by (L(x + h) - L(x - h)) / 2h on float64 copies."""
    xs = [np.array(x, dtype=np.float64, copy=True) for x in inputs]
    grads = []
    for x in xs:
        g = np.zeros_like(x)
        flat, gflat = x.reshape(-1), g.reshape(-1)  # views: writing flat[i] perturbs x
        for i in range(flat.size):
            saved = flat[i]
            flat[i] = saved + h
            plus = np.sum(f(*xs) * weight)
            flat[i] = saved - h
            minus = np.sum(f(*xs) * weight)
            flat[i] = saved
            gflat[i] = (plus - minus) / (2 * h)
        grads.append(g)
    return grads


def assert_close(actual: np.ndarray, expected: np.ndarray, rtol: float, what: str) -> None:
    """|actual - expected| <= rtol * (|expected| + max(1, max|expected|)), shape first.

    The absolute part is rtol times the size of the numbers involved (inputs are O(1) here):
    float32 sums that cancel to nearly zero keep an error set by their terms, not by the result.
    """
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert np.all(np.isfinite(actual)), f"{what}: non-finite values {actual}"
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale, err_msg=what)


def check_forward_backward(
    f: Callable[..., object], inputs: Sequence[np.ndarray], seed: int = 0
) -> None:
    """f on Tensors matches f on float64 arrays; its gradients match central differences."""
    inputs = [as_float32_exact(x) for x in inputs]
    tensors = [Tensor(x, requires_grad=True) for x in inputs]
    out = f(*tensors)
    expected = np.asarray(f(*[x.copy() for x in inputs]), dtype=np.float64)
    assert isinstance(out, Tensor)
    assert out.dtype == np.float32, f"forward dtype {out.dtype}"
    assert_close(out.data, expected, RTOL, "forward")

    weight = as_float32_exact(np.random.default_rng(seed).uniform(-1, 1, expected.shape))
    out.backward(weight)
    for k, (t, g) in enumerate(zip(tensors, numeric_grad(f, inputs, weight), strict=True)):
        assert t.grad is not None, f"input {k} got no gradient"
        assert t.grad.dtype == np.float32, f"input {k}: grad dtype {t.grad.dtype}"
        assert_close(t.grad, g, RTOL, f"gradient of input {k}")
