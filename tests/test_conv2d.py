"""Module 09: direct Conv2d against a float64 loop reference and finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numeric_grad import RTOL, as_float32_exact, assert_close, numeric_grad

from tinytorch.core.tensor import Tensor
from tinytorch.nn import Conv2d, conv2d


def conv2d_reference(x, w, b, stride, padding):
    """out[n, o, i, j] = b[o] + sum_{c,p,q} w[o, c, p, q] * xpad[n, c, i*s + p, j*s + q], float64."""
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh, ow = (h + 2 * padding - kh) // stride + 1, (wd + 2 * padding - kw) // stride + 1
    out = np.empty((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * stride : i * stride + kh, j * stride : j * stride + kw]
            out[:, :, i, j] = np.einsum("ncpq,ocpq->no", patch, w) + b
    return out


def conv2d_reference_backward(x, w, g, stride, padding):
    """The adjoint of the loop above: each output pixel sends g back through its own patch."""
    _, _, h, wd = x.shape
    _, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    gxp, gw = np.zeros_like(xp), np.zeros_like(w)
    for i in range(g.shape[2]):
        for j in range(g.shape[3]):
            rows = slice(i * stride, i * stride + kh)
            cols = slice(j * stride, j * stride + kw)
            gxp[:, :, rows, cols] += np.einsum("no,ocpq->ncpq", g[:, :, i, j], w)
            gw += np.einsum("no,ncpq->ocpq", g[:, :, i, j], xp[:, :, rows, cols])
    gx = gxp[:, :, padding : padding + h, padding : padding + wd]
    return gx, gw, g.sum(axis=(0, 2, 3))


# (N, C, O, H, W, kernel, stride, padding): odd H != W, stride 2, padding 1 and 2, k = 1 and 5,
# and sizes where the last window does not reach the edge ((H + 2p - k) % s != 0).
CASES = {
    "odd_HneW_k3": (2, 3, 4, 7, 5, 3, 1, 0),
    "stride2_pad1_ragged": (2, 3, 2, 10, 7, 3, 2, 1),
    "k5_pad2": (1, 2, 3, 6, 5, 5, 1, 2),
    "k1_stride2": (2, 3, 2, 5, 7, 1, 2, 0),
    "k5_stride2_pad2": (1, 2, 2, 9, 7, 5, 2, 2),
    "k1_pad1": (1, 1, 2, 3, 4, 1, 1, 1),
    "kernel_fills_padded_input": (1, 2, 1, 3, 4, 5, 1, 1),
    "one_channel_1x1_output": (1, 1, 1, 3, 3, 3, 3, 0),
    "nonsquare_kernel_3x1": (2, 2, 3, 5, 6, (3, 1), 2, 1),
}


def make_inputs(case, seed=0):
    n, c, o, h, w, k, stride, padding = case
    kh, kw = (k, k) if isinstance(k, int) else k
    rng = np.random.default_rng(seed)
    x = as_float32_exact(rng.uniform(-1, 1, (n, c, h, w)))
    weight = as_float32_exact(rng.uniform(-1, 1, (o, c, kh, kw)))
    bias = as_float32_exact(rng.uniform(-1, 1, o))
    return x, weight, bias, stride, padding


def check_conv(x, weight, bias, stride, padding, seed=0, fd=False):
    tx, tw, tb = (Tensor(a, requires_grad=True) for a in (x, weight, bias))
    out = conv2d(tx, tw, tb, stride=stride, padding=padding)
    expected = conv2d_reference(x, weight, bias, stride, padding)
    assert out.dtype == np.float32
    assert_close(out.data, expected, RTOL, "conv2d forward")

    g = as_float32_exact(np.random.default_rng(seed + 1).uniform(-1, 1, expected.shape))
    out.backward(g)
    ref_grads = conv2d_reference_backward(x, weight, g, stride, padding)
    for name, t, ref in zip(("x", "weight", "bias"), (tx, tw, tb), ref_grads, strict=True):
        assert_close(t.grad, ref, RTOL, f"conv2d d/d{name}")
    if fd:
        fd_grads = numeric_grad(
            lambda a, w_, b_: conv2d_reference(a, w_, b_, stride, padding), [x, weight, bias], g
        )
        for name, t, ref in zip(("x", "weight", "bias"), (tx, tw, tb), fd_grads, strict=True):
            assert_close(t.grad, ref, RTOL, f"conv2d d/d{name} (finite differences)")


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv2d_forward_backward_on_awkward_geometry(name):
    check_conv(*make_inputs(CASES[name]), fd=True)


@given(
    n=st.integers(1, 2),
    c=st.integers(1, 3),
    o=st.integers(1, 3),
    h=st.integers(1, 9),
    w=st.integers(1, 9),
    kh=st.integers(1, 5),
    kw=st.integers(1, 5),
    stride=st.integers(1, 3),
    padding=st.integers(0, 2),
    seed=st.integers(0, 2**32 - 1),
)
def test_conv2d_matches_reference_on_drawn_geometry(n, c, o, h, w, kh, kw, stride, padding, seed):
    h, w = max(h, kh - 2 * padding), max(w, kw - 2 * padding)  # the kernel must fit
    case = (n, c, o, h, w, (kh, kw), stride, padding)
    check_conv(*make_inputs(case, seed), seed=seed)


def test_no_bias_gives_the_same_as_zero_bias():
    x, weight, _, stride, padding = make_inputs(CASES["stride2_pad1_ragged"])
    out = conv2d(Tensor(x), Tensor(weight), None, stride=stride, padding=padding)
    expected = conv2d_reference(x, weight, np.zeros(weight.shape[0]), stride, padding)
    assert_close(out.data, expected, RTOL, "conv2d without bias")


def test_layer_uses_its_weight_and_bias():
    layer = Conv2d(3, 4, 3, stride=2, padding=1, seed=7)
    layer.bias.data = np.array([0.5, -1.0, 0.25, 2.0], np.float32)  # it starts at zero
    x = as_float32_exact(np.random.default_rng(0).uniform(-1, 1, (2, 3, 7, 6)))
    out = layer(Tensor(x))
    w, b = layer.weight.data.astype(np.float64), layer.bias.data.astype(np.float64)
    assert_close(out.data, conv2d_reference(x, w, b, 2, 1), RTOL, "Conv2d layer")
    out.sum().backward()
    assert layer.weight.grad.shape == (4, 3, 3, 3) and layer.bias.grad.shape == (4,)
    assert layer.parameters() == [layer.weight, layer.bias]


def test_layer_without_bias():
    layer = Conv2d(2, 3, (3, 1), bias=False, seed=0)
    assert layer.bias is None and layer.parameters() == [layer.weight]
    assert layer.weight.shape == (3, 2, 3, 1)
    x = as_float32_exact(np.random.default_rng(1).uniform(-1, 1, (1, 2, 5, 4)))
    expected = conv2d_reference(x, layer.weight.data.astype(np.float64), np.zeros(3), 1, 0)
    assert_close(layer(Tensor(x)).data, expected, RTOL, "Conv2d without bias")


def test_init_is_seedable():
    a, b, c = (Conv2d(3, 8, 3, seed=s) for s in (0, 0, 1))
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    assert not np.array_equal(a.weight.data, c.weight.data)
    assert not np.array_equal(Conv2d(3, 8, 3).weight.data, Conv2d(3, 8, 3).weight.data)


def test_init_is_float32_trainable_weight_scaled_by_fan_in_bias_zero():
    layer = Conv2d(4, 6, 5, seed=3)
    bound = 1 / np.sqrt(4 * 5 * 5)
    for p in layer.parameters():
        assert p.dtype == np.float32 and p.requires_grad
    w = layer.weight.data
    assert np.all(np.abs(w) <= bound) and np.std(w) > bound / 4
    np.testing.assert_array_equal(layer.bias.data, np.zeros(6))  # as in the course's Module 09


def test_channel_mismatch_names_in_channels():
    with pytest.raises(ValueError, match="in_channels"):
        Conv2d(3, 4, 3)(Tensor(np.zeros((1, 2, 5, 5))))
    with pytest.raises(ValueError, match="channels"):
        conv2d(Tensor(np.zeros((1, 2, 5, 5))), Tensor(np.zeros((4, 3, 3, 3))))


def test_kernel_larger_than_padded_input_names_kernel_size():
    x = Tensor(np.zeros((1, 1, 3, 4)))
    with pytest.raises(ValueError, match="kernel_size .* larger"):
        Conv2d(1, 1, 5)(x)
    with pytest.raises(ValueError, match="kernel_size .* larger"):
        conv2d(x, Tensor(np.zeros((1, 1, 3, 5))))
    assert Conv2d(1, 1, 5, padding=1)(x).shape == (1, 1, 1, 2)  # 5x6 padded: fits exactly


@pytest.mark.parametrize("stride", [0, -1])
def test_stride_below_one_names_stride(stride):
    with pytest.raises(ValueError, match="stride must"):
        Conv2d(1, 1, 3, stride=stride)
    with pytest.raises(ValueError, match="stride must"):
        conv2d(Tensor(np.zeros((1, 1, 5, 5))), Tensor(np.zeros((1, 1, 3, 3))), stride=stride)


def test_negative_padding_names_padding():
    # "padding must": a message about the kernel not fitting also mentions padding.
    with pytest.raises(ValueError, match="padding must"):
        Conv2d(1, 1, 3, padding=-1)
    with pytest.raises(ValueError, match="padding must"):
        conv2d(Tensor(np.zeros((1, 1, 5, 5))), Tensor(np.zeros((1, 1, 3, 3))), padding=-2)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"in_channels": 0}, "in_channels"),
        ({"out_channels": 2.0}, "out_channels"),
        ({"kernel_size": 0}, "kernel_size"),
        ({"kernel_size": (3, 3, 3)}, "kernel_size"),
        ({"stride": 1.5}, "stride"),
        ({"padding": "same"}, "padding"),
    ],
)
def test_bad_constructor_arguments_are_named(kwargs, name):
    args = {"in_channels": 1, "out_channels": 1, "kernel_size": 3} | kwargs
    with pytest.raises((TypeError, ValueError), match=name):
        Conv2d(**args)


def test_bad_shapes_are_named():
    with pytest.raises(ValueError, match="x must be 4-D"):
        Conv2d(1, 1, 3)(Tensor(np.zeros((5, 5))))
    with pytest.raises(ValueError, match="weight"):
        conv2d(Tensor(np.zeros((1, 1, 5, 5))), Tensor(np.zeros((3, 3))))
    with pytest.raises(ValueError, match="bias"):
        conv2d(Tensor(np.zeros((1, 1, 5, 5))), Tensor(np.zeros((2, 1, 3, 3))), Tensor(np.zeros(3)))
