"""The data-only wire protocol between the grader and a sandbox child: JSON headers + raw arrays.

Nothing read from the child is unpickled. A frame is

    prefix  : b"TTW1", header length (uint32), payload length (uint64)        16 bytes
    header  : UTF-8 JSON {"id": int, "msg": {...}, "arrays": [[dtype, shape], ...]}
    payload : the arrays' bytes, C order, one after the other

Inside "msg", {"$a": i} stands for the i-th array and {"$t": [...]} for a tuple. The reader checks
the prefix against its caps, then the header against the caller's schema (keys, types, sizes,
and the dtype/shape of every declared array), all BEFORE it reads the payload; anything off
raises `ProtocolError`. Only numeric and bool dtypes exist on the wire (never "object").
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

MAGIC = b"TTW1"
PREFIX = struct.Struct("<4sIQ")  # magic, header bytes, payload bytes
DTYPES = frozenset(
    {"<f2", "<f4", "<f8", "|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8"}
)
MAX_NDIM = 8


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed frame of the expected kind."""


@dataclass(frozen=True)
class Limits:
    """Caps for one frame: header bytes, payload bytes (both checked before they are read)."""

    header: int = 1 << 20
    payload: int = 0


# ---- encoding (both sides) --------------------------------------------------------------------
def _pack(obj: Any, arrays: list[np.ndarray]) -> Any:
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj.view(np.ndarray) if type(obj) is not np.ndarray else obj)
        if arr.dtype.str not in DTYPES:
            raise ProtocolError(f"dtype {arr.dtype} cannot be sent")
        arrays.append(arr)
        return {"$a": len(arrays) - 1}
    if isinstance(obj, tuple):
        return {"$t": [_pack(v, arrays) for v in obj]}
    if isinstance(obj, list):
        return [_pack(v, arrays) for v in obj]
    if isinstance(obj, dict):
        return {str(k): _pack(v, arrays) for k, v in obj.items()}
    if isinstance(obj, (np.integer, np.bool_)):
        return obj.item()
    if isinstance(obj, np.floating):
        return float(obj)
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise ProtocolError(f"a {type(obj).__name__} cannot be sent")


def encode(msg_id: int, msg: dict[str, Any]) -> bytes:
    """One frame holding `msg` (JSON data, tuples and ndarrays of numeric dtypes)."""
    arrays: list[np.ndarray] = []
    body = _pack(msg, arrays)
    header = {"id": msg_id, "msg": body, "arrays": [[a.dtype.str, list(a.shape)] for a in arrays]}
    head = json.dumps(header, separators=(",", ":")).encode()
    payload = b"".join(a.tobytes() for a in arrays)
    return PREFIX.pack(MAGIC, len(head), len(payload)) + head + payload


def write_frame(fd: int, msg_id: int, msg: dict[str, Any]) -> None:
    data = memoryview(encode(msg_id, msg))
    while data:
        data = data[os.write(fd, data) :]


# ---- decoding ---------------------------------------------------------------------------------
def _unpack(obj: Any, arrays: list[np.ndarray]) -> Any:
    if isinstance(obj, dict):
        if obj.keys() == {"$a"}:
            return arrays[obj["$a"]]
        if obj.keys() == {"$t"}:
            return tuple(_unpack(v, arrays) for v in obj["$t"])
        return {k: _unpack(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unpack(v, arrays) for v in obj]
    return obj


def _declared(raw: Any) -> list[tuple[np.dtype, tuple[int, ...], int]]:
    """[(dtype, shape, nbytes)] from the header's "arrays", or ProtocolError."""
    if not isinstance(raw, list):
        raise ProtocolError("header 'arrays' is not a list")
    out = []
    for item in raw:
        if not (isinstance(item, list) and len(item) == 2 and item[0] in DTYPES):
            raise ProtocolError(f"bad array declaration {str(item)[:80]}")
        shape = item[1]
        if not (
            isinstance(shape, list)
            and len(shape) <= MAX_NDIM
            and all(type(d) is int and 0 <= d < 1 << 40 for d in shape)
        ):
            raise ProtocolError(f"bad array shape {str(shape)[:80]}")
        dtype = np.dtype(item[0])
        out.append((dtype, tuple(shape), math.prod(shape) * dtype.itemsize))
    return out


def _check_refs(obj: Any, n: int, used: set[int]) -> None:
    """Every {"$a": i} names a declared array, once; {"$t": ...} holds a list."""
    if isinstance(obj, dict):
        if "$a" in obj or "$t" in obj:
            if obj.keys() == {"$a"}:
                i = obj["$a"]
                if type(i) is not int or not 0 <= i < n or i in used:
                    raise ProtocolError(f"bad array reference {str(obj)[:80]}")
                used.add(i)
                return
            if obj.keys() == {"$t"} and isinstance(obj["$t"], list):
                for v in obj["$t"]:
                    _check_refs(v, n, used)
                return
            raise ProtocolError("reserved key in a message")
        for v in obj.values():
            _check_refs(v, n, used)
    elif isinstance(obj, list):
        for v in obj:
            _check_refs(v, n, used)


def _printable(obj: Any) -> Any:
    """obj with every lone surrogate in its strings (a JSON \\ud800 escape) replaced by U+FFFD:
    such a string cannot be printed or written as UTF-8, and one in an error message once made
    the whole run ERROR when the report was printed."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError:
            return obj.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        return obj
    if isinstance(obj, list):
        return [_printable(v) for v in obj]
    if isinstance(obj, dict):
        return {_printable(k): _printable(v) for k, v in obj.items()}
    return obj


Validator = Callable[[dict[str, Any], list[tuple[np.dtype, tuple[int, ...], int]]], None]


def read_frame(
    read_exact: Callable[[int], bytes], limits: Limits, validate: Validator | None = None
) -> tuple[int, dict[str, Any]]:
    """(id, msg) of the next frame. `validate(msg_with_refs, declared)` may raise ProtocolError
    after the header is parsed and before any payload byte is read. Raises EOFError at the end,
    ProtocolError for anything malformed or over `limits`."""
    magic, head_len, payload_len = PREFIX.unpack(read_exact(PREFIX.size))
    if magic != MAGIC:
        raise ProtocolError(f"bad frame prefix {magic!r}")
    if head_len > limits.header:
        raise ProtocolError(f"header of {head_len} bytes, more than {limits.header}")
    if payload_len > limits.payload:
        raise ProtocolError(f"payload of {payload_len} bytes, more than {limits.payload}")
    try:
        header = _printable(json.loads(read_exact(head_len).decode()))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"header is not JSON: {type(exc).__name__}") from None
    if not (isinstance(header, dict) and header.keys() == {"id", "msg", "arrays"}):
        raise ProtocolError("header keys are not id, msg, arrays")
    msg_id, msg = header["id"], header["msg"]
    if type(msg_id) is not int or not isinstance(msg, dict):
        raise ProtocolError("header id or msg has the wrong type")
    declared = _declared(header["arrays"])
    if sum(d[2] for d in declared) != payload_len:
        raise ProtocolError("declared arrays do not add up to the payload length")
    used: set[int] = set()
    try:
        _check_refs(msg, len(declared), used)
    except RecursionError:
        raise ProtocolError("message nested too deeply") from None
    if len(used) != len(declared):
        raise ProtocolError("an array is declared but not referenced")
    if validate is not None:
        validate(msg, declared)
    arrays = []
    for dtype, shape, nbytes in declared:
        arr = np.frombuffer(read_exact(nbytes), dtype=dtype).reshape(shape)
        arrays.append(arr.copy())  # writable, owns its memory
    return msg_id, _unpack(msg, arrays)


class FdReader:
    """Exact reads from a pipe with a deadline (time.monotonic()); EOFError / TimeoutError."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.deadline = math.inf

    def read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.fd], [], [], None if math.isinf(left) else left)
            if not ready:
                raise TimeoutError
            chunk = os.read(self.fd, min(n - len(buf), 1 << 20))
            if not chunk:
                raise EOFError
            buf += chunk
        return bytes(buf)


def blocking_reader(fd: int) -> Callable[[int], bytes]:
    """read_exact for the child side: blocks; EOFError when the parent has gone."""

    def read_exact(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = os.read(fd, min(n - len(buf), 1 << 20))
            if not chunk:
                raise EOFError
            buf += chunk
        return bytes(buf)

    return read_exact
