"""Calls into the student's module through the sandbox, with the bookkeeping the checks need.

Keeps, across every call of a run: which inputs were mutated (judged here, in the grader, against
the arrays it sent: the child only returns their final contents), which outputs were not float32
or not finite, and which functions keep hanging, crashing or breaking the protocol (after two in
a row, their other calls are skipped, so a function that always hangs costs two timeouts, not
thirty). A reply whose audit was tampered with becomes status "tampered".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinytorch.milestone07.diagnose import failure_lesson
from tinytorch.milestone07.results import CheckResult
from tinytorch.sandbox.parent import Sandbox

ARG_NAMES = {
    "tiled_matmul": ("a", "b"),
    "fused_gelu": ("x",),
    "im2col": ("x",),
    "im2col_conv2d": ("x", "weight", "bias"),
    "Im2colConv2dFunction.apply": ("x", "weight", "bias"),
    "col2im": ("cols",),
}
MAX_STRIKES = 2  # timeouts/crashes in a row of one function before its other calls are skipped
OUT_SLACK = 4  # an output may have this many times the expected elements (a named wrong shape)


def expected_elements(fn: str, args: list[Any], kwargs: dict[str, Any]) -> int | None:
    """Elements of a right answer to fn(*args, **kwargs), or None when the call is malformed."""
    from tinytorch.milestone07.references import out_size

    try:
        if fn == "tiled_matmul":
            return int(args[0].shape[0] * args[1].shape[1])
        if fn == "fused_gelu":
            return int(args[0].size)
        s, p = int(kwargs.get("stride", 1)), int(kwargs.get("padding", 0))
        if fn == "im2col":
            (n, c, h, w), k = args[0].shape, int(args[1])
            return n * out_size(h, k, s, p) * out_size(w, k, s, p) * c * k * k
        if fn in ("im2col_conv2d", "Im2colConv2dFunction.apply"):
            (n, _c, h, w), (o, _ci, k, _k2) = args[0].shape, args[1].shape
            return n * o * out_size(h, k, s, p) * out_size(w, k, s, p)
        if fn == "col2im":
            return int(np.prod(args[1]))
    except (AttributeError, IndexError, TypeError, ValueError, ZeroDivisionError):
        return None
    return None


@dataclass
class Observations:
    mutated: dict[str, list[str]] = field(default_factory=dict)  # fn -> ["x in fused_gelu/zeros"]
    bad_dtype: dict[str, list[str]] = field(default_factory=dict)  # fn -> ["float64 in ..."]
    not_implemented: dict[str, str] = field(default_factory=dict)  # fn -> message
    strikes: dict[str, list[str]] = field(
        default_factory=dict
    )  # fn -> its latest failures in a row
    answered: int = 0  # calls that returned a Tensor (0: the mutation check saw nothing run)


class StudentCalls:
    """The student's five functions, called safely; every reply is a dict with a "status"."""

    def __init__(self, sandbox: Sandbox, timeout: float) -> None:
        self.sandbox = sandbox
        self.timeout = timeout
        self.seen = Observations()

    def call(
        self,
        fn: str,
        args: list[Any],
        kwargs: dict[str, Any],
        *,
        label: str,
        audit: bool = False,
        grad: np.ndarray | None = None,
    ) -> dict[str, Any]:
        strikes = self.seen.strikes.get(fn, [])
        if len(strikes) >= MAX_STRIKES:
            last = strikes[-1]
            return {
                "status": last,
                "error": f"not run: the last {len(strikes)} calls of {fn} ended in a {last}",
                "skipped": True,
            }
        # No audit flag goes to the child: it records every call alike, and only the parent
        # knows which calls are the audit's (a flag in the request was readable from a frame).
        req: dict[str, Any] = {"fn": fn, "args": args, "kwargs": kwargs}
        if grad is not None:
            req["grad"] = grad
        expected = expected_elements(fn, args, kwargs)
        if expected is not None:
            req["out_cap"] = OUT_SLACK * max(expected, 1) + 4096
        reply = self.sandbox.request(req, self.timeout)
        if not audit:  # what the child recorded is judged for the audit's calls only
            for key in ("records", "slices", "boxes", "records_dropped"):
                reply.pop(key, None)
        status = reply["status"]
        if status in ("timeout", "crash", "protocol"):
            self.seen.strikes.setdefault(fn, []).append(status)
            if reply.get("restart"):  # the import, rerun after the last call killed the child
                reply["error"] = f"{reply['error']} while restarting for {fn}"
            elif status == "timeout" and reply.get("limit") == "cpu":  # it computed, endlessly
                reply["error"] = (
                    f"no result within {self.timeout:g} s of CPU time (an endless loop?)"
                )
            elif status == "timeout":  # blocked, starved or wall: the sandbox's words say which
                reply["error"] = f"{reply['error']} (running {fn})"
            elif status == "crash":
                reply["error"] = f"{reply['error']} while running {fn}: a crash in native code?"
            else:
                reply["error"] = f"{reply['error']} while running {fn}: the child was killed"
        else:  # it finished this time: a shape-dependent hang must not cost the other cases
            self.seen.strikes.pop(fn, None)
        if status == "not_implemented":  # a stub in backward is that method, not the function
            method = (reply.get("phase") == "backward" or "." in fn) and reply.get("stub")
            self.seen.not_implemented.setdefault(method or fn, reply["error"])
        if reply.get("tampered"):
            reply.update(
                status="tampered",
                error=f"the grader's audit was tampered with: {reply['tampered']}",
            )
        for i in _mutated(args, reply.get("inputs")):
            name = ARG_NAMES.get(fn, ())[i] if i < len(ARG_NAMES.get(fn, ())) else f"arg {i}"
            self.seen.mutated.setdefault(fn, []).append(f"{name} in {label}")
        out = reply.get("output")
        self.seen.answered += status == "ok"
        if isinstance(out, np.ndarray):
            if out.dtype != np.float32:
                self.seen.bad_dtype.setdefault(fn, []).append(f"{out.dtype} in {label}")
            elif out.dtype.kind == "f" and not np.isfinite(out).all():
                self.seen.bad_dtype.setdefault(fn, []).append(f"NaN/inf in {label}")
        return reply


def _mutated(sent: list[Any], back: Any) -> list[int]:
    """Indices of array arguments whose final contents differ from what the grader sent."""
    if not isinstance(back, list):
        return []
    out = []
    for i, (arr, final) in enumerate(zip(sent, back, strict=False)):
        both = isinstance(arr, np.ndarray) and isinstance(final, np.ndarray)
        if both and not np.array_equal(final, arr, equal_nan=True):
            out.append(i)
    return out


def failure_text(reply: dict[str, Any]) -> tuple[str, str]:
    """(status, detail) for a reply that did not produce a Tensor."""
    status = reply["status"]
    if status == "raised":
        return "error", f"raised {reply['error']}"
    if status == "not_tensor":
        return "fail", f"returned a {reply['type']}, expected a Tensor: return Tensor(result)"
    if status == "not_implemented":
        return "incomplete", reply["error"]
    if status in ("timeout", "crash", "protocol"):
        return status, reply["error"]
    if status == "tampered":
        return "fail", reply["error"]
    if status == "unloadable":
        return "error", f"the module could not be loaded: {reply['error']}"
    return "error", reply.get("error", status)


def broken_check(name: str, fn: str, reply: dict, lesson: str) -> CheckResult:
    """A deeper check whose own call did not answer (a hang, a crash, a broken channel, a call
    skipped after them): the same statuses and lessons for every check."""
    if reply.get("skipped"):  # the function kept hanging or crashing: this check never ran
        return CheckResult(name, "not_run", f"{fn}: {reply['error']}", "", [fn])
    status, detail = failure_text(reply)
    status = "fail" if status == "error" and reply["status"] == "not_tensor" else status
    lesson = failure_lesson(reply, lesson)  # a hang or a non-Tensor has its own lesson
    # its own call broke: that names no cause for the wrong answers of the function's cases
    return CheckResult(name, status, f"{fn}: {detail}", lesson, [fn], names_cause=False)
