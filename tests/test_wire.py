"""The sandbox's wire format: round trips, and a reader that never does more than raise
ProtocolError/EOFError on hostile bytes (hypothesis fuzz: random bytes, truncations, huge headers),
and forged but well-formed replies (the real key names, any types) that end as a named protocol
failure or a graded result, never a grader exception."""

from __future__ import annotations

import io
import json
import os
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinytorch.milestone07.calls import StudentCalls
from tinytorch.milestone07.cases import CASES_BY_NAME
from tinytorch.milestone07.checks import tiling_audit
from tinytorch.milestone07.part_a import _graded_run, grade_case
from tinytorch.milestone07.references import make_call
from tinytorch.milestone07.results import CASE_STATUSES, CHECK_STATUSES, VERDICTS
from tinytorch.sandbox.child import protocol as wire
from tinytorch.sandbox.parent import (
    CALL_REPLIES,
    Budget,
    Sandbox,
    _call_validator,
    _load_validator,
    expected_reply,
)

BIG = wire.Limits(header=1 << 20, payload=1 << 24)
RAISED = {"status": "raised", "error": "e"}


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
        ({"status": "pwned"}, [], "status 'pwned'"),
        ({"status": ["ok"]}, [], "with status"),
        ({"status": "timeout", "error": "x"}, [], "status 'timeout'"),  # the grader's own
        ({"status": "ok"}, [], "'ok' but no output"),
        ({"status": "raised"}, [], "'raised' but no error"),
        ({"status": "not_tensor"}, [], "'not_tensor' but no type"),
        ({"status": "raised", "error": 5}, [], "'error'"),
        ({"status": "raised", "error": "e", "seconds": "1"}, [], "'seconds'"),
        ({**RAISED, "records": [["matmul", [[1, "2"], [2, 2]]]]}, [], "audit record"),
        ({**RAISED, "boxes": [[0, 1, 2, 3]]}, [], "block slice"),
        ({**RAISED, "inputs": [{"$a": 0}]}, [["<f8", [2, 2]]], "another dtype"),
        ({**RAISED, "inputs": []}, [], "one entry per argument"),
        ({"status": "ok", "output": 3}, [], "expected an array"),
    ],
)
def test_call_replies_are_checked_against_the_schema(msg: dict, arrays: list, match: str) -> None:
    nbytes = sum(int(np.prod(s)) * np.dtype(d).itemsize for d, s in arrays)
    frame = _frame({"id": 1, "msg": msg, "arrays": arrays}, b"\0" * nbytes)
    with pytest.raises(wire.ProtocolError, match=match):
        wire.read_frame(_reader(frame), BIG, _call_validator([np.zeros((2, 2), np.float32)], 64))


def test_load_info_may_not_carry_arrays_or_odd_statuses() -> None:
    odd = ({"status": "ok", "functions": {"a": 1}}, {"status": "hacked"}, {"status": "ok"},
           {"status": "crash", "error": "x"}, {"status": "ok", "functions": {}, "layers": {"u": 1}})  # fmt: skip
    for msg in odd:
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


# ---- forged but well-formed replies: the real key names, any types (issue 9 audit gap 2) -------
CALL_KEYS = ("error", "seconds", "records", "slices", "boxes", "records_dropped", "output",
             "inputs", "grads", "type", "phase", "stub", "tampered")  # fmt: skip
LOAD_KEYS = ("error", "functions", "origins", "imports_reference", "file", "layers", "stubs",
             "copies_reference")  # fmt: skip
_ANY = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 1 << 40) | st.floats() | st.text(max_size=4),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
    max_leaves=8,
)
_ARRAYS = st.builds(
    lambda shape, dtype: np.zeros(shape, dtype),
    st.lists(st.integers(0, 5), max_size=3).map(tuple),
    st.sampled_from([np.float32, np.float64, np.int8, np.bool_]),
)
_STATUS = st.sampled_from(
    ["ok", "raised", "not_implemented", "not_tensor", "timeout", "crash", "protocol",
     "unloadable", "tampered", "not_found", "import_error", "OK", ""]
) | _ANY  # fmt: skip
_VALUE = _ANY | _ARRAYS | st.lists(_ARRAYS | st.none(), max_size=3)


def _messages(keys: tuple[str, ...]) -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries({}, optional={"status": _STATUS, **dict.fromkeys(keys, _VALUE)})


def _through_a_pipe(msg: dict, rid: int, limits: wire.Limits, validate) -> dict:
    """`msg` as the child would send it, read by the Sandbox's own receiving end."""

    box = Sandbox(None)
    read_fd, write_fd = os.pipe()
    try:
        frame = wire.encode(rid, msg)
    except wire.ProtocolError:  # not even sendable: nothing to fuzz
        os.close(read_fd)
        os.close(write_fd)
        return {}
    os.write(write_fd, frame)
    os.close(write_fd)
    box._reader = wire.FdReader(read_fd)
    budget = Budget(None, 5.0)  # plain wall time: no child tree to meter
    return box._receive(rid, budget, limits, validate)  # closes the pipe on a failure


class _Pipe:
    """A Sandbox stand-in whose child answers every request with one forged message."""

    def __init__(self, msg: dict) -> None:
        self.msg = msg

    def request(self, req: dict, timeout: float) -> dict:

        _req, limits, validate = expected_reply(req)
        return _through_a_pipe(self.msg, 1, limits, validate) or {"status": "crash", "error": ""}


@settings(max_examples=150, deadline=None)
@given(_messages(CALL_KEYS))
def test_a_forged_call_reply_is_a_protocol_failure_or_a_graded_result(msg: dict) -> None:

    case = CASES_BY_NAME["fused_gelu/zeros"]
    _fn, args, kwargs = make_call(case, 0)
    calls = StudentCalls(_Pipe(msg), 1.0)
    got = grade_case(case, calls.call("fused_gelu", args, kwargs, label=case.name), args, kwargs)
    assert got.status in CASE_STATUSES and got.blame == (
        ["fused_gelu"] if got.status != "pass" else []
    )
    if not (isinstance(msg.get("status"), str) and msg["status"] in CALL_REPLIES):
        assert got.status == "protocol" and "malformed reply" in got.detail, got
    audit = tiling_audit(StudentCalls(_Pipe(msg), 1.0), 0)
    assert audit.status in CHECK_STATUSES


@settings(max_examples=150, deadline=None)
@given(_messages(LOAD_KEYS))
def test_forged_load_info_is_a_protocol_failure_or_usable(msg: dict) -> None:

    info = _through_a_pipe(msg, 0, wire.Limits(header=1 << 20), _load_validator)
    if not info or info.get("transport"):  # refused: Sandbox.start reports an import failure
        return
    dead = type("Dead", (), {"request": lambda self, req, t: {"status": "crash", "error": "x"}})
    for name, (active, why) in (info.pop("layers", None) or {}).items():  # as Sandbox.start
        assert isinstance(name, str) and isinstance(active, bool) and isinstance(why, str)
    done = _graded_run(dead(), info, (), "x.py", seed=0, timeout=1.0, checks=True)
    assert done.verdict in VERDICTS and done.verdict != "ERROR"
