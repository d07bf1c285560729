"""Module 01/06: Tensor's operators, forward against float64 NumPy, backward against finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes
from numeric_grad import check_forward_backward, exp, relu, tanh

from tinytorch.core.tensor import Tensor

seeds = st.integers(0, 2**32 - 1)
shapes = array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=5)


def signed(rng: np.random.Generator, shape: tuple[int, ...], low: float = 0.1, high: float = 2.0):
    """Values with |x| in [low, high]: away from 0, where relu has its kink and 1/x its pole."""
    return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(low, high, size=shape)


# name -> (f, domain); each f runs on Tensors and on float64 ndarrays alike.
UNARY = {
    "neg": (lambda x: -x, "any"),
    "exp": (exp, "any"),
    "tanh": (tanh, "any"),
    "relu": (relu, "any"),
    "square": (lambda x: x**2, "any"),
    "cube": (lambda x: x**3, "any"),
    "sqrt": (lambda x: x**0.5, "positive"),
    "pow_neg_frac": (lambda x: x**-1.5, "positive"),
    "reciprocal": (lambda x: 1.0 / x, "any"),
    "radd": (lambda x: 2.5 + x, "any"),
    "rsub": (lambda x: 2.5 - x, "any"),
    "rmul": (lambda x: 2.5 * x, "any"),
    "scalar_ops": (lambda x: (x - 0.5) / 4.0 * 3.0 + 1.0, "any"),
}

BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
}


@pytest.mark.parametrize("name", sorted(UNARY))
@given(shape=shapes, seed=seeds)
def test_unary_op_matches_float64_and_finite_differences(name, shape, seed):
    f, domain = UNARY[name]
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.2, 2.0, shape) if domain == "positive" else signed(rng, shape)
    check_forward_backward(f, [x], seed)


@pytest.mark.parametrize("name", sorted(BINARY))
@given(shape=shapes, seed=seeds)
def test_binary_op_matches_float64_and_finite_differences(name, shape, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(-2, 2, shape), signed(rng, shape, 0.5, 2.0)
    check_forward_backward(BINARY[name], [a, b], seed)


MATMUL_SHAPES = {
    "2d@2d": lambda m, k, n, b: ((m, k), (k, n)),
    "1d@2d": lambda m, k, n, b: ((k,), (k, n)),
    "2d@1d": lambda m, k, n, b: ((m, k), (k,)),
    "1d@1d": lambda m, k, n, b: ((k,), (k,)),
    "3d@2d": lambda m, k, n, b: ((b, m, k), (k, n)),
    "2d@3d": lambda m, k, n, b: ((m, k), (b, k, n)),
    "3d@3d": lambda m, k, n, b: ((b, m, k), (b, k, n)),
    "broadcast_batch": lambda m, k, n, b: ((1, m, k), (b, k, n)),
    "1d@3d": lambda m, k, n, b: ((k,), (b, k, n)),
    "3d@1d": lambda m, k, n, b: ((b, m, k), (k,)),
}


@pytest.mark.parametrize("layout", sorted(MATMUL_SHAPES))
@given(dims=st.tuples(*[st.integers(1, 5)] * 4), seed=seeds)
def test_matmul_matches_float64_and_finite_differences(layout, dims, seed):
    # dims include 1: a 1-wide matrix and K=1 are where transposes and reductions go wrong.
    shape_a, shape_b = MATMUL_SHAPES[layout](*dims)
    rng = np.random.default_rng(seed)
    check_forward_backward(
        lambda a, b: a @ b, [rng.uniform(-2, 2, shape_a), rng.uniform(-2, 2, shape_b)], seed
    )


@st.composite
def axes_for(draw, ndim: int):
    """None, one axis (maybe negative) or a tuple of distinct axes of an ndim-D array."""
    if ndim == 0:
        return None
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none":
        return None
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    picked = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return tuple(ax - ndim if draw(st.booleans()) else ax for ax in picked)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@given(data=st.data(), shape=shapes, keepdims=st.booleans(), seed=seeds)
def test_sum_mean_over_axes(reduction, data, shape, keepdims, seed):
    axis = data.draw(axes_for(len(shape)), label="axis")
    x = np.random.default_rng(seed).uniform(-2, 2, shape)
    check_forward_backward(lambda t: getattr(t, reduction)(axis=axis, keepdims=keepdims), [x], seed)


@given(data=st.data(), shape=shapes, seed=seeds)
def test_reshape(data, shape, seed):
    size = int(np.prod(shape))
    target = data.draw(
        st.sampled_from([(-1,), (size, 1), (1, size, 1), tuple(reversed(shape)), (-1, 1)]),
        label="target",
    )
    x = np.random.default_rng(seed).uniform(-2, 2, shape)
    # A product with x keeps the gradient x-dependent, so a misplaced reshape in backward shows.
    check_forward_backward(lambda t: t.reshape(target) * t.reshape(target), [x], seed)


@given(data=st.data(), shape=array_shapes(min_dims=1, max_dims=4, max_side=4), seed=seeds)
def test_transpose(data, shape, seed):
    perm = data.draw(st.permutations(range(len(shape))), label="perm")
    # Each axis may be written negatively: (-1, 0) is a valid spelling of (1, 0).
    negative = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
    axes = tuple(ax - len(shape) if neg else ax for ax, neg in zip(perm, negative, strict=True))
    x = np.random.default_rng(seed).uniform(-2, 2, shape)
    weight = np.random.default_rng(seed + 1).uniform(-1, 1, shape)

    def f(t):
        # weight multiplies before the transpose: backward must apply the inverse permutation.
        v = t * weight  # a Tensor, or the float64 ndarray of the reference run
        return v.permute(axes) if isinstance(v, Tensor) else np.transpose(v, axes)

    check_forward_backward(f, [x], seed)


def test_transpose_without_axes_swaps_the_last_two_and_T_reverses_them():
    x = np.arange(24.0).reshape(2, 3, 4)
    assert Tensor(x).transpose().shape == (2, 4, 3) and Tensor(x).T.shape == (4, 3, 2)
    swap_last = lambda t: t.transpose() if isinstance(t, Tensor) else np.swapaxes(t, -1, -2)
    check_forward_backward(lambda t: swap_last(t) * 1.0, [x])
    check_forward_backward(lambda t: t.T * 1.0, [x])
    check_forward_backward(lambda t: t.T * 1.0, [x[0]])


@given(shape=shapes, seed=seeds)
def test_composite_expression(shape, seed):
    rng = np.random.default_rng(seed)

    def f(a, b):
        return tanh(a * b - a / (b * b + 1.0)) + exp(-(a**2)) * relu(b)

    check_forward_backward(f, [signed(rng, shape), signed(rng, shape)], seed)


def test_power_zero_has_zero_gradient_at_zero():
    x = Tensor([0.0, 1.5, -2.0], requires_grad=True)
    (x**0).sum().backward()
    np.testing.assert_array_equal(x.grad, np.zeros(3, np.float32))


@pytest.mark.parametrize(
    "data",
    [[1, 2, 3], [[1.5, 2.0]], np.arange(6, dtype=np.int64).reshape(2, 3), 3.0, [True, False]],
)
def test_data_is_float32_with_the_input_shape(data):
    t = Tensor(data)
    assert t.data.dtype == np.float32
    assert t.shape == np.shape(data)
    np.testing.assert_array_equal(t.data, np.asarray(data, dtype=np.float32))
    assert t.grad is None


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.array([1.0, 2.0], dtype=np.float32),  # float32: no dtype conversion needed
        lambda: np.array([1.0, 2.0]),  # float64
        lambda: Tensor([1.0, 2.0]),  # another Tensor
        lambda: np.arange(4, dtype=np.float32)[::2],  # a strided view
    ],
    ids=["float32", "float64", "tensor", "view"],
)
def test_tensor_always_copies_its_data(make):
    # As in the course: in-place work on Tensor(x).data never reaches x.
    source = make()
    before = np.array(source, dtype=np.float32, copy=True)
    t = Tensor(source)
    t.data += 100.0
    np.testing.assert_array_equal(np.asarray(source, dtype=np.float32), before)
    assert not np.shares_memory(t.data, np.asarray(source))


def test_wrap_is_the_explicit_view():
    arr = np.ones(3, dtype=np.float32)
    t = Tensor.wrap(arr, requires_grad=True)
    assert t.data is arr and t.requires_grad and t._grad_fn is None
    with pytest.raises(TypeError, match="float32 ndarray"):
        Tensor.wrap(np.ones(3))  # float64 would need a conversion, so it is refused
    with pytest.raises(TypeError, match="float32 ndarray"):
        Tensor.wrap([1.0])


def test_ndarray_on_the_left_builds_a_tensor():
    t = Tensor([1.0, 2.0], requires_grad=True)
    out = np.array([3.0, 4.0]) * t
    assert isinstance(out, Tensor)
    out.sum().backward()
    np.testing.assert_array_equal(t.grad, [3.0, 4.0])


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ([[1, 2], [3]], ValueError),
        ([[1.0], [2.0, 3.0]], ValueError),
        ("1.0", TypeError),
        (b"12", TypeError),
        (["1", "2"], TypeError),
        ([1, "a"], TypeError),
        (None, TypeError),
        ({"a": 1}, TypeError),
        ([1 + 2j], TypeError),
    ],
)
def test_bad_data_names_the_argument(data, error):
    with pytest.raises(error, match=r"Tensor\(data="):
        Tensor(data)


def test_shape_errors_are_clear():
    with pytest.raises(ValueError, match="matmul: inner dimensions"):
        Tensor(np.ones((2, 3))) @ Tensor(np.ones((2, 3)))
    with pytest.raises(ValueError, match="reshape"):
        Tensor(np.ones((2, 3))).reshape(4, 2)
    with pytest.raises(TypeError, match="exponent"):
        Tensor([1.0]) ** Tensor([2.0])
