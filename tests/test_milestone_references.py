"""The grader's own float64 references and comparison helper, checked against independent facts."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tinytorch.compare import compare
from tinytorch.milestone07.references import (
    out_size,
    ref_col2im,
    ref_conv2d,
    ref_gelu,
    ref_im2col,
)


@st.composite
def geometries(draw: st.DrawFn) -> tuple[tuple[int, int, int, int], int, int, int]:
    k = draw(st.integers(1, 4))
    p = draw(st.integers(0, 2))
    s = draw(st.integers(1, 3))
    h = draw(st.integers(max(1, k - 2 * p), 9))
    w = draw(st.integers(max(1, k - 2 * p), 9))
    return (draw(st.integers(1, 2)), draw(st.integers(1, 3)), h, w), k, s, p


@settings(deadline=None, max_examples=40)
@given(geometries(), st.integers(0, 2**31 - 1))
def test_col2im_is_the_adjoint_of_im2col(geom: tuple, seed: int) -> None:
    x_shape, k, s, p = geom
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape)
    cols = ref_im2col(x, k, s, p)
    n, c, h, w = x_shape
    assert cols.shape == (n * out_size(h, k, s, p) * out_size(w, k, s, p), c * k * k)
    g = rng.standard_normal(cols.shape)
    lhs = float(np.sum(cols * g))
    rhs = float(np.sum(x * ref_col2im(g, x_shape, k, s, p)))
    assert math.isclose(lhs, rhs, rel_tol=1e-9, abs_tol=1e-9)


@settings(deadline=None, max_examples=30)
@given(geometries(), st.integers(1, 3), st.booleans(), st.integers(0, 2**31 - 1))
def test_direct_conv_equals_im2col_times_weights(
    geom: tuple, f: int, bias: bool, seed: int
) -> None:
    x_shape, k, s, p = geom
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape)
    wt = rng.standard_normal((f, x_shape[1], k, k))
    b = rng.standard_normal(f) if bias else None
    n, _, h, w = x_shape
    oh, ow = out_size(h, k, s, p), out_size(w, k, s, p)
    lowered = ref_im2col(x, k, s, p) @ wt.reshape(f, -1).T + (0 if b is None else b)
    lowered = lowered.reshape(n, oh, ow, f).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(ref_conv2d(x, wt, b, s, p), lowered, rtol=1e-12, atol=1e-12)


def test_im2col_layout_on_a_hand_example() -> None:
    x = np.arange(2 * 3 * 3, dtype=np.float64).reshape(
        1, 2, 3, 3
    )  # channel 0: 0..8, channel 1: 9..17
    cols = ref_im2col(x, 2, 1, 0)
    assert cols.shape == (4, 8)
    # first window, top-left: channel 0 then channel 1, each row-major over the 2x2 kernel
    assert cols[0].tolist() == [0, 1, 3, 4, 9, 10, 12, 13]
    assert cols[1].tolist() == [1, 2, 4, 5, 10, 11, 13, 14]  # next output column


def test_gelu_reference_known_values() -> None:
    # tanh-approximation GELU at 1 and -1 (worked by hand: u = 0.7978845608 * 1.044715)
    u = math.sqrt(2 / math.pi) * 1.044715
    assert math.isclose(ref_gelu(np.array([1.0]))[0], 0.5 * (1 + math.tanh(u)), rel_tol=1e-15)
    assert ref_gelu(np.array([0.0]))[0] == 0.0
    assert math.isclose(ref_gelu(np.array([-1.0]))[0], -0.5 * (1 - math.tanh(u)), rel_tol=1e-12)


@settings(deadline=None, max_examples=50)
@given(
    st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=30),
    st.floats(1e-6, 1e-1),
    st.floats(0.0, 1e-2),
)
def test_compare_is_exactly_the_stated_rule(values: list[float], rtol: float, atol: float) -> None:
    ref = np.array(values)
    allowed = atol + rtol * np.abs(ref)
    inside = (ref + 0.5 * allowed).astype(np.float32).astype(np.float64)
    ok = bool(np.all(np.abs(inside - ref) <= allowed))  # float32 rounding may push it out
    assert compare(inside.astype(np.float32), ref, rtol=rtol, atol=atol).ok == ok
    outside = ref.copy()
    outside[len(values) // 2] += 3 * allowed[len(values) // 2] + 1.0
    got = compare(outside, ref, rtol=rtol, atol=atol, dtype=None)
    assert not got.ok and got.where == [len(values) // 2]
