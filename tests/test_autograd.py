"""Module 06: the autograd engine: broadcasting, reuse, accumulation, order, no_grad, Function."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes
from numeric_grad import check_forward_backward, exp, tanh

from tinytorch.core import Function, Tensor, no_grad

seeds = st.integers(0, 2**32 - 1)


@st.composite
def broadcast_pair(draw):
    """(full shape, partner shape): the partner drops leading axes and/or has 1s where full does not."""
    full = draw(array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    keep = draw(st.integers(0, len(full)))
    partner = [1 if draw(st.booleans()) else d for d in full[len(full) - keep :]]
    return full, tuple(partner)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@given(shapes=broadcast_pair(), swap=st.booleans(), seed=seeds)
def test_broadcast_gradients_are_reduced_to_each_input_shape(op, shapes, swap, seed):
    rng = np.random.default_rng(seed)
    shape_a, shape_b = shapes[::-1] if swap else shapes
    a = rng.uniform(-2, 2, shape_a)
    b = rng.choice([-1.0, 1.0], shape_b) * rng.uniform(0.5, 2.0, shape_b)  # a safe divisor
    f = {
        "add": lambda x, y: x + y,
        "sub": lambda x, y: x - y,
        "mul": lambda x, y: x * y,
        "div": lambda x, y: x / y,
    }[op]
    check_forward_backward(f, [a, b], seed)


def test_python_scalar_and_0d_tensor_operands():
    check_forward_backward(lambda x, s: x * s + s / 2.0 - 1.0 / s, [np.ones((2, 3)), np.array(1.5)])


@given(shape=array_shapes(min_dims=0, max_dims=3, max_side=4), seed=seeds)
def test_node_used_twice_accumulates(shape, seed):
    x = np.random.default_rng(seed).uniform(-1.5, 1.5, shape)

    def f(t):
        y = exp(t)  # y feeds three consumers below
        return y * y + tanh(y) - y

    check_forward_backward(f, [x], seed)


def test_same_leaf_on_both_sides():
    # d/dx (x * x + x) = 2x + 1, worked out by hand.
    x = Tensor([-1.0, 0.5, 3.0], requires_grad=True)
    (x * x + x).sum().backward()
    np.testing.assert_allclose(x.grad, [-1.0, 2.0, 7.0])


def test_gradients_accumulate_across_two_backward_calls():
    c = np.array([[1.0, -2.0], [0.5, 3.0]])
    x = Tensor(np.ones((2, 2)), requires_grad=True)
    (x * c).sum().backward()
    (x * c).sum().backward()  # a second, freshly built graph
    np.testing.assert_allclose(x.grad, 2 * c)
    loss = (x * c).sum()
    loss.backward(retain_graph=True)
    loss.backward()  # the same graph twice: kept by retain_graph the first time
    np.testing.assert_allclose(x.grad, 4 * c)
    x.zero_grad()
    assert x.grad is None


TAP_LOG: list[str] = []


class Tap(Function):
    """Identity that records, in TAP_LOG, the order in which backward reaches it."""

    def forward(self, a: np.ndarray) -> np.ndarray:
        return a.copy()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
        TAP_LOG.append(self.name)  # the keyword of apply(..., name=...), kept as an attribute
        return (g,)


def test_diamond_runs_backward_in_topological_order():
    #        x
    #        |
    #      top          a node with two consumers
    #     /    \
    #  left   right1    the right branch is longer, so a depth-first walk meets `top` early
    #    |      |
    #    |    right2
    #     \    /
    #      out
    TAP_LOG.clear()
    x = Tensor([0.3, -0.7], requires_grad=True)
    top = Tap.apply(x * 2.0, name="top")
    left = Tap.apply(top * 3.0, name="left")
    right1 = Tap.apply(tanh(top), name="right1")
    right2 = Tap.apply(right1 * right1, name="right2")
    out = Tap.apply(left + right2, name="out")
    out.sum().backward()

    order = {name: i for i, name in enumerate(TAP_LOG)}
    assert sorted(order) == ["left", "out", "right1", "right2", "top"], TAP_LOG  # once each
    assert order["out"] < order["left"] and order["out"] < order["right2"] < order["right1"]
    assert order["top"] > max(order["left"], order["right1"]), TAP_LOG
    # d/dx of 6x + tanh(2x)^2, by hand.
    t = np.tanh(2 * x.data.astype(np.float64))
    np.testing.assert_allclose(x.grad, 6 + 2 * t * (1 - t * t) * 2, rtol=1e-6)


@given(seed=seeds, depth=st.integers(1, 4))
def test_diamond_gradient_matches_finite_differences(seed, depth):
    x = np.random.default_rng(seed).uniform(-1, 1, (3, 2))

    def f(t):
        top = t * t
        right = top
        for _ in range(depth):
            right = tanh(right) * 1.5
        return (top + right) * top

    check_forward_backward(f, [x], seed)


def test_deep_chain_does_not_recurse():
    x = Tensor([1.0], requires_grad=True)
    y = x
    for _ in range(5000):
        y = y * 1.0001
    y.backward(np.ones(1))
    np.testing.assert_allclose(x.grad, [1.0001**5000], rtol=1e-3)


def test_no_grad_builds_no_graph():
    x = Tensor([1.0, 2.0], requires_grad=True)
    with no_grad():
        y = x * 2.0 + 1.0
        with no_grad():
            pass
        z = x * 3.0  # still inside the outer block after the nested one closed
    assert not y.requires_grad and not z.requires_grad
    y.sum().backward()  # the course's rule: a silent no-op, nothing reaches x
    assert x.grad is None
    w = x * 2.0
    assert w.requires_grad
    w.sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, 2.0])


def test_no_grad_is_restored_after_an_exception():
    x = Tensor([1.0], requires_grad=True)
    with pytest.raises(ZeroDivisionError), no_grad():
        raise ZeroDivisionError
    assert (x * 2.0).requires_grad


def test_leaves_without_requires_grad_get_no_gradient():
    a = Tensor([1.0, 2.0], requires_grad=True)
    b = Tensor([3.0, 4.0])
    (a * b).sum().backward()
    assert b.grad is None
    np.testing.assert_array_equal(a.grad, [3.0, 4.0])


class ScaleFirst(Function):
    """c = a * k for a keyword constant k; the second input only rides along (no gradient)."""

    def forward(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a * np.float32(self.k) + 0 * b

    def backward(self, g: np.ndarray) -> tuple[np.ndarray, None]:
        return g * np.float32(self.k), None


class WrongShape(Function):
    def forward(self, a: np.ndarray) -> np.ndarray:
        return a.sum(keepdims=True)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
        return (g,)  # should be broadcast back to a's shape


def test_custom_function_with_keyword_params_and_none_gradient():
    a = Tensor([1.0, 2.0], requires_grad=True)
    b = Tensor([5.0, 6.0], requires_grad=True)
    out = ScaleFirst.apply(a, b, k=3.0)
    np.testing.assert_array_equal(out.data, [3.0, 6.0])
    out.sum().backward()
    np.testing.assert_array_equal(a.grad, [3.0, 3.0])
    assert b.grad is None


def test_wrong_gradient_shape_names_the_function():
    a = Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ValueError, match="WrongShape.backward"):  # ValueError, as in the course
        WrongShape.apply(a).backward(np.ones(1))


def test_backward_argument_errors():
    x = Tensor(np.ones((2, 2)), requires_grad=True)
    with pytest.raises(ValueError, match="scalar"):
        (x * 2.0).backward()
    with pytest.raises(ValueError, match="gradient"):
        (x * 2.0).backward(np.ones(3))


class Record(Function):
    """Identity on its first input that remembers what forward received."""

    seen: tuple = ()

    def forward(self, *arrays: np.ndarray | None) -> np.ndarray:
        Record.seen = arrays
        return arrays[0] * np.float32(1.0)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g,) + (None,) * (len(self.inputs) - 1)


def test_apply_follows_the_course_convention():
    x = Tensor([1.0, 2.0], requires_grad=True)
    w = Tensor([3.0, 4.0])
    out = Record.apply(x, w, None, stride=2, padding=1)
    # forward got only the arrays (None stays None); the keywords became attributes
    assert len(Record.seen) == 3 and Record.seen[2] is None
    assert Record.seen[0] is x.data and Record.seen[1] is w.data
    node = out._grad_fn
    assert isinstance(node, Record) and node.inputs == (x, w, None)
    assert (node.stride, node.padding) == (2, 1)
    assert not hasattr(out, "_ctx")
    out.backward(np.ones(2, np.float32))
    np.testing.assert_array_equal(x.grad, [1.0, 1.0])


def test_no_node_is_recorded_without_grad():
    out = Record.apply(Tensor([1.0]), k=1)
    assert out._grad_fn is None and not out.requires_grad


def test_output_that_aliases_an_input_is_a_copy():
    x = Tensor([1.0, 2.0, 3.0])
    y = x.reshape(3, 1)  # Reshape.forward returns a view of x.data
    y.data[0, 0] = 9.0
    assert x.data[0] == 1.0


@pytest.mark.parametrize(
    "op, derivative", [("exp", np.exp), ("tanh", lambda x: 1 - np.tanh(x) ** 2)]
)
def test_editing_a_result_in_place_leaves_its_gradient_alone(op, derivative):
    """Exp and Tanh keep their output for backward: a copy, so that in-place work on the result's
    .data (as on the course's always-copied Tensors) cannot change the gradient."""
    data = np.array([-1.0, 0.0, 0.5, 2.0], dtype=np.float32)
    x = Tensor(data, requires_grad=True)
    y = getattr(x, op)()
    y.data *= 3.0
    y.data += 1.0
    y.backward(np.ones(4, dtype=np.float32))
    np.testing.assert_allclose(x.grad, derivative(data.astype(np.float64)), rtol=1e-6, atol=1e-6)


class TooFew(Function):
    def forward(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    def backward(self, g: np.ndarray) -> tuple[np.ndarray]:
        return (g,)


def test_backward_gradients_are_zipped_with_the_inputs():
    """As in the course: gradients pair with inputs in order; a missing one leaves that input be."""
    a, b = Tensor([1.0], requires_grad=True), Tensor([2.0], requires_grad=True)
    TooFew.apply(a, b).backward(np.ones(1))
    np.testing.assert_array_equal(a.grad, [1.0])
    assert b.grad is None


def test_a_one_input_backward_may_return_the_bare_array():
    class Double(Function):
        def forward(self, a: np.ndarray) -> np.ndarray:
            return a * np.float32(2.0)

        def backward(self, g: np.ndarray) -> np.ndarray:
            return g * np.float32(2.0)

    a = Tensor([1.0, 5.0], requires_grad=True)
    Double.apply(a).sum().backward()
    np.testing.assert_array_equal(a.grad, [2.0, 2.0])
