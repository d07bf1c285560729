"""Calls into the student's module through the sandbox, with the bookkeeping the checks need.

Keeps, across every call of a run: which inputs were mutated, which outputs were not float32 or
not finite, and which functions keep hanging or crashing (after two in a row, their other calls
are skipped, so a function that always hangs costs two timeouts, not thirty).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinytorch.milestone07.sandbox import Sandbox

ARG_NAMES = {
    "tiled_matmul": ("a", "b"),
    "fused_gelu": ("x",),
    "im2col": ("x",),
    "im2col_conv2d": ("x", "weight", "bias"),
    "col2im": ("cols",),
}
MAX_STRIKES = 2  # timeouts/crashes in a row of one function before its other calls are skipped


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
        self, fn: str, args: list[Any], kwargs: dict[str, Any], *, label: str, audit: bool = False
    ) -> dict[str, Any]:
        strikes = self.seen.strikes.get(fn, [])
        if len(strikes) >= MAX_STRIKES:
            last = strikes[-1]
            return {
                "status": last,
                "error": f"not run: the last {len(strikes)} calls of {fn} ended in a {last}",
                "skipped": True,
            }
        reply = self.sandbox.request(
            {"fn": fn, "args": args, "kwargs": kwargs, "audit": audit}, self.timeout
        )
        status = reply["status"]
        if status in ("timeout", "crash"):
            self.seen.strikes.setdefault(fn, []).append(status)
            if status == "timeout":
                reply["error"] = f"no result within {self.timeout:g} s (an endless loop?)"
            else:
                reply["error"] = f"{reply['error']} while running {fn}: a crash in native code?"
        else:  # it finished this time: a shape-dependent hang must not cost the other cases
            self.seen.strikes.pop(fn, None)
        if status == "not_implemented":
            self.seen.not_implemented.setdefault(fn, reply["error"])
        for i in reply.get("mutated", []):
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


def failure_text(reply: dict[str, Any]) -> tuple[str, str]:
    """(status, detail) for a reply that did not produce a Tensor."""
    status = reply["status"]
    if status == "raised":
        return "error", f"raised {reply['error']}"
    if status == "not_tensor":
        return "fail", f"returned a {reply['type']}, expected a Tensor: return Tensor(result)"
    if status == "not_implemented":
        return "incomplete", reply["error"]
    if status in ("timeout", "crash"):
        return status, reply["error"]
    if status == "unloadable":
        return "error", f"the module could not be loaded: {reply['error']}"
    return "error", reply.get("error", status)
