"""The sandbox's wire format: round trips, and a reader that never does more than raise
ProtocolError/EOFError on hostile bytes (hypothesis fuzz: random bytes, truncations, huge headers)."""

from __future__ import annotations

import io
import json
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinytorch.milestone07 import wire
from tinytorch.milestone07.sandbox import _call_validator, _load_validator

BIG = wire.Limits(header=1 << 20, payload=1 << 24)


def _reader(data: bytes):
    stream = io.BytesIO(data)

    def read_exact(n: int) -> bytes:
        got = stream.read(n)
        if len(got) < n:
            raise EOFError
        return got

    return read_exact


def _frame(header: dict, payload: bytes = b"") -> bytes:
    head = json.dumps(header).encode()
    return wire.PREFIX.pack(wire.MAGIC, len(head), len(payload)) + head + payload


def test_round_trip_keeps_arrays_tuples_and_json() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    msg = {"fn": "im2col", "args": [a, 3, (1, 2, 5, 6), None], "kwargs": {"stride": 2}}
    got_id, got = wire.read_frame(_reader(wire.encode(7, msg)), BIG)
    assert got_id == 7
    assert got["args"][2] == (1, 2, 5, 6) and isinstance(got["args"][2], tuple)
    np.testing.assert_array_equal(got["args"][0], a)
    assert got["args"][0].dtype == np.float32 and got["args"][0].flags.writeable
    assert got["kwargs"] == {"stride": 2} and got["args"][3] is None


def test_object_arrays_and_objects_cannot_be_sent() -> None:
    with pytest.raises(wire.ProtocolError, match="dtype object"):
        wire.encode(1, {"output": np.array([object()], dtype=object)})
    with pytest.raises(wire.ProtocolError, match="cannot be sent"):
        wire.encode(1, {"x": {1, 2}})


def test_a_pickle_is_a_protocol_error_not_a_payload() -> None:
    class Boom:
        def __reduce__(self):
            return (pytest.fail, ("unpickled!",))

    with pytest.raises(wire.ProtocolError, match="prefix"):
        wire.read_frame(_reader(pickle.dumps(Boom()) + b"\0" * 64), BIG)


def test_caps_are_checked_before_reading() -> None:
    class NoRead:  # a reader that fails the test if the payload is read
        def __init__(self, data: bytes) -> None:
            self.data, self.pos = data, 0

        def __call__(self, n: int) -> bytes:
            assert self.pos < len(self.data), "read past the header"
            out = self.data[self.pos : self.pos + n]
            self.pos += n
            return out

    huge = wire.PREFIX.pack(wire.MAGIC, 10, 3 << 30)
    with pytest.raises(wire.ProtocolError, match="payload of 3221225472 bytes"):
        wire.read_frame(NoRead(huge), BIG)
    with pytest.raises(wire.ProtocolError, match="header of"):
        wire.read_frame(NoRead(wire.PREFIX.pack(wire.MAGIC, 1 << 30, 0)), BIG)
    sent = [np.zeros((2, 2), np.float32)]
    frame = _frame(
        {"id": 1, "msg": {"status": "ok", "output": {"$a": 0}}, "arrays": [["<f4", [1000, 1000]]]},
        b"\0" * 4_000_000,
    )
    with pytest.raises(wire.ProtocolError, match="over 100 elements"):
        wire.read_frame(NoRead(frame), BIG, _call_validator(sent, 100))


@pytest.mark.parametrize(
    ("msg", "arrays", "match"),
    [
        ({"status": "ok", "evil": 1}, [], "unexpected keys"),
        ({"status": "pwned"}, [], "unexpected keys or status"),
        ({"status": "ok", "error": 5}, [], "'error'"),
        ({"status": "ok", "seconds": "1"}, [], "'seconds'"),
        ({"status": "ok", "records": [["matmul", [[1, "2"], [2, 2]]]]}, [], "audit record"),
        ({"status": "ok", "inputs": [{"$a": 0}]}, [["<f8", [2, 2]]], "another dtype"),
        ({"status": "ok", "inputs": []}, [], "one entry per argument"),
        ({"status": "ok", "output": 3}, [], "expected an array"),
    ],
)
def test_call_replies_are_checked_against_the_schema(msg: dict, arrays: list, match: str) -> None:
    nbytes = sum(int(np.prod(s)) * np.dtype(d).itemsize for d, s in arrays)
    frame = _frame({"id": 1, "msg": msg, "arrays": arrays}, b"\0" * nbytes)
    with pytest.raises(wire.ProtocolError, match=match):
        wire.read_frame(_reader(frame), BIG, _call_validator([np.zeros((2, 2), np.float32)], 64))


def test_load_info_may_not_carry_arrays_or_odd_statuses() -> None:
    for msg in ({"status": "ok", "functions": {"a": 1}}, {"status": "hacked"}):
        with pytest.raises(wire.ProtocolError):
            wire.read_frame(
                _reader(_frame({"id": 0, "msg": msg, "arrays": []})), BIG, _load_validator
            )


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_only_raise_protocol_or_eof(data: bytes) -> None:
    try:
        wire.read_frame(_reader(data), BIG, _call_validator([np.zeros(3, np.float32)], 64))
    except (wire.ProtocolError, EOFError):
        pass


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 200), st.binary(max_size=40))
def test_truncated_or_corrupted_frames_only_raise_protocol_or_eof(cut: int, junk: bytes) -> None:
    good = wire.encode(3, {"status": "ok", "output": np.ones((2, 3), np.float32), "seconds": 0.1})
    for data in (good[:cut], good[:cut] + junk + good[cut:]):
        try:
            wire.read_frame(_reader(data), BIG, _call_validator([np.zeros(6, np.float32)], 64))
        except (wire.ProtocolError, EOFError):
            pass


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.none() | st.integers() | st.text(max_size=5),
        lambda c: st.lists(c) | st.dictionaries(st.text(max_size=3), c),
        max_leaves=30,
    )
)
def test_odd_headers_only_raise_protocol_error(body: object) -> None:
    for header in (
        {"id": 1, "msg": body, "arrays": body},
        {"id": body, "msg": {"status": body}, "arrays": []},
    ):
        try:
            wire.read_frame(_reader(_frame(header)), BIG, _call_validator([None], 64))
        except wire.ProtocolError:
            pass


def test_deeply_nested_header_is_a_protocol_error() -> None:
    head = b'{"id":1,"msg":{"a":' + b"[" * 100000 + b"]" * 100000 + b'},"arrays":[]}'
    data = wire.PREFIX.pack(wire.MAGIC, len(head), 0) + head
    with pytest.raises(wire.ProtocolError):
        wire.read_frame(_reader(data), wire.Limits(header=1 << 21), None)


def test_fd_reader_times_out_and_sees_the_end() -> None:
    import os
    import time

    r, w = os.pipe()
    reader = wire.FdReader(r)
    reader.deadline = time.monotonic() + 0.2
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        reader.read_exact(4)
    assert 0.15 < time.monotonic() - start < 2.0
    os.write(w, b"ab")
    os.close(w)
    reader.deadline = time.monotonic() + 5
    with pytest.raises(EOFError):
        reader.read_exact(4)  # two bytes, then the writer is gone
    os.close(r)


def test_a_frame_split_across_many_writes_is_read_whole() -> None:
    import os
    import threading
    import time

    frame = wire.encode(5, {"status": "ok", "output": np.arange(100_000, dtype=np.float32)})
    r, w = os.pipe()

    def trickle() -> None:
        for i in range(0, len(frame), 7919):
            os.write(w, frame[i : i + 7919])
        os.close(w)

    threading.Thread(target=trickle).start()
    reader = wire.FdReader(r)
    reader.deadline = time.monotonic() + 30
    got_id, msg = wire.read_frame(reader.read_exact, BIG)
    os.close(r)
    assert got_id == 5 and msg["output"][-1] == 99_999
