"""Course compatibility: a Module 17 written the public course's way grades here as it does there.

tests/course/course_module.py is such a module (a Function subclass called with
`apply(x, weight, bias, stride=, padding=)`, in-place work on a copied Tensor, the course's
imports). Also: the course's import line, vectorized_matmul and unfused_gelu, the course-style
call of Im2colConv2dFunction against finite differences, and a backward stub named as such.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from numeric_grad import assert_close, numeric_grad

from tinytorch.core.tensor import Tensor
from tinytorch.milestone07 import backward, run_part_a
from tinytorch.milestone07.references import ref_conv2d, ref_gelu, ref_matmul

COURSE = Path(__file__).parent / "course" / "course_module.py"
_RUNS: dict[str, object] = {}


def part_a(path: Path) -> object:
    if str(path) not in _RUNS:
        _RUNS[str(path)] = run_part_a(str(path), timeout=10.0)
    return _RUNS[str(path)]


def test_course_style_module_passes_every_case_and_check() -> None:
    result = part_a(COURSE)
    bad = [(c.name, c.detail) for c in [*result.failing(), *result.failing_checks()]]
    assert result.verdict == "PASS", bad
    assert result.passed() == 30
    assert {c.name: c.status for c in result.checks}["backward"] == "pass"


def test_the_course_import_line_works() -> None:
    from tinytorch.perf import acceleration
    from tinytorch.perf.acceleration import (
        Im2colConv2dFunction,
        col2im,
        fused_gelu,
        im2col,
        tiled_matmul,
        vectorized_matmul,
    )

    exported = {"vectorized_matmul", "unfused_gelu", "fused_gelu", "tiled_matmul", "im2col"}
    exported |= {"col2im", "im2col_conv2d", "Im2colConv2dFunction"}
    assert exported <= set(acceleration.__all__)
    assert all(callable(f) for f in (col2im, fused_gelu, im2col, tiled_matmul, vectorized_matmul))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    out = Im2colConv2dFunction.apply(Tensor(x), Tensor(w), Tensor(b), stride=1, padding=1)
    assert out.shape == (2, 4, 6, 5)
    np.testing.assert_allclose(out.data, ref_conv2d(x, w, b, 1, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "stride, padding, with_bias", [(2, 1, True), (1, 0, False), (3, 2, True)], ids=str
)
def test_course_style_apply_matches_finite_differences(stride, padding, with_bias) -> None:
    from tinytorch.perf.acceleration import Im2colConv2dFunction

    rng = np.random.default_rng(stride + padding)
    x = rng.uniform(-1, 1, (2, 2, 6, 5)).astype(np.float32).astype(np.float64)
    w = rng.uniform(-1, 1, (3, 2, 3, 3)).astype(np.float32).astype(np.float64)
    b = rng.uniform(-1, 1, 3).astype(np.float32).astype(np.float64)
    inputs = [x, w, b] if with_bias else [x, w]
    tensors = [Tensor(a, requires_grad=True) for a in inputs]
    bias_t = tensors[2] if with_bias else None
    out = Im2colConv2dFunction.apply(tensors[0], tensors[1], bias_t, stride=stride, padding=padding)
    node = out._grad_fn
    assert (node.stride, node.padding) == (stride, padding)  # keywords live on the node
    assert node.inputs[2] is bias_t

    def f(*arrays: np.ndarray) -> np.ndarray:
        return ref_conv2d(arrays[0], arrays[1], arrays[2] if with_bias else None, stride, padding)

    weight = rng.uniform(-1, 1, out.shape).astype(np.float32).astype(np.float64)
    assert_close(out.data, f(*inputs), 1e-5, "forward")
    out.backward(weight.astype(np.float32))
    for k, (t, g) in enumerate(zip(tensors, numeric_grad(f, inputs, weight), strict=True)):
        assert_close(t.grad, g, 1e-4, f"gradient of input {k}")


def test_vectorized_matmul_batches_and_broadcasts_like_numpy() -> None:
    from tinytorch.perf.acceleration import vectorized_matmul

    rng = np.random.default_rng(1)
    for a_shape, b_shape in [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2))]:
        a = rng.standard_normal(a_shape).astype(np.float32)
        b = rng.standard_normal(b_shape).astype(np.float32)
        out = vectorized_matmul(a, b)
        expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
        assert isinstance(out, Tensor) and out.dtype == np.float32
        assert out.shape == expected.shape
        np.testing.assert_allclose(out.data, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(vectorized_matmul(a, b).data, ref_matmul(a, b), rtol=1e-5)


@pytest.mark.parametrize(
    "a_shape, b_shape, match",
    [((3, 4), (5, 2), "inner dimensions"), ((2, 3, 4), (3, 4, 5), "batch dimensions"),
     ((), (3, 3), "a must have at least 2 dimensions"), ((3, 3), (), "b must have"),
     ((4,), (4,), r"a must have at least 2 dimensions \(matmul requires 2D\+"),
     ((4,), (4, 3), "a must have"), ((2, 3, 4), (4,), "b must have")],
)  # fmt: skip
def test_vectorized_matmul_argument_errors_are_value_errors(a_shape, b_shape, match) -> None:
    from tinytorch.perf.acceleration import vectorized_matmul

    with pytest.raises(ValueError, match=f"vectorized_matmul: {match}"):
        vectorized_matmul(np.ones(a_shape), np.ones(b_shape))


def test_unfused_gelu_is_gelu_everywhere_and_does_not_touch_its_input() -> None:
    from tinytorch.perf.acceleration import fused_gelu, unfused_gelu

    x = np.concatenate(
        [np.linspace(-8, 8, 1001), [-3e38, -1e10, -100, 0.0, 100, 1e10, 3e38]]
    ).astype(np.float32)
    before = x.copy()
    out = unfused_gelu(x)
    assert out.dtype == np.float32 and np.all(np.isfinite(out.data))
    np.testing.assert_allclose(out.data, ref_gelu(x), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.data, fused_gelu(x).data, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(x, before)


def test_tile_size_that_is_not_an_int_is_a_value_error() -> None:
    from tinytorch.perf.acceleration import tiled_matmul

    with pytest.raises(ValueError, match="tile_size must be a positive int"):
        tiled_matmul(np.ones((2, 2)), np.ones((2, 2)), 2.5)


BACKWARD = "    def backward(self, grad_output):\n"


@pytest.mark.parametrize(
    "stub",
    [
        "        raise NotImplementedError('write the backward pass')\n",  # the release's stub
        "        if grad_output is not None:\n            raise NotImplementedError('later')\n",
    ],
    ids=["unconditional", "only_at_run_time"],
)
def test_a_backward_stub_makes_the_run_incomplete_and_is_named(stub, tmp_path) -> None:
    source = COURSE.read_text()
    assert source.count(BACKWARD) == 1
    path = tmp_path / "no_backward.py"
    path.write_text(source.replace(BACKWARD, BACKWARD + stub))
    result = run_part_a(str(path), timeout=10.0)
    assert result.verdict == "INCOMPLETE", result.missing
    assert [m.split("(")[0] for m in result.missing] == ["Im2colConv2dFunction.backward"]
    assert result.passed() == 30  # the forward is written: every case still runs and passes
    assert {c.name: c.status for c in result.checks}["backward"] == "incomplete"


@pytest.mark.parametrize(
    "phase, error, lesson",
    [
        ("forward", "TypeError: unsupported operand (at m.py:3)", "forward"),
        ("backward", "RuntimeError: Conv.backward returned 2 gradients for 3 inputs: ...", "gradients"),
        ("backward", "ValueError: Conv.backward returned a gradient of shape (3,) for ...", "gradients"),
        ("backward", "RuntimeError: backward(): this tensor does not require grad ...", "graph"),
        ("backward", "ValueError: operands could not be broadcast together (at m.py:9)", "backward"),
    ],
)  # fmt: skip
def test_a_raising_backward_check_gets_the_lesson_of_its_phase_and_message(phase, error, lesson):
    reply = {"status": "raised", "error": error, "phase": phase}
    got = backward._failed_reply(None, reply, "x (1, 1, 4, 4)")
    assert (got.status, got.lesson) == ("fail", backward.LESSONS[lesson])
    assert got.detail == f"x (1, 1, 4, 4): raised {error}"


def test_a_backward_that_drops_the_bias_gradient_is_told_grad_bias_is_missing(tmp_path) -> None:
    """As in the course, gradients are zipped with the inputs: two for three inputs is no error,
    but the bias then gets no gradient, and the check names it."""
    source = COURSE.read_text()
    returns = "            return grad_x, grad_weight, grad_bias\n"
    assert source.count(returns) == 1
    path = tmp_path / "two_gradients.py"
    path.write_text(source.replace(returns, "            return grad_x, grad_weight\n"))
    result = run_part_a(str(path), timeout=10.0)
    check = {c.name: c for c in result.checks}["backward"]
    assert result.verdict == "NOT_PASSED" and check.status == "fail"
    assert "grad bias is missing" in check.detail
    assert check.lesson == backward.LESSONS["bias"]
    assert check.blame == ["im2col_conv2d"] and "Im2colConv2dFunction.backward" in check.lesson


CLASS = "class Im2colConv2dFunction(Function):\n"
ABSTRACT = """
class AbstractConv(Function):
    def forward(self, x, weight, bias):
        raise NotImplementedError("each convolution writes its own forward")

    def backward(self, grad_output):
        raise NotImplementedError


def unused_extra(x):
    raise NotImplementedError("an idea for later")


class Im2colConv2dFunction(AbstractConv):
"""


def test_stubs_outside_the_graded_places_are_warnings_not_incomplete(tmp_path) -> None:
    source = COURSE.read_text()
    assert source.count(CLASS) == 1
    path = tmp_path / "with_abstract_base.py"
    path.write_text(source.replace(CLASS, ABSTRACT))
    result = run_part_a(str(path), timeout=10.0)
    assert result.verdict == "PASS", result.missing
    assert result.passed() == 30 and result.missing == []
    warned = [w.split()[0] for w in result.warnings if "NotImplementedError" in w]
    assert warned == ["AbstractConv.forward", "AbstractConv.backward", "unused_extra"]


def test_a_stub_in_the_function_class_im2col_conv2d_uses_is_incomplete(tmp_path) -> None:
    """Whatever the class is called: its methods are graded places, a base's overridden ones not."""
    source = COURSE.read_text().replace(CLASS, ABSTRACT).replace("Im2colConv2dFunction", "Conv")
    stub = "    def extra(self):\n        raise NotImplementedError\n\n"
    path = tmp_path / "stubbed_method.py"
    alias = "\nIm2colConv2dFunction = Conv  # the graded name, bound to the student's class\n"
    path.write_text(source.replace(BACKWARD, stub + BACKWARD) + alias)
    result = run_part_a(str(path), timeout=10.0)
    assert result.verdict == "INCOMPLETE"
    assert [m.split("(")[0] for m in result.missing] == ["Conv.extra"]
    assert result.passed() == 30


def test_direct_apply_with_mismatched_shapes_names_them() -> None:
    from tinytorch.perf.acceleration import Im2colConv2dFunction

    with pytest.raises(ValueError, match=r"Im2colConv2dFunction: x \(1, 2, 4, 4\), weight"):
        Im2colConv2dFunction.apply(np.ones((1, 2, 4, 4)), np.ones((1, 3, 2, 2)), None)
    with pytest.raises(ValueError, match="stride"):
        Im2colConv2dFunction.apply(np.ones((1, 1, 4, 4)), np.ones((1, 1, 2, 2)), None, stride=0)


def test_a_wrong_shaped_gradient_raises_value_error_and_gets_the_gradients_lesson(tmp_path) -> None:
    """Our autograd raises ValueError for it, as the course does; the check still classifies it
    (by the message's ".backward returned", whatever the exception's type)."""
    source = COURSE.read_text()
    right = "grad_weight = (g.T @ self.cols).reshape(weight.shape)"
    assert source.count(right) == 1
    path = tmp_path / "grad_w_flat.py"
    path.write_text(source.replace(right, "grad_weight = g.T @ self.cols  # (F, C*k*k): unshaped"))
    result = run_part_a(str(path), timeout=10.0)
    check = {c.name: c for c in result.checks}["backward"]
    assert result.verdict == "NOT_PASSED" and check.status == "fail"
    assert "raised ValueError: Im2colConv2dFunction.backward returned a gradient of shape" in (
        check.detail
    )
    assert check.lesson == backward.LESSONS["gradients"]
