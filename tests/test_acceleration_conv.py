"""im2col, col2im and im2col_conv2d against plain float64 loops, Conv2d and finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from numeric_grad import assert_close

from tinytorch.core.tensor import Tensor
from tinytorch.nn import Conv2d, conv2d
from tinytorch.perf.acceleration import Im2colConv2dFunction, col2im, im2col, im2col_conv2d


def conv_apply(x, weight, bias=None, stride=1, padding=0):
    """The course's differentiable path: im2col_conv2d itself is inference only."""
    return Im2colConv2dFunction.apply(x, weight, bias, stride=stride, padding=padding)


# ---- plain references: one Python loop per index, float64 -----------------------------------


def out_size(size: int, k: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - k) // stride + 1


def window_entries(x_shape, kh, kw, stride, padding):
    """Every (row, column) of the column matrix whose pixel (n, c, r, s) lies inside the image."""
    n_, c_, h, w = x_shape
    oh, ow = out_size(h, kh, stride, padding), out_size(w, kw, stride, padding)
    for n in range(n_):
        for i in range(oh):
            for j in range(ow):
                for c in range(c_):
                    for p in range(kh):
                        for q in range(kw):
                            r, s = i * stride + p - padding, j * stride + q - padding
                            if 0 <= r < h and 0 <= s < w:
                                yield (n * oh + i) * ow + j, (c * kh + p) * kw + q, (n, c, r, s)


def im2col_reference(x, kh, kw, stride, padding):
    """Row (n, i, j), column (c, p, q) = x[n, c, i*stride + p - padding, j*stride + q - padding]."""
    n_, c_, h, w = x.shape
    oh, ow = out_size(h, kh, stride, padding), out_size(w, kw, stride, padding)
    cols = np.zeros((n_ * oh * ow, c_ * kh * kw))  # padding entries stay 0
    for row, col, pixel in window_entries(x.shape, kh, kw, stride, padding):
        cols[row, col] = x[pixel]
    return cols


def col2im_reference(cols, x_shape, kh, kw, stride, padding):
    """Every entry of cols added to the pixel it was read from; padding entries dropped."""
    x = np.zeros(x_shape)
    for row, col, pixel in window_entries(x_shape, kh, kw, stride, padding):
        x[pixel] += cols[row, col]
    return x


def coverage_reference(h, w, kh, kw, stride, padding):
    """How many windows cover each pixel (counted directly from the window positions)."""
    oh, ow = out_size(h, kh, stride, padding), out_size(w, kw, stride, padding)
    count = np.zeros((h, w))
    for i in range(oh):
        for j in range(ow):
            r0, s0 = i * stride - padding, j * stride - padding
            count[max(r0, 0) : max(r0 + kh, 0), max(s0, 0) : max(s0 + kw, 0)] += 1
    return count


def conv_reference(x, weight, bias, stride, padding):
    """out[n, o, i, j] = bias[o] + sum over (c, p, q) of weight[o, c, p, q] * xpad[n, c, ., .]."""
    n_, _, h, w = x.shape
    o_, _, kh, kw = weight.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh, ow = out_size(h, kh, stride, padding), out_size(w, kw, stride, padding)
    out = np.zeros((n_, o_, oh, ow))
    for n in range(n_):
        for o in range(o_):
            for i in range(oh):
                for j in range(ow):
                    patch = xp[n, :, i * stride : i * stride + kh, j * stride : j * stride + kw]
                    out[n, o, i, j] = np.sum(patch * weight[o]) + (0.0 if bias is None else bias[o])
    return out


# ---- strategies ------------------------------------------------------------------------------


@st.composite
def geometries(draw, max_side: int = 9):
    """(N, C, H, W), kernel (kh, kw), stride, padding with the kernel fitting the padded input."""
    n, c = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    h, w = draw(st.integers(1, max_side)), draw(st.integers(1, max_side))
    k = draw(st.integers(1, 4))
    kernel = draw(st.sampled_from([k, (k, draw(st.integers(1, 4)))]))
    stride, padding = draw(st.integers(1, 3)), draw(st.integers(0, 2))
    kh, kw = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    assume(kh <= h + 2 * padding and kw <= w + 2 * padding)
    return (n, c, h, w), kernel, stride, padding


def kernel_hw(kernel):
    return kernel if isinstance(kernel, tuple) else (kernel, kernel)


def rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---- im2col / col2im -------------------------------------------------------------------------


@given(geometries(), st.integers(0, 2**16))
def test_im2col_layout_matches_reference(geom, seed):
    shape, kernel, stride, padding = geom
    x = rand(shape, seed)
    cols = im2col(x, kernel, stride, padding)
    kh, kw = kernel_hw(kernel)
    assert isinstance(cols, Tensor) and cols.dtype == np.float32
    # A gather copies values, so it must be exact.
    np.testing.assert_array_equal(cols.data, im2col_reference(x, kh, kw, stride, padding))


@given(geometries(), st.integers(0, 2**16))
def test_col2im_matches_reference(geom, seed):
    shape, kernel, stride, padding = geom
    kh, kw = kernel_hw(kernel)
    rows = (
        shape[0] * out_size(shape[2], kh, stride, padding) * out_size(shape[3], kw, stride, padding)
    )
    cols = rand((rows, shape[1] * kh * kw), seed)
    x = col2im(cols, shape, kernel, stride, padding)
    assert isinstance(x, Tensor) and x.dtype == np.float32 and x.shape == shape
    ref = col2im_reference(cols.astype(np.float64), shape, kh, kw, stride, padding)
    assert_close(x.data, ref, 1e-6, "col2im")


@given(geometries(), st.integers(0, 2**16))
def test_adjoint_identity(geom, seed):
    """<im2col(x), g> = <x, col2im(g)> for random x and g."""
    shape, kernel, stride, padding = geom
    x = rand(shape, seed)
    cols = im2col(x, kernel, stride, padding).data
    g = rand(cols.shape, seed + 1)
    lhs = np.sum(cols.astype(np.float64) * g)
    rhs = np.sum(x.astype(np.float64) * col2im(g, shape, kernel, stride, padding).data)
    scale = np.sum(np.abs(cols.astype(np.float64) * g)) + 1.0
    assert abs(lhs - rhs) <= 1e-6 * scale, (lhs, rhs)


@given(geometries(), st.integers(0, 2**16))
def test_col2im_of_ones_counts_covering_windows(geom, seed):
    shape, kernel, stride, padding = geom
    kh, kw = kernel_hw(kernel)
    oh, ow = out_size(shape[2], kh, stride, padding), out_size(shape[3], kw, stride, padding)
    ones = np.ones((shape[0] * oh * ow, shape[1] * kh * kw), dtype=np.float32)
    counts = col2im(ones, shape, kernel, stride, padding).data
    expected = coverage_reference(shape[2], shape[3], kh, kw, stride, padding)
    np.testing.assert_array_equal(counts, np.broadcast_to(expected, shape))


def test_im2col_rows_are_image_outrow_outcol_and_columns_channel_kernelrow_kernelcol():
    """A hand-checkable case: 2 images, 2 channels, 3x4 input, 2x2 kernel, stride 1."""
    x = np.arange(2 * 2 * 3 * 4, dtype=np.float32).reshape(2, 2, 3, 4)
    cols = im2col(x, 2).data  # oh = 2, ow = 3 -> 12 rows, 8 columns
    assert cols.shape == (12, 8)
    np.testing.assert_array_equal(
        cols[0], np.concatenate([x[0, 0, 0:2, 0:2].ravel(), x[0, 1, 0:2, 0:2].ravel()])
    )
    np.testing.assert_array_equal(cols[1, :4], x[0, 0, 0:2, 1:3].ravel())  # next out col
    np.testing.assert_array_equal(cols[3, :4], x[0, 0, 1:3, 0:2].ravel())  # next out row
    np.testing.assert_array_equal(cols[6, 4:], x[1, 1, 0:2, 0:2].ravel())  # next image


def test_im2col_and_col2im_do_not_mutate_inputs():
    x = rand((2, 3, 7, 5), 0)
    x0 = x.copy()
    cols = im2col(x, 3, 2, 1).data
    g = rand(cols.shape, 1)
    g0 = g.copy()
    col2im(g, x.shape, 3, 2, 1)
    col2im(Tensor(g), x.shape, 3, 2, 1)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(g, g0)
    assert not np.shares_memory(cols, x)


def test_col2im_accepts_c_and_fortran_ordered_cols():
    shape = (2, 3, 6, 5)
    cols = rand((2 * 4 * 3, 3 * 9), 3)  # kernel 3, padding 0, stride 1 -> oh 4, ow 3
    a = col2im(np.ascontiguousarray(cols), shape, 3).data
    b = col2im(np.asfortranarray(cols), shape, 3).data
    np.testing.assert_array_equal(a, b)


# ---- im2col_conv2d forward -------------------------------------------------------------------


@given(geometries(), st.integers(1, 4), st.booleans(), st.integers(0, 2**16))
def test_conv_matches_direct_reference_and_conv2d(geom, out_ch, with_bias, seed):
    shape, kernel, stride, padding = geom
    kh, kw = kernel_hw(kernel)
    x = rand(shape, seed)
    w = rand((out_ch, shape[1], kh, kw), seed + 1)
    b = rand((out_ch,), seed + 2) if with_bias else None
    out = im2col_conv2d(x, w, b, stride, padding)
    assert isinstance(out, Tensor) and out.dtype == np.float32
    assert_close(out.data, conv_reference(x, w, b, stride, padding), 1e-5, "im2col_conv2d")
    direct = conv2d(Tensor(x), Tensor(w), None if b is None else Tensor(b), stride, padding)
    assert_close(out.data, direct.data.astype(np.float64), 1e-5, "im2col_conv2d vs conv2d")


@pytest.mark.parametrize(
    "shape, out_ch, k, stride, padding",
    [
        ((2, 3, 7, 5), 4, 3, 2, 1),  # odd H != W, stride 2, padding
        ((1, 1, 9, 4), 2, 3, 3, 0),  # stride 3, windows that skip pixels
        ((3, 2, 5, 8), 3, 1, 1, 0),  # 1x1 kernel: a plain matmul
        ((1, 2, 2, 3), 1, 4, 1, 2),  # kernel larger than the unpadded input
        ((2, 1, 6, 6), 2, 6, 1, 0),  # kernel = input: one output pixel
    ],
)
def test_conv_named_cases_match_conv2d_layer(shape, out_ch, k, stride, padding):
    layer = Conv2d(shape[1], out_ch, k, stride, padding, seed=7)
    x = rand(shape, 11)
    out = im2col_conv2d(x, layer.weight, layer.bias, stride, padding)
    assert_close(out.data, layer(Tensor(x)).data.astype(np.float64), 1e-5, "vs Conv2d")
    assert_close(
        out.data,
        conv_reference(x, layer.weight.data, layer.bias.data, stride, padding),
        1e-5,
        "ref",
    )


# ---- Im2colConv2dFunction backward (im2col_conv2d is inference only) --------------------------


@given(geometries(max_side=7), st.integers(1, 3), st.booleans(), st.integers(0, 2**16))
def test_gradients_match_conv2d(geom, out_ch, with_bias, seed):
    shape, kernel, stride, padding = geom
    kh, kw = kernel_hw(kernel)
    x, w = rand(shape, seed), rand((out_ch, shape[1], kh, kw), seed + 1)
    b = rand((out_ch,), seed + 2) if with_bias else None

    def run(fn):
        xt, wt = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
        bt = None if b is None else Tensor(b, requires_grad=True)
        out = fn(xt, wt, bt, stride, padding)
        out.backward(rand(out.shape, seed + 3))
        return out, xt, wt, bt

    _, xt, wt, bt = run(conv_apply)
    _, xr, wr, br = run(conv2d)
    for mine, theirs, name in ((xt, xr, "x"), (wt, wr, "weight")) + (
        ((bt, br, "bias"),) if b is not None else ()
    ):
        assert mine.grad is not None and mine.grad.dtype == np.float32, name
        assert_close(mine.grad, theirs.grad.astype(np.float64), 1e-5, f"grad {name}")


def finite_difference(f, arrays, k, weight, h=0.5):
    """d/d arrays[k] of sum(f(*arrays) * weight) by central differences in float64 sums.

    The convolution is linear in each argument, so the difference quotient is exact for any h;
    what remains is float32 rounding of the two forward passes.
    """
    base = [a.copy() for a in arrays]
    g = np.zeros(arrays[k].shape)
    for idx in np.ndindex(arrays[k].shape):
        plus = [a.copy() for a in base]
        minus = [a.copy() for a in base]
        plus[k][idx] += h
        minus[k][idx] -= h
        lp = np.sum(f(*plus).astype(np.float64) * weight)
        lm = np.sum(f(*minus).astype(np.float64) * weight)
        g[idx] = (lp - lm) / (2 * h)
    return g


@pytest.mark.parametrize(
    "shape, out_ch, kernel, stride, padding",
    [((2, 2, 5, 4), 3, 3, 2, 1), ((1, 3, 6, 3), 2, (2, 3), 1, 0), ((1, 1, 4, 7), 1, 3, 3, 2)],
)
def test_gradients_match_finite_differences(shape, out_ch, kernel, stride, padding):
    kh, kw = kernel_hw(kernel)
    x, w, b = rand(shape, 0), rand((out_ch, shape[1], kh, kw), 1), rand((out_ch,), 2)

    def forward(x_, w_, b_):
        return im2col_conv2d(x_, w_, b_, stride, padding).data

    xt, wt, bt = (Tensor(a, requires_grad=True) for a in (x, w, b))
    out = conv_apply(xt, wt, bt, stride, padding)
    weight = rand(out.shape, 3)
    out.backward(weight)
    for k, t in enumerate((xt, wt, bt)):
        numeric = finite_difference(forward, [x, w, b], k, weight.astype(np.float64))
        assert_close(t.grad, numeric, 1e-4, f"gradient of input {k}")


def test_gradient_only_where_required_and_inputs_unchanged():
    x, w, b = rand((2, 2, 6, 5), 0), rand((3, 2, 3, 3), 1), rand((3,), 2)
    x0, w0, b0 = x.copy(), w.copy(), b.copy()
    xt, wt = Tensor(x), Tensor(w, requires_grad=True)  # x needs no gradient
    out = conv_apply(xt, wt, b, stride=2, padding=1)
    out.backward(np.ones(out.shape, dtype=np.float32))
    assert xt.grad is None
    assert wt.grad is not None and wt.grad.shape == w.shape
    for arr, orig in ((x, x0), (w, w0), (b, b0), (xt.data, x0), (wt.data, w0)):
        np.testing.assert_array_equal(arr, orig)


def test_no_graph_when_nothing_requires_grad():
    out = conv_apply(rand((1, 1, 4, 4), 0), rand((1, 1, 3, 3), 1))
    assert not out.requires_grad and out._grad_fn is None


def test_im2col_conv2d_is_inference_only_as_in_the_course():
    x = Tensor(rand((1, 2, 5, 5), 0), requires_grad=True)
    w = Tensor(rand((2, 2, 3, 3), 1), requires_grad=True)
    out = im2col_conv2d(x, w, padding=1)
    assert not out.requires_grad and out._grad_fn is None
    assert_close(out.data, conv_apply(x, w, padding=1).data.astype(np.float64), 1e-6, "forward")
    out.sum().backward()  # a silent no-op: no graph, nothing reaches x
    assert x.grad is None


def test_grad_flows_through_a_following_op():
    x = Tensor(rand((1, 2, 5, 5), 0), requires_grad=True)
    w = Tensor(rand((2, 2, 3, 3), 1), requires_grad=True)
    loss = (conv_apply(x, w, padding=1) * 2.0).sum()
    loss.backward()
    xr = Tensor(x.data, requires_grad=True)
    wr = Tensor(w.data, requires_grad=True)
    (conv2d(xr, wr, padding=1) * 2.0).sum().backward()
    assert_close(x.grad, xr.grad.astype(np.float64), 1e-5, "x")
    assert_close(w.grad, wr.grad.astype(np.float64), 1e-5, "w")


# ---- bad arguments ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: im2col(np.ones((3, 4, 4)), 3), ValueError, "x must be 4-D"),
        (lambda: im2col(np.ones((1, 1, 4, 4)), 7), ValueError, "kernel_size"),
        (lambda: im2col(np.ones((1, 1, 4, 4)), 0), ValueError, "kernel_size"),
        (lambda: im2col(np.ones((1, 1, 4, 4)), 3, stride=0), ValueError, "stride"),
        (lambda: im2col(np.ones((1, 1, 4, 4)), 3, padding=-1), ValueError, "padding"),
        (lambda: im2col(np.ones((1, 1, 4, 4)), 3, stride=1.5), TypeError, "stride"),
        (lambda: im2col(np.ones((1, 1, 4, 4)), 3.0), TypeError, "kernel_size"),
        (lambda: col2im(np.ones((5, 9)), (1, 1, 4, 4), 3), ValueError, "cols must have shape"),
        (lambda: col2im(np.ones((4, 9)), (1, 4, 4), 3), ValueError, "4-D"),
        (lambda: col2im(np.ones((4, 9)), "1144", 3), TypeError, "x_shape"),
        (lambda: col2im(np.ones((4, 9)), (1, 1, 0, 4), 3), ValueError, "x_shape"),
        (lambda: col2im(np.ones((1, 4, 9)), (1, 1, 4, 4), 3), ValueError, "cols"),
        (lambda: im2col_conv2d(np.ones((1, 2, 5, 5)), np.ones((2, 3, 3))), ValueError, "weight"),
        (
            lambda: im2col_conv2d(np.ones((1, 2, 5, 5)), np.ones((2, 3, 3, 3))),
            ValueError,
            "channels",
        ),
        (lambda: im2col_conv2d(np.ones((2, 5, 5)), np.ones((2, 2, 3, 3))), ValueError, "x must be"),
        (
            lambda: im2col_conv2d(np.ones((1, 2, 5, 5)), np.ones((2, 2, 3, 3)), np.ones(3)),
            ValueError,
            "bias",
        ),
        (
            lambda: im2col_conv2d(np.ones((1, 2, 5, 5)), np.ones((2, 2, 3, 3)), stride=0),
            ValueError,
            "stride",
        ),
        (lambda: im2col_conv2d("x", np.ones((2, 2, 3, 3))), TypeError, "im2col_conv2d: x"),
    ],
)
def test_bad_arguments_raise_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
