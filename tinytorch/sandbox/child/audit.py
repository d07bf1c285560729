"""Tiling audit: record the operand shapes of every matrix product the student's code performs.

`AuditArray` is an ndarray subclass handed to the student as `Tensor.data` on every call, audited
or not, with `patched_numpy()` active on every call too, so a kernel cannot tell when it is
watched; only an audited call's records are kept and judged. `@` and np.matmul are
ufuncs, so `__array_ufunc__` sees them; dot, einsum, tensordot and inner go through
`__array_function__`; slicing goes through `__getitem__`, so the blocks a loop-based kernel reads
are seen too: each slice that is exactly a block of an operand (rows r0:r1, columns c0:c1 of A or
B, found from its address and strides) is recorded with those index ranges, so the grader can
tell whether tile-sized slices covered all of A and B, not merely that one small slice was taken. Student code may drop the subclass (np.asarray, np.array), so `patched_numpy()` also keeps the subclass through those and records products of plain
arrays made by np.matmul/np.dot/np.einsum/... `a @ b` on plain arrays, and products through torch
or the bundled SIMD kernels, stay invisible: the audit then reports "not observed", a failure.

Tamper resistance (an honest-mistake detector in the student's process, not proof): `Guard`
binds this module's functions, classes and record lists before the student's module is imported,
and `Guard.check()` names whatever was replaced, cleared or faked since.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

RECORDS: list[tuple[str, tuple[tuple[int, ...], ...]]] = []  # (op, operand shapes)
SLICES: dict[tuple[int, ...], int] = {}  # shape of a slice taken of an audited array -> count
BOXES: dict[tuple[int, int, int, int, int], int] = {}  # (operand, r0, r1, c0, c1) of a block slice
OPERANDS: list[tuple[int, int, int, int] | None] = []  # (address, rows, cols, itemsize) per arg
MAX_RECORDS = 20000  # kept per call; beyond, only counted
_LOG: list[tuple[str, tuple[tuple[int, ...], ...]]] = []  # a private mirror of RECORDS
_SLICE_LOG: dict[tuple[int, ...], int] = {}  # ... of SLICES
_BOX_LOG: dict[tuple[int, int, int, int, int], int] = {}  # ... of BOXES
_STATE = {"dropped": 0}

_MATMUL = np.matmul
_PRODUCTS = ("matmul", "dot", "einsum", "tensordot", "inner", "vdot")
_KEEPERS = ("asarray", "array", "ascontiguousarray", "asfortranarray", "asanyarray", "copy")
_ORIGINAL = {name: getattr(np, name) for name in _PRODUCTS + _KEEPERS + ("array_equal",)}


def _shapes(args: Any) -> tuple[tuple[int, ...], ...]:
    """Each array operand's shape, an axis of stride 0 (a broadcast: one value repeated, no data)
    counted as 1: np.broadcast_to(zeros((1, 1, 1)), (M*K*N, 1, 1)) is not M*K*N block products."""
    return tuple(
        tuple(int(d) if d <= 1 or st else 1 for d, st in zip(a.shape, a.strides, strict=True))
        for a in args
        if isinstance(a, np.ndarray)
    )


def record(op: str, args: Any) -> None:
    shapes = _shapes(args)
    if len(shapes) >= 2:
        if len(_LOG) >= MAX_RECORDS:
            _STATE["dropped"] += 1
            return
        RECORDS.append((op, shapes))
        _LOG.append((op, shapes))


def reset(operands: Any = ()) -> None:
    """Forget every record (before each audited call); `operands`: the audited arrays, in
    argument order (None for a non-array), whose block slices are recorded with their ranges."""
    RECORDS.clear()
    _LOG.clear()
    SLICES.clear()
    BOXES.clear()
    _SLICE_LOG.clear()
    _BOX_LOG.clear()
    OPERANDS.clear()
    for a in operands:
        whole = isinstance(a, np.ndarray) and a.ndim == 2 and a.flags.c_contiguous and a.size
        OPERANDS.append((a.__array_interface__["data"][0], *a.shape, a.itemsize) if whole else None)
    _STATE["dropped"] = 0


def _box(view: np.ndarray) -> tuple[int, int, int, int, int] | None:
    """(operand, r0, r1, c0, c1) when `view` is exactly the block rows r0:r1, cols c0:c1 of an
    audited operand (any dims of length 1 added or dropped, possibly transposed), else None."""
    if not view.size:
        return None
    address = view.__array_interface__["data"][0]
    for i, op in enumerate(OPERANDS):
        if op is None:
            continue
        base, rows, cols, itemsize = op
        offset = address - base
        if view.itemsize != itemsize or not 0 <= offset < rows * cols * itemsize:
            continue
        if offset % itemsize:
            return None
        r0, c0 = divmod(offset // itemsize, cols)
        height = width = 1
        for n, stride in zip(view.shape, view.strides, strict=True):
            if n == 1:
                continue
            if stride == cols * itemsize and height == 1:
                height = n
            elif stride == itemsize and width == 1:
                width = n
            else:  # a step, a reversal or a repeated axis: not one dense block
                return None
        if r0 + height > rows or c0 + width > cols:
            return None
        return i, r0, r0 + height, c0, c0 + width
    return None


def _plain(x: Any) -> Any:
    return x.view(np.ndarray) if isinstance(x, AuditArray) else x


class AuditArray(np.ndarray):
    """An ndarray that records the operands of matrix products it takes part in, and its slices."""

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if ufunc is _MATMUL and method == "__call__":  # np.matmul may be patched meanwhile
            record("matmul", inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(_plain(o) for o in kwargs["out"])
        result = getattr(ufunc, method)(*(_plain(i) for i in inputs), **kwargs)
        if isinstance(result, np.ndarray) and "out" not in kwargs:
            return result.view(AuditArray)
        return result

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        name = getattr(func, "__name__", "")
        if name in _PRODUCTS:
            record(name, [a for a in args if isinstance(a, np.ndarray)])
        return super().__array_function__(func, types, args, kwargs)

    def __getitem__(self, key: Any) -> Any:
        out = np.ndarray.__getitem__(self, key)
        if isinstance(out, np.ndarray) and out.ndim >= 1 and len(SLICES) < MAX_RECORDS:
            shape = tuple(out.shape)
            SLICES[shape] = SLICES.get(shape, 0) + 1
            _SLICE_LOG[shape] = _SLICE_LOG.get(shape, 0) + 1
        if isinstance(out, np.ndarray) and OPERANDS and len(BOXES) < MAX_RECORDS:
            box = _box(out)
            if box is not None:
                BOXES[box] = BOXES.get(box, 0) + 1
                _BOX_LOG[box] = _BOX_LOG.get(box, 0) + 1
        return out


def block_dims(op: str, shapes: Any) -> tuple[int, int, int]:
    """(m, k, n) of one recorded product; for einsum/tensordot, the largest dimension of any operand."""
    a, b = shapes[0], shapes[1]
    if op in ("matmul", "dot", "inner") and len(a) <= 2 and len(b) <= 2:
        m = a[0] if len(a) == 2 else 1
        k = a[-1] if a else 1
        n = (b[-1] if op != "inner" else b[0]) if len(b) == 2 else 1
        return m, k, n
    if op == "matmul" and len(a) >= 2 and len(b) >= 2:  # batched: core dims are the last two
        return a[-2], a[-1], b[-1]
    biggest = max((d for s in shapes for d in s), default=0)
    return biggest, biggest, biggest


def block_work(op: str, shapes: Any) -> int:
    """Multiply-adds one recorded product stands for: m*k*n of its block, times its batch."""
    m, k, n = block_dims(op, shapes)
    batch = 1
    if op == "matmul" and len(shapes[0]) >= 2 and len(shapes[1]) >= 2:
        a, b = shapes[0][:-2], shapes[1][:-2]  # broadcast batch dims
        width = max(len(a), len(b))
        a, b = (1,) * (width - len(a)) + tuple(a), (1,) * (width - len(b)) + tuple(b)
        for x, y in zip(a, b, strict=True):
            batch *= max(x, y)
    return m * k * n * batch


def _source_is_audited(obj: Any) -> bool:
    if isinstance(obj, AuditArray):
        return True
    data = getattr(obj, "data", None)
    return isinstance(data, AuditArray)


@contextlib.contextmanager
def patched_numpy() -> Iterator[None]:
    """While active: np.asarray & co. keep AuditArray, and product functions record plain operands."""
    saved = {name: _ORIGINAL[name] for name in _PRODUCTS + _KEEPERS}

    def keeper(original: Any) -> Any:
        def keep(obj: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(obj, *args, **kwargs)
            plain = isinstance(out, np.ndarray) and not isinstance(out, AuditArray)
            return out.view(AuditArray) if plain and _source_is_audited(obj) else out

        return keep

    def recorder(original: Any, name: str) -> Any:
        def product(*args: Any, **kwargs: Any) -> Any:
            if not any(isinstance(a, AuditArray) for a in args):  # AuditArray records itself
                record(name, [a for a in args if isinstance(a, np.ndarray)])
            return original(*args, **kwargs)

        return product

    try:
        for name in _KEEPERS:
            setattr(np, name, keeper(saved[name]))
        for name in _PRODUCTS:
            setattr(np, name, recorder(saved[name], name))
        yield
    finally:
        for name, fn in saved.items():
            setattr(np, name, fn)


class Guard:
    """What the audit is made of, bound before the student's module runs; `check()` compares."""

    def __init__(self) -> None:
        import sys

        self.module = sys.modules[__name__]
        self.names = {
            n: getattr(self.module, n)
            for n in (
                "RECORDS",
                "SLICES",
                "BOXES",
                "OPERANDS",
                "record",
                "reset",
                "AuditArray",
                "patched_numpy",
                "_box",
            )
        }
        self.names["_LOG"] = _LOG
        self.names["_SLICE_LOG"] = _SLICE_LOG
        self.names["_BOX_LOG"] = _BOX_LOG
        self.names["_MATMUL"] = _MATMUL
        self.methods = {
            m: AuditArray.__dict__[m]
            for m in ("__array_ufunc__", "__array_function__", "__getitem__")
        }
        self.numpy = dict(_ORIGINAL)

    def check(self, *, numpy_restored: bool = True) -> str:
        """'' when intact, else what was tampered with."""
        for name, obj in self.names.items():
            if getattr(self.module, name, None) is not obj:
                return f"audit.{name} was replaced"
        for name, fn in self.methods.items():
            if AuditArray.__dict__.get(name) is not fn:
                return f"AuditArray.{name} was replaced"
        if AuditArray.__mro__ != (AuditArray, np.ndarray, object):
            return "AuditArray's bases were changed"
        if numpy_restored:
            for name, fn in self.numpy.items():
                if getattr(np, name, None) is not fn:
                    return f"numpy.{name} was replaced"
        if RECORDS != _LOG:
            return "the audit's record list was changed"
        if SLICES != _SLICE_LOG or BOXES != _BOX_LOG:
            return "the audit's slice records were changed"
        return ""

    def records(self) -> tuple[list[Any], list[list[int]], list[list[int]], int]:
        """(records, slice shapes, block slices [operand, r0, r1, c0, c1], how many records
        were dropped over the cap), JSON-able."""
        recs = [[op, [list(s) for s in shapes]] for op, shapes in _LOG]
        boxes = [list(b) for b in _BOX_LOG]
        return recs, [list(s) for s in _SLICE_LOG], boxes, _STATE["dropped"]
