"""Tiling audit: record the operand shapes of every matrix product the student's code performs.

`AuditArray` is an ndarray subclass handed to the student as `Tensor.data`. `@` and np.matmul are
ufuncs, so `__array_ufunc__` sees them; dot, einsum, tensordot and inner go through
`__array_function__`; slicing goes through `__getitem__`, so the blocks a loop-based kernel reads
are seen too. Student code may drop the subclass (np.asarray, np.array), so while a call is
audited `patched_numpy()` also keeps the subclass through those and records products of plain
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
MAX_RECORDS = 20000  # kept per call; beyond, only counted
_LOG: list[tuple[str, tuple[tuple[int, ...], ...]]] = []  # a private mirror of RECORDS
_STATE = {"dropped": 0}

_MATMUL = np.matmul
_PRODUCTS = ("matmul", "dot", "einsum", "tensordot", "inner", "vdot")
_KEEPERS = ("asarray", "array", "ascontiguousarray", "asfortranarray", "asanyarray", "copy")
_ORIGINAL = {name: getattr(np, name) for name in _PRODUCTS + _KEEPERS + ("array_equal",)}


def _shapes(args: Any) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(d) for d in a.shape) for a in args if isinstance(a, np.ndarray))


def record(op: str, args: Any) -> None:
    shapes = _shapes(args)
    if len(shapes) >= 2:
        if len(_LOG) >= MAX_RECORDS:
            _STATE["dropped"] += 1
            return
        RECORDS.append((op, shapes))
        _LOG.append((op, shapes))


def reset() -> None:
    """Forget every record (before each audited call)."""
    RECORDS.clear()
    _LOG.clear()
    SLICES.clear()
    _STATE["dropped"] = 0


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
            for n in ("RECORDS", "SLICES", "record", "reset", "AuditArray", "patched_numpy")
        }
        self.names["_LOG"] = _LOG
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
        return ""

    def records(self) -> tuple[list[Any], list[list[int]], int]:
        """(records, slice shapes, how many records were dropped over the cap), JSON-able."""
        recs = [[op, [list(s) for s in shapes]] for op, shapes in _LOG]
        return recs, [list(s) for s in SLICES], _STATE["dropped"]
