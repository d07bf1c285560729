"""fused_gelu against the float64 tanh-approximation formula, for every finite float32."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tinytorch.core.tensor import Tensor
from tinytorch.perf.acceleration import fused_gelu

F32_MAX = float(np.finfo(np.float32).max)


def reference(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in float64 (finite for every float32 x)."""
    x = np.asarray(x, dtype=np.float64)
    u = np.sqrt(2.0 / np.pi) * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1.0 + np.tanh(u))


def reference_sigmoid_form(x: np.ndarray) -> np.ndarray:
    """The same function as x / (1 + exp(-2u)) in float64: accurate relative to tiny results."""
    x = np.asarray(x, dtype=np.float64)
    u = np.sqrt(2.0 / np.pi) * (x + 0.044715 * x * x * x)
    return x / (1.0 + np.exp(-2.0 * u))


def gelu_strict(x) -> Tensor:
    """fused_gelu with every floating-point warning turned into an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            return fused_gelu(x)


def test_max_abs_error_on_dense_grid():
    x = np.linspace(-20.0, 20.0, 400_001, dtype=np.float32)
    y = gelu_strict(x)
    assert y.dtype == np.float32 and y.shape == x.shape
    err = np.abs(y.data - reference(x))
    worst = int(np.argmax(err))
    assert err[worst] <= 1e-6, f"max abs error {err[worst]:.3g} at x = {x[worst]!r}"


@given(
    hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=0, max_dims=3, max_side=7),
        elements=st.floats(-20, 20, width=32),
    )
)
def test_abs_error_within_20(x):
    y = gelu_strict(x)
    assert y.shape == x.shape and y.dtype == np.float32
    np.testing.assert_allclose(y.data, reference(x), rtol=0, atol=1e-6)


@given(
    hnp.arrays(
        np.float32,
        st.integers(1, 50),
        elements=st.floats(allow_nan=False, allow_infinity=False, width=32),
    )
)
def test_every_finite_float32_gives_a_finite_close_result(x):
    y = gelu_strict(x)
    assert np.all(np.isfinite(y.data)), f"non-finite output for {x[~np.isfinite(y.data)]}"
    np.testing.assert_allclose(y.data, reference(x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "x, expected",
    [
        (F32_MAX, F32_MAX),
        (-F32_MAX, 0.0),
        (3.4e38, 3.4e38),
        (-3.4e38, 0.0),
        (1e30, 1e30),
        (-1e30, 0.0),
        (1e13, 1e13),  # x*x*x overflows float32 here
        (-1e13, 0.0),
        (50.0, 50.0),
        (-50.0, 0.0),
        (0.0, 0.0),
        (-0.0, 0.0),
    ],
)
def test_extremes_are_finite_and_saturate(x, expected):
    y = gelu_strict(np.array([x], dtype=np.float32)).data
    assert np.isfinite(y[0])
    assert y[0] == np.float32(expected)


def test_subnormals_and_tiny_values():
    tiny = np.finfo(np.float32).tiny
    x = np.array([tiny, -tiny, 1e-45, -1e-45, 1e-30, -1e-30], dtype=np.float32)
    y = gelu_strict(x).data
    assert np.all(np.isfinite(y))
    # Relative accuracy, down to the spacing of float32 subnormals (gelu(1e-45) is 0.7e-45).
    np.testing.assert_allclose(y, reference(x), rtol=1e-6, atol=float(np.float32(1e-45)))


def test_negative_tail_keeps_relative_accuracy():
    """For x in [-9, -3] gelu(x) is 1e-3 ... 1e-30: 0.5x(1+tanh u) in float32 would round to 0."""
    x = np.linspace(-9.0, -3.0, 10_001, dtype=np.float32)
    y = gelu_strict(x).data
    ref = reference_sigmoid_form(x)
    rel = np.abs(y - ref) / np.abs(ref)
    assert np.all(y < 0)
    assert rel.max() <= 1e-4, f"relative error {rel.max():.3g} at x = {x[np.argmax(rel)]!r}"


def test_input_is_not_mutated_and_output_is_new():
    x = np.linspace(-30, 30, 1001, dtype=np.float32)
    x0 = x.copy()
    t = Tensor(x)
    y1 = fused_gelu(x)
    y2 = fused_gelu(t)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(t.data, x0)
    assert not np.shares_memory(y1.data, x) and not np.shares_memory(y2.data, x)


def test_accepts_lists_float64_and_scalars():
    x64 = np.array([-2.5, -0.5, 0.0, 0.5, 2.5])
    for x in (x64, x64.tolist(), Tensor(x64)):
        y = fused_gelu(x)
        assert isinstance(y, Tensor) and y.dtype == np.float32
        np.testing.assert_allclose(y.data, reference(x64), atol=1e-6, rtol=0)
    scalar = fused_gelu(1.0)
    assert scalar.shape == () and abs(scalar.item() - reference(1.0)) <= 1e-6


def test_non_contiguous_input():
    x = np.linspace(-5, 5, 200, dtype=np.float32).reshape(10, 20).T[::2]
    y = fused_gelu(x)
    assert y.shape == x.shape
    np.testing.assert_allclose(y.data, reference(x), atol=1e-6, rtol=0)


def test_bad_input_names_the_argument():
    with pytest.raises(TypeError, match="fused_gelu: x"):
        fused_gelu("1.0")
    with pytest.raises(TypeError, match="fused_gelu: x"):
        fused_gelu(np.array([1 + 2j]))


def test_no_floating_point_error_even_when_numpy_raises_on_underflow():
    x = np.array([-3.4e38, -50.0, -12.0, -1e-45, 0.0, 1e-45, 3.4e38], dtype=np.float32)
    with np.errstate(all="raise"):
        y = fused_gelu(x).data
    np.testing.assert_allclose(y, reference(x), rtol=1e-6, atol=float(np.float32(1e-45)))
