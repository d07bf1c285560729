"""Course fidelity: Tensor, Function and the reference module behave as the public course's do.

One test per behaviour that a correct course-style module can hit (the rows of issue 26's table
and of issue 40's "Course conventions"),
then the course's import paths and the reference's conventions at its edges, then whole modules
in the course's shape graded end to end: the course-style module in practice and in grading mode,
three other correct forward-only im2col_conv2d variants, and a backward mutant.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tinytorch.core.autograd import Function
from tinytorch.core.tensor import Tensor
from tinytorch.milestone07 import backward, run_part_a

COURSE = Path(__file__).parent / "course" / "course_module.py"


# ---- Tensor.transpose(dim0=None, dim1=None) -------------------------------------------------


def test_transpose_swaps_two_axes_or_the_last_two() -> None:
    x = Tensor(np.arange(24.0).reshape(2, 3, 4))
    np.testing.assert_array_equal(x.transpose(0, 1).data, np.swapaxes(x.data, 0, 1))
    np.testing.assert_array_equal(x.transpose(-1, 0).data, np.swapaxes(x.data, -1, 0))
    np.testing.assert_array_equal(x.transpose().data, np.swapaxes(x.data, -1, -2))
    m = Tensor([[1.0, 2.0, 3.0]])
    assert m.transpose(0, 1).shape == (3, 1)  # on 2-D, (0, 1) swaps: never a no-op permutation
    four = Tensor(np.zeros((2, 3, 4, 5)))
    assert four.transpose(1, 2).shape == (2, 4, 3, 5)
    with pytest.raises(ValueError, match="give both axes"):
        x.transpose(1)
    t = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    (t.transpose(0, 1) * Tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])).sum().backward()
    np.testing.assert_array_equal(t.grad, [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]])


# ---- Function.backward's gradients ----------------------------------------------------------


class Extra(Function):
    def forward(self, a: np.ndarray) -> np.ndarray:
        return a * np.float32(3.0)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray, ...]:
        return g * np.float32(3.0), np.ones(7), "ignored"


def test_extra_gradients_are_ignored() -> None:
    a = Tensor([1.0, 2.0], requires_grad=True)
    Extra.apply(a).sum().backward()
    np.testing.assert_array_equal(a.grad, [3.0, 3.0])


class KeptAxisBias(Function):
    def forward(self, x: np.ndarray, b: np.ndarray) -> np.ndarray:
        return x + b

    def backward(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return g, g.sum(axis=0, keepdims=True)  # (1, O) for an (O,) bias: summed down


def test_a_gradient_with_kept_or_extra_broadcast_axes_is_summed_down() -> None:
    x = Tensor(np.zeros((4, 3)), requires_grad=True)
    b = Tensor([0.0, 0.0, 0.0], requires_grad=True)
    KeptAxisBias.apply(x, b).backward(np.ones((4, 3)))
    assert b.grad.shape == (3,)
    np.testing.assert_array_equal(b.grad, [4.0, 4.0, 4.0])
    s = Tensor([[1.0]], requires_grad=True)  # (1, 1) input, a (4, 3) gradient: summed to (1, 1)
    KeptAxisBias.apply(Tensor(np.zeros((4, 3))), s).backward(np.ones((4, 3)))
    np.testing.assert_array_equal(s.grad, [[12.0]])


def test_a_gradient_that_cannot_reduce_to_its_input_still_names_the_function() -> None:
    class Wrong(Function):
        def forward(self, a: np.ndarray) -> np.ndarray:
            return a * np.float32(1.0)

        def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
            return (np.ones((5,)),)

    a = Tensor([1.0, 2.0], requires_grad=True)
    # ValueError, as in the course (it was RuntimeError here); the message names the function.
    with pytest.raises(
        ValueError, match=r"Wrong.backward returned a gradient of shape \(5,\) for an input of "
        r"shape \(2,\)"
    ):  # fmt: skip
        Wrong.apply(a).sum().backward()
    assert a.grad is None


def test_apply_with_a_none_bias_and_two_gradients_works() -> None:
    from tinytorch.perf.acceleration import im2col

    class TwoGrads(Function):
        def forward(self, x, weight, bias):
            self.cols = im2col(Tensor(x), 2).data  # (N*oh*ow, C*k*k)
            return self.cols @ weight.reshape(weight.shape[0], -1).T

        def backward(self, g):
            return None, (g.T @ self.cols).reshape(self.inputs[1].shape)

    x = Tensor(np.ones((1, 1, 3, 3)))
    w = Tensor(np.ones((2, 1, 2, 2)), requires_grad=True)
    out = TwoGrads.apply(x, w, None)
    assert out._grad_fn.inputs[2] is None
    out.sum().backward()
    np.testing.assert_array_equal(w.grad, np.full((2, 1, 2, 2), 4.0))


# ---- Tensor.backward ------------------------------------------------------------------------


def test_backward_on_a_tensor_that_does_not_require_grad_is_a_silent_no_op() -> None:
    t = Tensor([1.0, 2.0])
    assert t.backward() is None
    assert t.backward(np.ones(2)) is None and t.grad is None


def test_backward_releases_the_graph_unless_retain_graph_and_intermediates_get_grad() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = x * 3.0  # an intermediate result (non-leaf)
    loss = (y * y).sum()
    loss.backward(gradient=None, retain_graph=True)
    np.testing.assert_allclose(y.grad, 2 * y.data)  # d loss / d y
    np.testing.assert_allclose(x.grad, 18 * x.data)
    assert loss._grad_fn is not None  # kept
    loss.backward()  # the same graph again, then released
    np.testing.assert_allclose(x.grad, 36 * x.data)
    assert loss._grad_fn is None and y._grad_fn is None


# ---- Function built directly ----------------------------------------------------------------


def test_a_node_can_be_built_directly_and_keeps_its_output() -> None:
    class Scale(Function):
        def forward(self, a):
            return a * np.float32(self.k)

        def backward(self, g):
            return (g * np.float32(self.k),)

    a = Tensor([1.0, 2.0], requires_grad=True)
    node = Scale(a, k=2.0)
    assert node.inputs == (a,) and node.k == 2.0 and node.output is None
    np.testing.assert_array_equal(node.forward(a.data), [2.0, 4.0])
    out = Scale.apply(a, k=5.0)
    assert out._grad_fn.output is out and out._grad_fn.k == 5.0


# ---- indexing, max, view, contiguous, numel -------------------------------------------------


def test_indexing_is_differentiable_and_scatter_adds() -> None:
    x = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    np.testing.assert_array_equal(x[1].data, [3.0, 4.0, 5.0])
    np.testing.assert_array_equal(x[:, 1:].data, [[1.0, 2.0], [4.0, 5.0]])
    (x[0, [0, 0, 2]] * Tensor([1.0, 2.0, 3.0])).sum().backward()  # a repeated index adds up
    np.testing.assert_array_equal(x.grad, [[3.0, 0.0, 3.0], [0.0, 0.0, 0.0]])


def test_max_over_an_axis_is_differentiable_and_splits_ties() -> None:
    x = Tensor([[1.0, 5.0, 5.0], [7.0, 2.0, 0.0]], requires_grad=True)
    assert x.max().item() == 7.0
    m = x.max(axis=1, keepdims=True)
    assert m.shape == (2, 1)
    np.testing.assert_array_equal(x.max(axis=0).data, [7.0, 5.0, 5.0])
    m.sum().backward()
    np.testing.assert_array_equal(x.grad, [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])


def test_view_contiguous_and_numel() -> None:
    x = Tensor(np.arange(6.0), requires_grad=True)
    v = x.view(2, 3)
    assert v.shape == (2, 3) and x.view((3, 2)).shape == (3, 2)
    assert x.numel() == 6 and v.contiguous().shape == (2, 3)
    (v.contiguous() * 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad, np.full(6, 2.0))


# ---- plain attributes -----------------------------------------------------------------------


def test_shape_size_and_dtype_are_plain_attributes_that_follow_data() -> None:
    t = Tensor(np.zeros((2, 3)))
    assert (t.shape, t.size, t.dtype) == ((2, 3), 6, np.float32)
    assert "shape" in vars(t) and "size" in vars(t) and "dtype" in vars(t)
    t.shape = (6,)  # code may assign them, as in the course
    assert t.shape == (6,)
    t.data = np.ones((4, 1), np.float32)  # replacing the data sets them again
    assert (t.shape, t.size) == ((4, 1), 4)


# ---- import paths ---------------------------------------------------------------------------


def test_the_course_import_paths() -> None:
    from tinytorch.core.autograd import Function as F2
    from tinytorch.core.autograd import is_grad_enabled, no_grad
    from tinytorch.core.spatial import Conv2d
    from tinytorch.core.tensor import Function as F1
    from tinytorch.nn import Conv2d as NnConv2d

    assert Conv2d is NnConv2d  # one implementation behind both names
    assert F1 is F2 is Function
    assert is_grad_enabled()
    with no_grad():
        assert not is_grad_enabled()
    assert is_grad_enabled()


# ---- the reference module at its edges ------------------------------------------------------


def test_reference_follows_the_course_at_its_edges() -> None:
    from tinytorch.perf import acceleration as acc

    with pytest.raises(ValueError, match="2D+"):
        acc.vectorized_matmul(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="shape mismatch"):
        acc.tiled_matmul(np.ones((2, 3)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="4D"):
        acc.im2col(np.ones((3, 4, 4)), 3)
    with pytest.raises(ValueError, match="does not match"):
        acc.col2im(np.ones((5, 9)), (1, 1, 4, 4), 3)
    assert acc.BYTES_PER_FLOAT32 == 4
    assert acc.DEFAULT_WARMUP_ITERATIONS >= 1 and acc.DEFAULT_TIMING_ITERATIONS >= 1
    x = Tensor(np.ones((1, 1, 4, 4)), requires_grad=True)
    out = acc.im2col_conv2d(x, np.ones((1, 1, 3, 3)))
    assert out._grad_fn is None and not out.requires_grad  # inference only


# ---- the conventions issue 40 found: Conv2d (Module 09) and autograd (Module 06) ---------------


def test_conv2d_bias_starts_at_zero_so_the_weight_alone_reproduces_the_layer() -> None:
    from tinytorch.core.spatial import Conv2d
    from tinytorch.perf.acceleration import im2col_conv2d

    conv = Conv2d(3, 4, 3, padding=1, seed=2)
    np.testing.assert_array_equal(conv.bias.data, np.zeros(4, np.float32))
    assert conv.bias.requires_grad and conv.bias.dtype == np.float32
    x = Tensor(np.random.default_rng(0).standard_normal((2, 3, 5, 6)))
    np.testing.assert_allclose(
        im2col_conv2d(x, conv.weight, padding=1).data, conv(x).data, rtol=1e-5, atol=1e-5
    )
    ones = Conv2d(1, 1, 3)  # the course's Module 09 check: a 3x3 of ones over ones gives 9.0
    ones.weight.data = np.ones((1, 1, 3, 3), np.float32)
    assert ones(Tensor(np.ones((1, 1, 3, 3)))).data.item() == 9.0


def test_conv2d_has_the_helpers_course_code_calls() -> None:
    from tinytorch.core.spatial import Conv2d

    conv = Conv2d(2, 3, 3, stride=2, padding=1, seed=4)
    conv.bias.data = np.array([0.5, -1.0, 2.0], np.float32)  # a bias, so the loops must add it
    x = np.random.default_rng(1).standard_normal((2, 2, 7, 6)).astype(np.float32)
    # _apply_padding: self.padding zeros on H and W only; an array stays an array.
    xp = conv._apply_padding(x)
    assert isinstance(xp, np.ndarray) and xp.shape == (2, 2, 9, 8)
    np.testing.assert_array_equal(xp, np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))))
    # ... and a Tensor stays a Tensor, differentiable: the gradient is the crop of the padded one.
    t = Tensor(x, requires_grad=True)
    tp = conv._apply_padding(t)
    assert isinstance(tp, Tensor) and tp.shape == (2, 2, 9, 8)
    (tp * Tensor(np.arange(tp.size, dtype=np.float32).reshape(tp.shape))).sum().backward()
    np.testing.assert_array_equal(t.grad, np.arange(tp.size).reshape(tp.shape)[:, :, 1:8, 1:7])
    # _compute_output_shape: (N, out_channels, oh, ow) from a shape, an array or a Tensor.
    assert conv._compute_output_shape((2, 2, 7, 6)) == (2, 3, 4, 3)
    assert conv._compute_output_shape(x) == conv._compute_output_shape(t) == (2, 3, 4, 3)
    for bad in ((2, 2, 7), (2, 2, 7.5, 6), "2x2x7x6", (2, 3, 7, 6)):  # 3 channels: not in_channels
        with pytest.raises(ValueError, match="input_shape"):
            conv._compute_output_shape(bad)
    # _convolve_loops: the direct sliding-window convolution of the padded input.
    out = conv._convolve_loops(xp)
    assert isinstance(out, np.ndarray) and out.shape == (2, 3, 4, 3)
    np.testing.assert_allclose(out, conv(Tensor(x)).data, rtol=1e-6, atol=1e-6)
    assert isinstance(conv._convolve_loops(Tensor(xp)), Tensor)  # a Tensor stays a Tensor
    np.testing.assert_allclose(conv._convolve_loops(Tensor(xp)).data, out, rtol=0, atol=0)


def test_backward_through_a_released_graph_raises_and_retain_graph_keeps_it() -> None:
    w = Tensor([1.0, 2.0], requires_grad=True)
    loss = (w * w).sum()
    loss.backward(retain_graph=True)
    loss.backward()  # kept by retain_graph: usable once more, then released
    np.testing.assert_array_equal(w.grad, [4.0, 8.0])
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        loss.backward()
    np.testing.assert_array_equal(w.grad, [4.0, 8.0])  # untouched by the refused pass
    y = w * 3.0  # an intermediate of a released graph, used again in a new one
    y.sum().backward()
    with pytest.raises(RuntimeError, match="released"):
        (y * 2.0).sum().backward()
    np.testing.assert_array_equal(w.grad, [7.0, 11.0])
    assert y.grad is not None and list(y.grad) == [1.0, 1.0]  # no partial update either


def test_contiguous_returns_a_new_c_contiguous_copy() -> None:
    x = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    c = x.contiguous()
    assert c is not x and not np.shares_memory(c.data, x.data)
    assert c.data.flags.c_contiguous
    np.testing.assert_array_equal(c.data, x.data)
    c.data[0, 0] = 99.0
    assert x.data[0, 0] == 0.0
    t = Tensor.wrap(np.asfortranarray(np.arange(6.0, dtype=np.float32).reshape(2, 3)))
    assert t.contiguous().data.flags.c_contiguous  # a Fortran-ordered array comes back in C order
    (x.contiguous() * 2.0).sum().backward()  # ours, beyond the course: the gradient passes
    np.testing.assert_array_equal(x.grad, np.full((2, 3), 2.0))


class KeepsItsOutput(Function):
    """A forward that keeps the very array it returns, three ways."""

    def forward(self, a: np.ndarray) -> np.ndarray:
        out = np.tanh(a)
        self.out = out
        self.cache = {"out": [out]}
        self.save_for_backward(out)
        return out

    def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
        (out,) = self.saved
        return (g * (1 - out * out),)


def test_apply_output_never_shares_memory_with_an_array_its_forward_kept() -> None:
    a = Tensor([0.5, -1.0, 2.0], requires_grad=True)
    out = KeepsItsOutput.apply(a)
    fn = out._grad_fn
    for kept in (fn.out, fn.cache["out"][0], fn.saved[0]):
        assert not np.shares_memory(out.data, kept)
    expected = 1 - np.tanh(a.data) ** 2
    out.data *= 0.0  # editing the result in place leaves the node's saved array alone
    out.sum().backward()
    np.testing.assert_allclose(a.grad, expected, rtol=1e-6)


# ---- whole course-style modules, graded --------------------------------------------------------

LOOPS_CONV = '''
def im2col_conv2d(x, weight, bias=None, stride=1, padding=0):
    """Forward only, one output pixel at a time."""
    X, Wt = _data(x), _data(weight)
    F, C, k, _ = Wt.shape
    N, _, H, W = X.shape
    Xp = np.pad(X, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (H + 2 * padding - k) // stride + 1
    ow = (W + 2 * padding - k) // stride + 1
    out = np.zeros((N, F, oh, ow), dtype=np.float32)
    for n in range(N):
        for i in range(oh):
            for j in range(ow):
                patch = Xp[n, :, i * stride : i * stride + k, j * stride : j * stride + k]
                out[n, :, i, j] = Wt.reshape(F, -1) @ patch.reshape(-1)
    if bias is not None:
        out += _data(bias).reshape(1, F, 1, 1)
    return Tensor(out)
'''

ADD_AT = '''
def col2im(cols, x_shape, kernel_size, stride=1, padding=0):
    """Scatter-add with np.add.at over precomputed pixel indices."""
    G = _data(cols)
    N, C, H, W = x_shape
    k = kernel_size
    oh = (H + 2 * padding - k) // stride + 1
    ow = (W + 2 * padding - k) // stride + 1
    i = (np.arange(oh)[:, None, None, None] * stride + np.arange(k)[None, None, :, None])
    j = (np.arange(ow)[None, :, None, None] * stride + np.arange(k)[None, None, None, :])
    Xp = np.zeros((N, C, H + 2 * padding, W + 2 * padding), dtype=np.float32)
    G6 = G.reshape(N, oh, ow, C, k, k)
    for n in range(N):
        for c in range(C):
            rows = np.broadcast_to(i, (oh, ow, k, k))
            colsj = np.broadcast_to(j, (oh, ow, k, k))
            np.add.at(Xp[n, c], (rows, colsj), G6[n, :, :, c])
    return Tensor(Xp[:, :, padding : padding + H, padding : padding + W])
'''

SLIDING = '''
def im2col_conv2d(x, weight, bias=None, stride=1, padding=0):
    """Forward only, with sliding_window_view and one einsum."""
    X, Wt = _data(x), _data(weight)
    k = Wt.shape[2]
    Xp = np.pad(X, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    win = np.lib.stride_tricks.sliding_window_view(Xp, (k, k), axis=(2, 3))[
        :, :, ::stride, ::stride
    ]  # (N, C, oh, ow, k, k)
    out = np.einsum("ncijpq,fcpq->nfij", win, Wt).astype(np.float32)
    if bias is not None:
        out += _data(bias).reshape(1, -1, 1, 1)
    return Tensor(out)
'''


def _graded(tmp_path: Path, name: str, append: str = "", grading: bool = False) -> object:
    path = tmp_path / f"{name}.py"
    path.write_text(COURSE.read_text() + append)
    return run_part_a(str(path), timeout=10.0, grading=grading)


def _passes(result: object) -> None:
    bad = [(c.name, c.detail) for c in [*result.failing(), *result.failing_checks()]]
    assert result.verdict == "PASS", (bad, result.missing)
    assert result.passed() == 30
    assert all(c.status == "pass" for c in result.checks), bad


def test_the_course_style_module_passes_in_grading_mode(tmp_path) -> None:
    result = _graded(tmp_path, "course_grading", grading=True)
    _passes(result)
    assert result.hidden and all(c.status == "pass" for c in result.hidden)


@pytest.mark.parametrize(
    "name, append", [("loops", LOOPS_CONV), ("add_at", ADD_AT), ("sliding", SLIDING)]
)
def test_other_course_valid_forward_only_variants_pass(tmp_path, name, append) -> None:
    _passes(_graded(tmp_path, name, append))


def test_a_wrong_grad_weight_is_blamed_on_im2col_conv2d_function_backward(tmp_path) -> None:
    source = COURSE.read_text()
    right = "grad_weight = (g.T @ self.cols).reshape(weight.shape)"
    assert source.count(right) == 1
    path = tmp_path / "grad_w_halved.py"
    path.write_text(source.replace(right, right + " * 0.5"))
    result = run_part_a(str(path), timeout=10.0)
    check = {c.name: c for c in result.checks}["backward"]
    assert result.verdict == "NOT_PASSED" and result.passed() == 30
    assert check.status == "fail" and "grad weight is wrong" in check.detail
    assert check.lesson == backward.LESSONS["weight"]
    assert check.lesson.startswith("In Im2colConv2dFunction.backward")
    assert result.blamed() == {"im2col_conv2d"}


def test_a_module_without_im2col_conv2d_function_is_incomplete_and_names_it(tmp_path) -> None:
    source = COURSE.read_text().replace("Im2colConv2dFunction", "_PrivateConv")
    path = tmp_path / "no_function_class.py"
    path.write_text(source)
    result = run_part_a(str(path), timeout=10.0)
    assert result.verdict == "INCOMPLETE"
    assert [m.split(" ")[1].split("(")[0] for m in result.missing] == ["Im2colConv2dFunction"]
    assert result.passed() == 30  # the forward cases still run and pass
    check = {c.name: c for c in result.checks}["backward"]
    assert check.status == "incomplete" and "Im2colConv2dFunction" in check.detail
