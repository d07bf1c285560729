"""Module 06: reverse-mode autograd.

A `Function` is one node of the graph. `forward` works on float32 ndarrays; `backward` maps the
gradient of the output to one gradient per input (None where an input needs none). `Function.apply`
wires the node into the graph; `backward_pass` walks the graph in reverse topological order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from tinytorch.core.tensor import Tensor

_grad_enabled = True
# The Tensor class that apply wraps inputs and results in. Set once by tinytorch.core.tensor, which
# imports this module (so this module never imports it: no import cycle).
_tensor_class: Any = None


def use_tensor_class(cls: type) -> None:
    """Called by tinytorch.core.tensor at import: the class Function.apply builds."""
    global _tensor_class
    _tensor_class = cls


def is_grad_enabled() -> bool:
    """Whether operations record the graph now (False inside `no_grad()`)."""
    return _grad_enabled


@contextlib.contextmanager
def no_grad() -> Iterator[None]:
    """Build no graph inside the block (inference, optimiser updates)."""
    global _grad_enabled
    previous, _grad_enabled = _grad_enabled, False
    try:
        yield
    finally:
        _grad_enabled = previous


def unbroadcast(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum `grad` over the axes that broadcasting added or stretched, so it has `shape` again.

    Raises ValueError when `grad` cannot have come from broadcasting to an array of `shape`.
    """
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    if grad.ndim < len(shape):  # (O,) for a (1, O) input: the leading 1s come back by reshape
        grad = grad.reshape((1,) * (len(shape) - grad.ndim) + grad.shape)
    for axis, size in enumerate(shape):
        if size == 1 and grad.shape[axis] != 1:
            grad = grad.sum(axis=axis, keepdims=True)
    if grad.shape != tuple(shape):
        raise ValueError(f"a gradient of shape {grad.shape} does not reduce to shape {shape}")
    return grad


class Function:
    """Base class of an autograd node. Subclasses implement `forward` and `backward`.

    The course's convention: `apply(*inputs, **params)` makes the node `cls(*inputs, **params)`,
    which keeps the input Tensors in `self.inputs` and each keyword as an attribute
    (`self.stride`, ...), then calls `forward(*arrays)` with only the inputs' data and keeps the
    result in `self.output`. A node can also be built directly, `Fn(*inputs, **params)`.
    `backward(grad_output)` returns gradients that are zipped with `self.inputs`: extra ones are
    ignored, and each is summed down to its input's shape (kept or added broadcast axes are fine).
    A None input (an absent bias) stays None in `self.inputs` and reaches `forward` as None.
    """

    def __init__(self, *inputs: Any, **params: Any) -> None:
        self.inputs: tuple[Tensor | None, ...] = inputs
        self.saved: tuple[Any, ...] = ()
        self.output: Tensor | None = None
        for name, value in params.items():
            setattr(self, name, value)

    def save_for_backward(self, *values: Any) -> None:
        self.saved = values

    def forward(self, *arrays: np.ndarray | None) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, grad_output: np.ndarray) -> tuple[np.ndarray | None, ...]:
        raise NotImplementedError(f"{type(self).__name__}.backward")

    @classmethod
    def apply(cls, *inputs: Any, **params: Any) -> Tensor:
        """Run forward on the inputs' data; record the node as `_grad_fn` when one requires grad."""
        Tensor = _tensor_class
        tensors = tuple(x if x is None or isinstance(x, Tensor) else Tensor(x) for x in inputs)
        fn = cls(*tensors, **params)
        # Set again: a subclass's own __init__ may not pass them on to Function.__init__.
        fn.inputs = tensors
        for name, value in params.items():
            setattr(fn, name, value)
        arrays = tuple(None if t is None else t.data for t in tensors)
        out_data = np.asarray(fn.forward(*arrays))
        needs_grad = _grad_enabled and any(t is not None and t.requires_grad for t in tensors)
        # A fresh float32 result becomes the output as it is. One that may share memory with an
        # input (a reshape view, the input itself) or with an array the forward kept (saved,
        # or an attribute: `self.out = out; return out`) is copied, as in the course: editing
        # the output in place must never change what backward reads.
        fresh = out_data.dtype == np.float32
        if fresh:
            looked: set[int] = set()  # an input's array is often saved too: look at it once
            for a in (*arrays, *_kept_arrays(fn)):
                if a is not None and id(a) not in looked:
                    looked.add(id(a))
                    if np.may_share_memory(out_data, a):
                        fresh = False
                        break
        out = Tensor.wrap(out_data) if fresh else Tensor(out_data)
        out.requires_grad = needs_grad
        if needs_grad:
            out._grad_fn = fn
            fn.output = out  # the node keeps its output (out -> fn -> out until released)
        return out


_KEPT_LIMIT = 4096  # values walked per node: a forward may keep a huge list (hostile code)
_SKIP = ("inputs", "output")  # looked at by the caller, or not set yet


def _kept_arrays(fn: Function) -> list[np.ndarray]:
    """The ndarrays (and Tensors' data) a node's forward kept: in `saved` and in its attributes,
    inside tuples, lists and dicts too (a bounded walk)."""
    found: list[np.ndarray] = []
    stack: list[Any] = []
    for key, value in vars(fn).items():  # the common cases first, without the stack
        if isinstance(value, np.ndarray):
            found.append(value)
        elif key not in _SKIP and isinstance(value, (tuple, list, dict, _tensor_class)):
            stack.append(value)
    seen = 0
    while stack and seen < _KEPT_LIMIT:
        value = stack.pop()
        seen += 1
        if isinstance(value, np.ndarray):
            found.append(value)
        elif isinstance(value, _tensor_class):
            found.append(value.data)
        elif type(value) in (tuple, list):
            stack.extend(value[:_KEPT_LIMIT])
        elif type(value) is dict:
            stack.extend(list(value.values())[:_KEPT_LIMIT])
    return found


def _topological_order(root: Tensor) -> list[Tensor]:
    """Tensors reachable from `root`, each after every tensor that consumes it (iterative DFS)."""
    order: list[Tensor] = []
    visited: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in visited:
            continue
        visited.add(id(node))
        stack.append((node, True))
        if node._grad_fn is not None:
            for parent in node._grad_fn.inputs:
                if parent is not None and id(parent) not in visited:
                    stack.append((parent, False))
    order.reverse()  # root first, leaves last
    return order


def backward_pass(root: Tensor, grad: np.ndarray, retain_graph: bool = False) -> None:
    """Propagate `grad` (d loss / d root) through the graph, accumulating in `.grad` of every
    tensor that requires grad (leaves and intermediate results alike).

    Unless `retain_graph`, the graph is released afterwards: every result forgets its node, so
    the saved arrays can be freed, and is marked released. As in the course, a backward that
    reaches a released result raises RuntimeError, before any `.grad` changes (rather than
    stopping there in silence, as if the result were a leaf).
    """
    grads: dict[int, np.ndarray] = {id(root): grad}
    order = _topological_order(root)
    for node in order:
        if getattr(node, "_released", False):  # set below, when a backward released it
            what = "this tensor's graph" if node is root else "a tensor in this graph"
            raise RuntimeError(
                f"backward(): {what} was already released by an earlier backward(), which frees "
                "the graph; pass backward(retain_graph=True) to the earlier call to go through "
                "the graph again, or recompute the forward pass"
            )
    for node in order:
        g = grads.pop(id(node), None)
        if g is None:
            continue
        if node.requires_grad:
            g = g.astype(np.float32, copy=False)
            node.grad = g.copy() if node.grad is None else node.grad + g
        fn = node._grad_fn
        if fn is None:
            continue
        parent_grads = fn.backward(g)
        if parent_grads is None or isinstance(parent_grads, np.ndarray):
            parent_grads = (parent_grads,)  # a one-input node may return its gradient alone
        # Zipped with the inputs, as in the course: extra gradients are ignored.
        for parent, pg in zip(fn.inputs, parent_grads, strict=False):
            pg = None if pg is None else np.asarray(pg)  # a Tensor gradient counts by its data
            if pg is None or parent is None or not parent.requires_grad:
                continue
            if pg.shape != parent.shape:
                try:
                    pg = unbroadcast(pg, parent.shape)
                except ValueError:
                    # ValueError, as in the course. The milestone's backward check finds this
                    # message by ".backward returned" (milestone07/backward.py).
                    raise ValueError(
                        f"{type(fn).__name__}.backward returned a gradient of shape {pg.shape} "
                        f"for an input of shape {parent.shape}"
                    ) from None
            key = id(parent)
            grads[key] = pg if key not in grads else grads[key] + pg
    if not retain_graph:
        for node in order:
            if node._grad_fn is not None:
                node._grad_fn.output = None
                node._grad_fn = None
                node._released = True
