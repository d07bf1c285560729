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
    """Sum `grad` over the axes that broadcasting added or stretched, so it has `shape` again."""
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    for axis, size in enumerate(shape):
        if size == 1 and grad.shape[axis] != 1:
            grad = grad.sum(axis=axis, keepdims=True)
    return grad.reshape(shape)


class Function:
    """Base class of an autograd node. Subclasses implement `forward` and `backward`."""

    def __init__(self) -> None:
        self.inputs: tuple[Tensor, ...] = ()
        self.saved: tuple[Any, ...] = ()

    def save_for_backward(self, *values: Any) -> None:
        self.saved = values

    def forward(self, *arrays: np.ndarray, **params: Any) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, grad_output: np.ndarray) -> tuple[np.ndarray | None, ...]:
        raise NotImplementedError(f"{type(self).__name__}.backward")

    @classmethod
    def apply(cls, *inputs: Any, **params: Any) -> Tensor:
        """Run forward on the inputs' data; record the node when any input requires grad."""
        from tinytorch.core.tensor import Tensor

        tensors = tuple(x if isinstance(x, Tensor) else Tensor(x) for x in inputs)
        fn = cls()
        out_data = fn.forward(*(t.data for t in tensors), **params)
        needs_grad = _grad_enabled and any(t.requires_grad for t in tensors)
        out = Tensor(out_data, requires_grad=needs_grad)
        if needs_grad:
            fn.inputs = tensors
            out._ctx = fn
        return out


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
        if node._ctx is not None:
            for parent in node._ctx.inputs:
                if id(parent) not in visited:
                    stack.append((parent, False))
    order.reverse()  # root first, leaves last
    return order


def backward_pass(root: Tensor, grad: np.ndarray) -> None:
    """Propagate `grad` (d loss / d root) to every leaf that requires grad, accumulating in `.grad`."""
    grads: dict[int, np.ndarray] = {id(root): grad}
    for node in _topological_order(root):
        g = grads.pop(id(node), None)
        if g is None:
            continue
        if node._ctx is None:
            if node.requires_grad:
                g = g.astype(np.float32, copy=False)
                node.grad = g.copy() if node.grad is None else node.grad + g
            continue
        parent_grads = node._ctx.backward(g)
        for parent, pg in zip(node._ctx.inputs, parent_grads, strict=True):
            if pg is None or not parent.requires_grad:
                continue
            if pg.shape != parent.shape:
                raise RuntimeError(
                    f"{type(node._ctx).__name__}.backward returned a gradient of shape {pg.shape} "
                    f"for an input of shape {parent.shape}"
                )
            key = id(parent)
            grads[key] = pg if key not in grads else grads[key] + pg
