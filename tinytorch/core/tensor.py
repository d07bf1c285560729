"""Module 01: Tensor, a float32 ndarray with an optional gradient.

Operators build the autograd graph of Module 06 (see `tinytorch.core.ops`); `backward()` runs it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinytorch.core import ops
from tinytorch.core.autograd import Function, backward_pass, use_tensor_class

ArrayLike = Any  # anything np.asarray turns into a real-valued array


def _to_float32(data: ArrayLike, name: str = "data") -> np.ndarray:
    """A new float32 ndarray holding `data`, or an error that says what was expected."""
    if isinstance(data, Tensor):
        return data.data.copy()
    if isinstance(data, (str, bytes)):
        raise TypeError(
            f"Tensor({name}=...): expected numbers or an array, got a {type(data).__name__}"
        )
    try:
        arr = np.asarray(data)
    except ValueError as exc:  # NumPy >= 1.24 rejects ragged nested lists
        raise ValueError(
            f"Tensor({name}=...): expected a rectangular nested sequence of numbers, "
            f"got a ragged one ({exc})"
        ) from None
    if arr.dtype == object or arr.dtype.kind in "USV":
        raise TypeError(
            f"Tensor({name}=...): expected real numbers, got elements of dtype {arr.dtype}"
        )
    if arr.dtype.kind == "c":
        raise TypeError(f"Tensor({name}=...): complex numbers are not supported")
    # Always a copy (as in the course): the Tensor never shares memory with what it was made of.
    return np.array(arr, dtype=np.float32, copy=True, order="K", subok=False)


class Tensor:
    """An n-dimensional float32 array that can record the operations applied to it."""

    __array_priority__ = 1000  # make ndarray + Tensor defer to Tensor.__radd__
    # True once a backward() without retain_graph released the graph that made this tensor: a
    # later backward that reaches it raises (autograd.backward_pass). Leaves are never released.
    _released: bool = False

    def __init__(self, data: ArrayLike, requires_grad: bool = False) -> None:
        """Copy `data` (a Tensor, an ndarray, nested lists, a number) into a new float32 array."""
        self.data = _to_float32(data)
        self.requires_grad: bool = bool(requires_grad)
        self.grad: np.ndarray | None = None
        self._grad_fn: Function | None = None

    @classmethod
    def wrap(cls, array: np.ndarray, requires_grad: bool = False) -> Tensor:
        """A Tensor whose `.data` IS `array`, shared, not copied: the explicit view path.

        For our own code only (autograd outputs, the grader's sandbox and audit): `array` must
        already be a float32 ndarray (an ndarray subclass stays that subclass).
        """
        if not isinstance(array, np.ndarray) or array.dtype != np.float32:
            what = type(array).__name__ if not isinstance(array, np.ndarray) else array.dtype
            raise TypeError(f"Tensor.wrap(array=...): expected a float32 ndarray, got {what}")
        t = cls.__new__(cls)
        t.data, t.requires_grad, t.grad, t._grad_fn = array, bool(requires_grad), None, None
        return t

    # ---- array-like basics ----------------------------------------------------------------
    # As in the course, `shape`, `size` and `dtype` are plain attributes (code may assign them);
    # they are set again whenever `.data` is replaced, so they never go stale.
    @property
    def data(self) -> np.ndarray:
        return self._data

    @data.setter
    def data(self, array: np.ndarray) -> None:
        self._data = array
        self.shape: tuple[int, ...] = array.shape
        self.size: int = int(array.size)
        self.dtype: np.dtype = array.dtype

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def T(self) -> Tensor:
        """All axes reversed (NumPy's .T); the same as transpose() on 2-D."""
        return ops.Transpose.apply(self, axes=None)

    def numpy(self) -> np.ndarray:
        return self.data

    def item(self) -> float:
        return float(self.data.item())

    def __len__(self) -> int:
        return len(self.data)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self.requires_grad else ""
        return f"Tensor({np.array2string(self.data, precision=4, threshold=20)}, shape={self.shape}{grad})"

    def detach(self) -> Tensor:
        """The same data, shared, outside the graph."""
        return Tensor.wrap(self.data)

    # ---- autograd -------------------------------------------------------------------------
    def backward(self, gradient: ArrayLike | None = None, retain_graph: bool = False) -> None:
        """Accumulate d(self)/d(t) into `.grad` of every tensor t of the graph that requires grad.

        As in the course: a silent no-op on a tensor that does not require grad, and the graph is
        released afterwards unless `retain_graph`.
        """
        if not self.requires_grad:
            return
        if gradient is None:
            if self.size != 1:
                raise ValueError(
                    f"backward(gradient=None) needs a scalar tensor; this one has shape {self.shape}"
                )
            grad = np.ones(self.shape, dtype=np.float32)
        else:
            grad = _to_float32(gradient, "gradient")  # a copy: the caller's array stays theirs
            if grad.shape != self.shape:
                raise ValueError(
                    f"backward(gradient=...): expected shape {self.shape}, got {grad.shape}"
                )
        backward_pass(self, grad, retain_graph=retain_graph)

    def zero_grad(self) -> None:
        self.grad = None

    # ---- operators ------------------------------------------------------------------------
    def __add__(self, other: ArrayLike) -> Tensor:
        return ops.Add.apply(self, other)

    def __radd__(self, other: ArrayLike) -> Tensor:
        return ops.Add.apply(other, self)

    def __sub__(self, other: ArrayLike) -> Tensor:
        return ops.Sub.apply(self, other)

    def __rsub__(self, other: ArrayLike) -> Tensor:
        return ops.Sub.apply(other, self)

    def __mul__(self, other: ArrayLike) -> Tensor:
        return ops.Mul.apply(self, other)

    def __rmul__(self, other: ArrayLike) -> Tensor:
        return ops.Mul.apply(other, self)

    def __truediv__(self, other: ArrayLike) -> Tensor:
        return ops.Div.apply(self, other)

    def __rtruediv__(self, other: ArrayLike) -> Tensor:
        return ops.Div.apply(other, self)

    def __matmul__(self, other: ArrayLike) -> Tensor:
        return self.matmul(other)

    def __rmatmul__(self, other: ArrayLike) -> Tensor:
        return Tensor(other).matmul(self)

    def __neg__(self) -> Tensor:
        return ops.Neg.apply(self)

    def __pow__(self, exponent: float) -> Tensor:
        if isinstance(exponent, Tensor) or not np.isscalar(exponent):
            raise TypeError("Tensor ** exponent: the exponent must be a Python number")
        return ops.Pow.apply(self, exponent=float(exponent))

    def matmul(self, other: ArrayLike) -> Tensor:
        other = other if isinstance(other, Tensor) else Tensor(other)
        if self.ndim == 0 or other.ndim == 0:
            raise ValueError("matmul: both operands need at least one dimension")
        if self.shape[-1] != other.shape[0 if other.ndim == 1 else -2]:
            raise ValueError(f"matmul: inner dimensions differ: {self.shape} @ {other.shape}")
        return ops.MatMul.apply(self, other)

    def sum(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:
        return ops.Sum.apply(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:
        if axis is None:
            count = self.size
        else:
            axes = (axis,) if isinstance(axis, int) else axis
            count = int(np.prod([self.shape[ax] for ax in axes]))
        return self.sum(axis=axis, keepdims=keepdims) / float(max(count, 1))

    def reshape(self, *shape: int | tuple[int, ...]) -> Tensor:
        target = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        try:
            np.empty(self.shape, dtype=np.bool_).reshape(target)
        except ValueError:
            raise ValueError(f"reshape: cannot reshape {self.shape} into {tuple(target)}") from None
        return ops.Reshape.apply(self, shape=tuple(target))

    def transpose(self, dim0: int | None = None, dim1: int | None = None) -> Tensor:
        """Swap axes dim0 and dim1; with no arguments, the last two (the course's transpose)."""
        if (dim0 is None) != (dim1 is None):
            raise ValueError(
                f"transpose(dim0={dim0}, dim1={dim1}): give both axes to swap, or neither "
                "(which swaps the last two)"
            )
        if self.ndim < 2 and dim0 is None:
            return ops.Transpose.apply(self, axes=None)  # 0-D or 1-D: nothing to swap
        if dim0 is None:
            dim0, dim1 = -2, -1
        axes = list(range(self.ndim))
        try:
            axes[dim0], axes[dim1] = axes[dim1], axes[dim0]
        except (IndexError, TypeError):
            raise ValueError(
                f"transpose(dim0={dim0}, dim1={dim1}): axes out of range for a {self.ndim}-D tensor"
            ) from None
        return ops.Transpose.apply(self, axes=tuple(axes))

    def permute(self, *axes: int | tuple[int, ...]) -> Tensor:
        """Reorder all axes, as np.transpose(a, axes) (not in the course; ours)."""
        perm = tuple(axes[0]) if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        if sorted(int(a) % max(self.ndim, 1) for a in perm) != list(range(self.ndim)):
            raise ValueError(f"permute{perm}: expected a permutation of {self.ndim} axes")
        return ops.Transpose.apply(self, axes=tuple(int(a) for a in perm))

    def view(self, *shape: int | tuple[int, ...]) -> Tensor:
        """The same as reshape (every Tensor here owns contiguous data)."""
        return self.reshape(*shape)

    def contiguous(self) -> Tensor:
        """A new tensor holding a C-contiguous copy of the data, as in the course (never `self`,
        never shared). Ours beyond the course: the gradient passes through it unchanged."""
        return ops.Contiguous.apply(self)

    def numel(self) -> int:
        return self.size

    def max(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:
        """The largest element (over `axis`); the gradient goes to the maxima, split between ties."""
        return ops.Max.apply(self, axis=axis, keepdims=keepdims)

    def __getitem__(self, key: Any) -> Tensor:
        """t[key] with NumPy's indexing; differentiable (the gradient scatter-adds back)."""
        return ops.GetItem.apply(self, key=key)

    def exp(self) -> Tensor:
        return ops.Exp.apply(self)

    def tanh(self) -> Tensor:
        return ops.Tanh.apply(self)

    def relu(self) -> Tensor:
        return ops.ReLU.apply(self)


use_tensor_class(Tensor)  # Function.apply builds Tensors of this class
