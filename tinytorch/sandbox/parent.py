"""Run untrusted student code in a contained child process; whatever it does becomes a result.

The parent starts a fresh interpreter (inside new pid/net namespaces where the kernel allows,
see confine.py) that sets its limits, drops to an unprivileged uid when the grader is root,
moves into a private folder holding a copy of the submission and only then imports the student's
module. Requests and replies travel over two pipes in the data-only format of protocol.py (JSON
headers + raw arrays, nothing unpickled); every reply echoes its request id and is checked
against a schema and size caps derived from the request before its arrays are read. No answer in
time is a timeout, end-of-file a crash, anything malformed "protocol"; in each case the child and
everything it started are killed and reaped, and the next request starts a fresh child.
The child's stdout and stderr go to /dev/null. Not multiprocessing: its spawn start re-runs the
parent's __main__ script in the child, which breaks for stdin, notebooks and grader scripts.

The child's side is `tinytorch.sandbox.child` (its entry: child/main.py); the request/reply
contract is in this file (call, grad, task; the statuses below). The sandbox knows nothing of a
milestone: what it must know of the graded module (the names to look for, the reference to keep
out while grading, a registry of our own tasks) comes in a `Graded`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import select
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tinytorch.sandbox import procs, spawn, uids
from tinytorch.sandbox.child import protocol
from tinytorch.sandbox.child.confine import ChildLimits
from tinytorch.sandbox.child.main import TEXT_CAP

START_TIMEOUT_S = 60.0  # importing numpy + the student's module in a fresh interpreter
# The timeout rule (one home; every route reaches the child through Sandbox.request). A request's
# `timeout` is CPU seconds of the child's process tree, not wall time, so that a busy machine
# never turns a correct kernel into a TIMEOUT. Threads that run at once share the charge (the CPU
# time is divided by how many of the tree's threads wanted a CPU, at most the cores): two BLAS
# threads are charged as one thread would be, so that on a quiet machine a budget means the
# wall-clock seconds it always meant. A separate wall-clock guard catches code that
# sleeps or blocks: it counts only the time in which no thread of the tree ran or waited to run
# (read from schedstat), and ends the request at BLOCKED_FACTOR x timeout of it. Load adds
# nothing to that count, so it needs no slack for a busy machine: at 1 x timeout a sleeping
# kernel times out when it always did, and a restart stays held to its call's time. A last,
# generous cap on plain wall time (STARVED_FACTOR x timeout + STARVED_EXTRA_S) ends a request
# the machine starves of CPU altogether. On a quiet machine a busy loop still ends at `timeout`.
BLOCKED_FACTOR = 1.0
BLOCKED_FACTOR_NO_SCHEDSTAT = 10.0  # without run-queue figures a starved child looks blocked
STARVED_FACTOR, STARVED_EXTRA_S = 20.0, 10.0
# A restart's import gets its call's timeout plus these: a fresh interpreter spends 0.15-0.4 s
# of CPU importing numpy before it reaches the student's module, and new namespaces and cold
# files add time off the CPU (about 0.2 s with 6 hogs per core).
RESTART_CPU_S, RESTART_BLOCKED_S = 1.0, 0.25
POLL_S = 0.05  # how often the limits are looked at while the child has not answered
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
CRASH_GRACE_S = 5.0  # a limit that fires as the child's tree is dying waits this long for its end
# What a child may answer, and the keys each status needs (its consumers read them). The parent's
# own statuses (timeout, crash, protocol, unloadable) are never accepted from a child.
CALL_REPLIES = {"ok": ("output",), "raised": ("error",), "not_implemented": ("error",),
                "not_tensor": ("type",)}  # fmt: skip
LOAD_REPLIES = {"ok": ("functions",), "not_found": ("error",), "import_error": ("error",),
                "not_implemented": ("error",)}  # fmt: skip
TASK_REPLIES = {"ok": ("value",), "raised": ("error",)}
PARENT_STATUSES = frozenset({"timeout", "crash", "protocol", "unloadable"})
MAX_SLICES = 20000
_HERE = Path(__file__).resolve().parent  # tinytorch/sandbox


@dataclass(frozen=True)
class Graded:
    """What a sandbox is told about the module it loads: the milestone's only facts in here.

    names: the attributes the load reports on ("functions": ok, missing, not callable); classes:
    those that must be classes with an `apply`, whose methods count as graded places.
    reference: the bundled reference's modules: refused (with `blocked`) while grading, their files
    read as empty, their use reported. fingerprints: computes {code fingerprint: place} of the
    reference's solution code, sent to a grading child. tasks: "module:attribute" of a registry
    {name: fn(module, **kwargs)} of our own task code, copied in the child before the import.
    """

    names: tuple[str, ...] = ()
    classes: tuple[str, ...] = ()
    reference: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()
    fingerprints: Callable[[], dict[str, str]] | None = None
    tasks: str | None = None


F32 = np.dtype(np.float32)  # what Tensor() makes of any input

# The child's entry: when it is pid 1 of a new pid namespace, fork and stay behind as a minimal
# init (reaps orphans; its exit tears the namespace down). Then run the child's entry: the
# packages on its way (tinytorch, tinytorch.sandbox, tinytorch.sandbox.child) import nothing of
# the grader, so the child loads only what lives in sandbox/child/ and core/.
_BOOT = """
import json, os, sys
cfg = json.loads(sys.argv[1])
if os.getpid() == 1:
    main = os.fork()
    if main:
        os.close(cfg["req_fd"]); os.close(cfg["rep_fd"])
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                os._exit(0)
            if pid == main:
                os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
from tinytorch.sandbox.child.main import worker_main
worker_main(cfg)
"""


# ---- the timeout rule ---------------------------------------------------------------------------
class Budget:
    """One request's limits, looked at while the parent waits on the child.

    seconds: the request's timeout, in CPU seconds of the child's tree (`extra_cpu` more may be
    spent and `extra_blocked` more blocked: a restart's interpreter start-up). The blocked guard
    and the starved cap derive from it (see BLOCKED_FACTOR). meter None (no /proc: not Linux): plain wall time, as
    before.
    `fired` is None, or {"limit": "cpu" | "blocked" | "starved" | "wall", "error": ...,
    "cpu_s": ..., "wall_s": ...}: which limit ended the request, in words and figures.
    """

    def __init__(
        self,
        meter: procs.TreeMeter | None,
        seconds: float,
        *,
        extra_cpu: float = 0.0,
        extra_blocked: float = 0.0,
        rescan_every: float = procs.RESCAN_MIN_S,
    ) -> None:
        self.seconds = float(seconds)
        self.meter = meter if meter is not None and meter.ok else None
        self.extra_blocked = float(extra_blocked)
        self.rescan_every = rescan_every  # how often a look that seems blocked scans /proc
        self.cpu_limit = self.seconds + float(extra_cpu)
        self.start = self._last = time.monotonic()
        self.cpu0 = self.meter.cpu(rescan=False) if self.meter else 0.0
        # the run-queue baseline is read at the first look (most requests end before one)
        self._active: dict[int, int] | None = None
        self._now_active: dict[int, int] | None = None
        self._first = True
        self._cpu_last = self.cpu0
        self.charged = 0.0  # CPU seconds, divided among the threads that ran at once
        self.members = set(self.meter.pids) if self.meter else set()  # alive at the start
        self.fired_at = math.inf
        self.blocked = 0.0
        self.flowed = False  # bytes moved since the last look: the child was not blocked
        self.fired: dict[str, Any] | None = None

    def guard_s(self) -> float:
        """Seconds of blocked time the request may spend."""
        plain = self.meter is None or not self.meter.schedstat
        factor = BLOCKED_FACTOR_NO_SCHEDSTAT if plain else BLOCKED_FACTOR
        return self.seconds * factor + self.extra_blocked

    def cap_s(self) -> float:
        return STARVED_FACTOR * self.seconds + STARVED_EXTRA_S

    def wait_s(self) -> float:
        """How long the next wait for the child may last before the limits are looked at."""
        if self.meter is None:
            return max(self.seconds - (time.monotonic() - self.start), 0.0)
        return POLL_S

    def _look(self) -> tuple[float, float]:
        """(CPU seconds charged to this request, wall seconds); adds to `blocked` the time since
        the last look in which no thread of the tree ran or waited to run."""
        now = time.monotonic()
        wall = now - self.start
        if self.meter is None:
            return wall, wall
        dt = now - self._last
        if self._first:  # the baseline: the wait so far counts as busy, the CPU as spent
            self._first = False
            cpu = self.meter.cpu()
            self.charged = max(cpu - self.cpu0, 0.0)
            self._last, self._cpu_last = now, cpu
            self._active = self.meter.active_ns()
            return self.charged, wall
        cpu, busy, born = self._busy()
        if dt - busy > 0.2 * dt and not self.flowed and self.meter.rescan(self.rescan_every):
            cpu, busy, born = self._busy()  # it looked blocked, but it had started processes
        if not self.flowed:
            self.blocked += max(dt - busy, 0.0)
        # A thread first seen now ran (or waited) in looks that took it for blocked: give that
        # time back (a process the tree started is found at the next scan, not at its fork).
        self.blocked = max(self.blocked - born, 0.0)
        self.flowed = False
        used = max(cpu - self._cpu_last, 0.0)
        if self._now_active is None:  # no run-queue figures: at most one core's worth
            self.charged += min(used, dt)
        else:  # how many threads wanted a CPU at once, on average (at most the cores)
            wanting = (busy + born) / dt if dt > 0 else 1.0
            self.charged += used / min(max(wanting, 1.0), _CORES)
        self._last, self._cpu_last, self._active = now, cpu, self._now_active
        return self.charged, wall

    def _busy(self) -> tuple[float, float, float]:
        """(the tree's CPU seconds, seconds its known threads ran or waited to run since the
        last look, seconds the threads first seen now ran or waited to run in all)."""
        assert self.meter is not None
        cpu = self.meter.cpu()
        active = self._now_active = self.meter.active_ns()
        if active is None or self._active is None:
            return cpu, max(cpu - self._cpu_last, 0.0), 0.0
        known = sum(ns - self._active[t] for t, ns in active.items() if t in self._active)
        born = sum(ns for t, ns in active.items() if t not in self._active)
        return cpu, max(known / 1e9, 0.0), born / 1e9

    def over(self) -> bool:
        """True (and `fired` set) once a limit is reached."""
        if self.fired is not None:
            return True
        cpu, wall = self._look()
        if self.meter is None:
            if wall >= self.seconds:
                self.fired = {"limit": "wall", "error": f"no answer within {self.seconds:g} s"}
        elif cpu >= self.cpu_limit:
            self.fired = {
                "limit": "cpu",
                "error": f"no answer within {self.cpu_limit:g} s of CPU time"
                + (f" ({wall:.1f} s of wall time on a busy machine)" if wall > 2 * cpu else ""),
            }
        elif self.blocked >= self.guard_s():
            self.fired = {
                "limit": "blocked",
                "error": f"blocked: no answer within {wall:.1f} s of wall time, using little CPU"
                f" ({cpu:.2f} s; it sleeps or waits on something)",
            }
        elif wall >= self.cap_s():
            self.fired = {
                "limit": "starved",
                "error": f"no answer within {wall:.0f} s of wall time, with only {cpu:.2f} s of"
                " CPU: the machine is too busy to grade on",
            }
        if self.fired is not None:
            self.fired.update(cpu_s=round(cpu, 3), wall_s=round(wall, 3))
            self.fired_at = time.monotonic()
        return self.fired is not None

    def looked_long_ago(self) -> bool:
        return time.monotonic() - self._last >= POLL_S


class _Stop(Exception):
    """A request's Budget ran out while the parent waited on the child."""


# ---- parent side: what a reply may hold -------------------------------------------------------
def _text(msg: dict[str, Any], key: str, cap: int = TEXT_CAP) -> None:
    if key in msg and not (isinstance(msg[key], str) and len(msg[key]) <= cap):
        raise protocol.ProtocolError(f"'{key}' is not a string of at most {cap} characters")


def _ref(value: Any, declared: list) -> tuple[np.dtype, tuple[int, ...], int]:
    if not (isinstance(value, dict) and value.keys() == {"$a"}):
        raise protocol.ProtocolError("expected an array")
    return declared[value["$a"]]


MAX_DIM = 1 << 31  # no array the grader hands over has an axis this long


def _int_list(value: Any, cap: int) -> bool:
    """A list of at most `cap` ints, each in [0, MAX_DIM): a shape or block bounds, never a
    negative or astronomic number (a forged record of dims (-MKN, 1, -1) once counted as the
    whole product, and one of -10**320 broke the grader)."""
    return (
        isinstance(value, list)
        and len(value) <= cap
        and all(type(d) is int and 0 <= d < MAX_DIM for d in value)
    )


def _status(msg: dict[str, Any], replies: dict[str, tuple[str, ...]], what: str) -> None:
    """The reply's status is a string a child may send, and the keys it needs are there."""
    status = msg.get("status")
    if not isinstance(status, str) or status not in replies:
        raise protocol.ProtocolError(f"a {what} with status {str(status)[:40]!r}")
    missing = [key for key in replies[status] if key not in msg]
    if missing:
        raise protocol.ProtocolError(f"a {what} with status {status!r} but no {', '.join(missing)}")


def _checked(validate: protocol.Validator) -> protocol.Validator:
    """validate, with anything it trips over (a forged type it did not expect) a ProtocolError."""

    def check(msg: dict[str, Any], declared: list) -> None:
        try:
            validate(msg, declared)
        except protocol.ProtocolError:
            raise
        except Exception as exc:  # noqa: BLE001 (whatever the child sent, it is its fault)
            raise protocol.ProtocolError(
                f"a reply the schema cannot read ({type(exc).__name__})"
            ) from None

    return check


def _short_strings(table: Any, cap: int, what: str) -> None:
    if not (isinstance(table, dict) and len(table) <= cap):
        raise protocol.ProtocolError(f"'{what}' is not a small dict")
    if not all(len(k) <= 200 and isinstance(v, str) and len(v) <= 200 for k, v in table.items()):
        raise protocol.ProtocolError(f"'{what}' holds something other than short strings")


def _load_validator(msg: dict[str, Any], declared: list) -> None:
    allowed = {
        "status", "error", "functions", "origins", "imports_reference", "file", "layers", "stubs",
        "copies_reference", "conv_methods",
    }  # fmt: skip
    if declared or not msg.keys() <= allowed:
        raise protocol.ProtocolError("malformed load info")
    _status(msg, LOAD_REPLIES, "load info")
    _text(msg, "error")
    _text(msg, "file", 4096)
    for key in ("functions", "origins"):
        _short_strings(msg.get(key, {}), 64, key)
    layers = msg.get("layers", {})
    if not (isinstance(layers, dict) and len(layers) <= 32):
        raise protocol.ProtocolError("'layers' is not a small dict")
    for layer in layers.values():
        if not (isinstance(layer, list) and len(layer) == 2 and isinstance(layer[0], bool)):
            raise protocol.ProtocolError("a layer is not [active, why]")
        if not (isinstance(layer[1], str) and len(layer[1]) <= 4096):
            raise protocol.ProtocolError("a layer's why is not a short string")
    if not isinstance(msg.get("imports_reference", False), bool):
        raise protocol.ProtocolError("'imports_reference' is not a bool")
    for key in ("stubs", "copies_reference", "conv_methods"):
        items = msg.get(key, [])
        if not (isinstance(items, list) and len(items) <= 64):
            raise protocol.ProtocolError(f"'{key}' is not a short list")
        if not all(isinstance(v, str) and len(v) <= 200 for v in items):
            raise protocol.ProtocolError(f"'{key}' holds something other than short strings")


def _task_validator(msg: dict[str, Any], declared: list) -> None:
    if declared or not msg.keys() <= {"status", "error", "value"}:
        raise protocol.ProtocolError("malformed task reply")
    _status(msg, TASK_REPLIES, "task reply")
    _text(msg, "error")


def _call_validator(sent: list[Any], out_cap: int) -> protocol.Validator:
    """Checks a call reply's header against the request, before any array is read."""
    sent_arrays = [a if isinstance(a, np.ndarray) else None for a in sent]
    keys = {"status", "error", "seconds", "records", "slices", "boxes", "records_dropped",
            "output", "inputs", "grads", "type", "phase", "stub", "tampered"}  # fmt: skip

    def validate(msg: dict[str, Any], declared: list) -> None:
        if not msg.keys() <= keys:
            raise protocol.ProtocolError("unexpected keys in a call reply")
        _status(msg, CALL_REPLIES, "call reply")
        for key in ("error", "type", "stub", "tampered"):
            _text(msg, key)
        if msg.get("phase", "forward") not in ("forward", "backward"):
            raise protocol.ProtocolError("bad 'phase'")
        if "seconds" in msg and not (
            type(msg["seconds"]) in (int, float) and math.isfinite(msg["seconds"])
        ):
            raise protocol.ProtocolError("'seconds' is not a number")
        records = msg.get("records", [])
        if not (isinstance(records, list) and len(records) <= 20000):
            raise protocol.ProtocolError("'records' is not a list of at most 20000")
        for rec in records:
            if not (
                isinstance(rec, list) and len(rec) == 2 and isinstance(rec[0], str)
                and len(rec[0]) <= 16 and isinstance(rec[1], list) and 2 <= len(rec[1]) <= 8
                and all(_int_list(s, 8) for s in rec[1])
            ):  # fmt: skip
                raise protocol.ProtocolError("malformed audit record")
        slices = msg.get("slices", [])
        if not (isinstance(slices, list) and len(slices) <= MAX_SLICES):
            raise protocol.ProtocolError("'slices' is not a list")
        if not all(_int_list(s, 8) for s in slices):
            raise protocol.ProtocolError("malformed slice shape")
        boxes = msg.get("boxes", [])
        if not (isinstance(boxes, list) and len(boxes) <= MAX_SLICES):
            raise protocol.ProtocolError("'boxes' is not a list")
        if not all(_int_list(b, 5) and len(b) == 5 and b[1] < b[2] and b[3] < b[4] for b in boxes):
            raise protocol.ProtocolError("malformed block slice [operand, r0, r1, c0, c1]")
        if type(msg.get("records_dropped", 0)) is not int:
            raise protocol.ProtocolError("'records_dropped' is not an int")
        seen = 0
        if "output" in msg:
            _dtype, _shape, _nbytes = _ref(msg["output"], declared)
            if math.prod(_shape) > out_cap:
                raise protocol.ProtocolError(
                    f"an output of shape {_shape}: over {out_cap} elements"
                )
            seen += 1
        for key in ("inputs", "grads"):
            if key not in msg:
                continue
            items = msg[key]
            if not (isinstance(items, list) and len(items) == len(sent_arrays)):
                raise protocol.ProtocolError(f"'{key}' does not have one entry per argument")
            for item, arr in zip(items, sent_arrays, strict=True):
                if item is None:
                    continue
                if arr is None:
                    raise protocol.ProtocolError(f"'{key}' has an array for a non-array argument")
                dtype, shape, _nbytes = _ref(item, declared)
                if key == "inputs" and (dtype not in (arr.dtype, F32) or shape != arr.shape):
                    raise protocol.ProtocolError("an input came back with another dtype or shape")
                if key == "grads" and (dtype.kind != "f" or math.prod(shape) > 4 * arr.size + 16):
                    raise protocol.ProtocolError(f"a gradient of {dtype} {shape}")
                seen += 1
        if seen != len(declared):
            raise protocol.ProtocolError("an array outside output/inputs/grads")

    return validate


def _call_limits(sent: list[Any], out_cap: int, grads: bool) -> protocol.Limits:
    inputs = sum(a.nbytes for a in sent if isinstance(a, np.ndarray))
    grad_bytes = (
        sum(8 * (4 * a.size + 16) for a in sent if isinstance(a, np.ndarray)) if grads else 0
    )
    return protocol.Limits(header=8 << 20, payload=8 * out_cap + inputs + grad_bytes)


def expected_reply(
    req: dict[str, Any],
) -> tuple[dict[str, Any], protocol.Limits, protocol.Validator]:
    """(the request as sent, the reply's caps, its validator): what a reply to `req` may be."""
    req = dict(req)
    if "task" in req:
        return req, protocol.Limits(header=8 << 20), _task_validator
    args = list(req.get("args", []))
    out_cap = int(req.pop("out_cap", 0) or default_out_cap(args))
    limits = _call_limits(args, out_cap, req.get("grad") is not None)
    return req, limits, _call_validator(args, out_cap)


def default_out_cap(args: list[Any]) -> int:
    """Elements an output may have when the caller does not say: generous, but bounded."""
    n = sum(a.size for a in args if isinstance(a, np.ndarray))
    return 64 * n + (1 << 16)


_SIGNAL_MEANS = {
    "SIGXCPU": " (its CPU-seconds limit)",
    "SIGXFSZ": " (its file-size limit)",
    "SIGSEGV": " (a segfault)",
}


def _death(exitcode: int | None, in_namespace: bool) -> str:
    if exitcode is None:
        return "the child process stopped answering"
    if in_namespace and exitcode > 128:  # our pid-1 init passes a signal death on as 128 + n
        exitcode = -(exitcode - 128)
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"the child process died with {name}{_SIGNAL_MEANS.get(name, '')}"
    return f"the child process exited with status {exitcode}"


def _hidden(reference: tuple[str, ...]) -> dict[str, Any]:
    """What a grading child must not read: the reference's files, and the source checkout."""
    return {
        "files": spawn.reference_files(reference),
        "checkout": spawn.checkout_root(),
    }


def _pythonpath() -> str:
    """The parent's import path, so the child finds what the parent finds."""
    here = str(_HERE.parents[1])  # the folder holding the tinytorch package
    paths = [here] + [p for p in sys.path if p and os.path.isdir(p)]
    return os.pathsep.join(dict.fromkeys(paths))


class Sandbox:
    """One contained child process running the student's module; restarted after a failure.

    impl: a module name or .py path (None: no student code, for our own Part B tasks).
    env: extra environment variables for the child. grading: refuse the reference's imports.
    limits: ChildLimits (default: 2 GiB address space etc.; no address-space or CPU cap when
    impl is None, e.g. torch). user: (uid, gid) to drop to as root (default TINYTORCH_SANDBOX_UID or 65534).
    """

    def __init__(
        self,
        impl: str | None,
        env: dict[str, str] | None = None,
        *,
        grading: bool = False,
        limits: ChildLimits | dict[str, int | None] | None = None,
        user: tuple[int, int] | None = None,
        tasks: bool = False,
        graded: Graded | None = None,
    ) -> None:
        """tasks: the child answers task requests from the registry `graded.tasks` names, copied
        before the student's module is imported (so a module that patches it changes nothing).
        graded: what the sandbox must know of the module it loads (default: nothing)."""
        if isinstance(limits, dict):  # e.g. {"memory_bytes": 512 << 20}; the rest default
            fields = set(ChildLimits.__dataclass_fields__)
            if not set(limits) <= fields:
                raise TypeError(
                    f"Sandbox: limits keys must be among {sorted(fields)}, got {sorted(limits)}"
                )
            limits = ChildLimits(**limits)
        if limits is not None and not isinstance(limits, ChildLimits):
            raise TypeError(
                f"Sandbox: limits must be a ChildLimits or a dict, got {type(limits).__name__}"
            )
        self.impl = impl
        self.env = env or {}
        self.grading = bool(grading)
        self.tasks = bool(tasks)
        self.graded = graded or Graded()
        if limits is None:
            limits = ChildLimits() if impl is not None else ChildLimits(None, None)
        self.limits = limits
        # Our own tasks (impl None: baselines, torch) keep the grader's uid, HOME and caches.
        self.ids = user if user is not None else uids.sandbox_ids() if impl else None
        self.info: dict[str, Any] | None = None  # what loading the module found, first start
        self.restarts = 0
        self.isolation: dict[str, dict[str, Any]] = {}
        self._proc: subprocess.Popen | None = None
        self._token = ""
        self._root: str | None = None
        self._req_fd = -1
        self._reader: protocol.FdReader | None = None
        self._next_id = 0
        self._in_ns = False
        self._uid: int | None = None  # the child's uid after its drop (None: the grader's)
        self._meter: procs.TreeMeter | None = None  # what the child's tree spends
        self._budget: Budget | None = None  # the limits of the exchange under way

    def __enter__(self) -> Sandbox:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- starting -----------------------------------------------------------------------------
    def _layer(self, name: str, active: bool, why: str) -> None:
        self.isolation[name] = {"active": bool(active), "why": why}

    def start(self, timeout: float | None = None) -> dict[str, Any]:
        """Start the child (if needed) and return what loading the module found; the import may
        take START_TIMEOUT_S, or `timeout` where less (a restart inside a request's time)."""
        if self._proc is not None and self._proc.poll() is None:
            return self.info or {}
        self.kill()
        reaper, why = procs.become_subreaper()
        self._layer("subreaper", reaper, "the grader adopts orphans" if reaper else why)
        prefix, ns_why = spawn.namespace_prefix()
        self._in_ns = bool(prefix)
        self._layer("namespaces", bool(prefix), ns_why)
        self._layer("network", bool(prefix), "none: own net namespace" if prefix else ns_why)
        ids = self.ids if not (prefix and "--user" in prefix) else None
        if self.grading and self.impl is not None:  # fail closed: no student code unisolated
            problem = spawn.isolation_problem(spawn.needed_paths(str(_HERE)))
            if problem and not spawn.trusted():
                raise spawn.IsolationRefused(problem)
            if problem:
                self._layer("trusted", False, f"{spawn.TRUST_VAR}=1: graded anyway; {problem}")
        self._root, work, copied = spawn.private_dir(self.impl, ids, follow=not self.grading)
        impl = copied or self.impl
        if impl is not None and copied is None and (impl.endswith(".py") or os.sep in impl):
            impl = os.path.abspath(impl)  # not found: let the child say so, with the full path
        self._token = secrets.token_hex(16)
        g = self.graded
        hide = self.grading and impl and g.reference and impl not in g.reference
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        cfg = {
            "impl": impl, "req_fd": req_r, "rep_fd": rep_w, "ids": list(ids) if ids else None,
            "work": work, "limits": asdict(self.limits), "grading": self.grading,
            "tasks": g.tasks if self.tasks else None, "names": g.names, "classes": g.classes,
            "reference": g.reference, "blocked": g.blocked,
            "ref_prints": g.fingerprints() if self.grading and impl and g.fingerprints else None,
            "ns": bool(prefix), "needed": spawn.needed_paths(str(_HERE)),
            "caller_dir": os.getcwd() if impl and copied is None else None,
            "hide": _hidden(g.reference) if hide else None,
        }  # fmt: skip
        pdeath = spawn.pdeath_prefix()
        cmd = [*pdeath, *prefix, sys.executable, "-c", _BOOT, json.dumps(cfg)]
        env = spawn.child_env(self.env, work, self._token, _pythonpath(), trim=bool(self.impl))
        try:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, pass_fds=(req_r, rep_w), env=env, cwd=self._root,
                start_new_session=True,
            )  # fmt: skip
        finally:
            os.close(req_r)
            os.close(rep_w)
        procs.LIVE.add(self._proc.pid)
        self._uid = ids[0] if ids else None
        self._meter = procs.TreeMeter(self._proc.pid, self._token, self._uid)
        rule, rule_why = procs.orphan_rule(self._uid)
        self._layer("orphans", rule is not None, rule_why)
        self._layer("session", True, "own session and process group")
        self._layer("workdir", True, f"a private copy in {work}" if copied else f"private {work}")
        trimmed = "trimmed: PATH, locale, thread and TINYTORCH_* variables only"
        self._layer("env", bool(self.impl), trimmed if self.impl else "no student code: kept")
        self._req_fd = req_w
        os.set_blocking(req_w, False)
        self._reader = protocol.FdReader(rep_r)
        self._next_id = 0
        if self.info is not None:
            self.restarts += 1
        # The import's limits: START_TIMEOUT_S of CPU; a restart, the call's own timeout (plus
        # the CPU a fresh interpreter needs before it reaches the student's module).
        if timeout is None:
            budget = Budget(self._meter, START_TIMEOUT_S, rescan_every=0.0)
        else:
            seconds = max(min(START_TIMEOUT_S, timeout), 0.001)
            budget = Budget(
                self._meter,
                seconds,
                extra_cpu=RESTART_CPU_S,
                extra_blocked=RESTART_BLOCKED_S,
                rescan_every=0.0,  # the tree is being born: every look scans
            )
        info = self._receive(0, budget, protocol.Limits(header=1 << 20), _load_validator)
        if self._meter is not None:  # the whole tree is up now: each request starts from it
            self._meter.rescan(every=0.0)
        if info.get("transport"):  # the import itself hung or crashed
            limit = {k: info[k] for k in ("limit", "cpu_s", "wall_s") if k in info}
            info = {"status": "import_" + info["status"], "error": info["error"], "functions": {},
                    **limit}  # fmt: skip
        for name, (active, why) in (info.pop("layers", None) or {}).items():
            self._layer(str(name), bool(active), str(why))
        if "pdeathsig" in self.isolation and pdeath and prefix:
            self.isolation["pdeathsig"]["why"] += " (and the namespace wrapper, via setpriv)"
        if self.info is None:
            self.info = info
        return info

    # ---- one exchange -------------------------------------------------------------------------
    def _fail(self, status: str, error: str, fired: dict[str, Any] | None = None) -> dict[str, Any]:
        code = None
        if status == "crash" and self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self._proc.wait(5)
            error = _death(code, self._in_ns)
        self.kill()
        out = {"status": status, "error": error, "transport": 1}
        if status == "timeout" and fired:
            out.update(fired, error=error)
        return out

    def _dying(self, budget: Budget) -> bool:
        """The child has exited, or a process of its tree that was alive when the request began
        has: a crash that has not reached the pipe yet (under load its wrappers take their
        time to notice), never a timeout."""
        if self._proc is None or self._proc.poll() is not None:
            return True
        return self._meter is not None and self._meter.dying(budget.members)

    def _wait_readable(self, fd: int, budget: Budget) -> None:
        """Return once `fd` has data or end-of-file; raise _Stop when the budget ran out. A
        child whose end has begun gets CRASH_GRACE_S to deliver it, so a crash is a crash."""
        while True:
            if budget.fired is None:
                ready, _w, _x = select.select([fd], [], [], budget.wait_s())
                if ready:
                    return
                if not budget.over():
                    continue
            if time.monotonic() - budget.fired_at > CRASH_GRACE_S:
                raise _Stop
            if select.select([fd], [], [], 0)[0]:
                return  # it answered (or ended) as the limit fired: read what it sent
            if not self._dying(budget):
                raise _Stop
            select.select([fd], [], [], POLL_S)

    def _read_exact(self, n: int) -> bytes:
        reader, budget = self._reader, self._budget
        assert reader is not None and budget is not None
        buf = bytearray()
        while len(buf) < n:
            self._wait_readable(reader.fd, budget)
            chunk = os.read(reader.fd, min(n - len(buf), 1 << 20))
            if not chunk:
                raise EOFError
            buf += chunk
            budget.flowed = True
            if budget.looked_long_ago():  # a reply that trickles is held to the limits too
                budget.over()
        return bytes(buf)

    def _receive(
        self, rid: int, budget: Budget, limits: protocol.Limits, validate: protocol.Validator
    ) -> dict[str, Any]:
        if self._reader is None:
            return self._fail("crash", "")
        self._budget = budget
        try:
            got_id, reply = protocol.read_frame(self._read_exact, limits, _checked(validate))
        except _Stop:
            if self._dying(budget):
                return self._fail("crash", "")
            fired = budget.fired or {}
            return self._fail("timeout", fired.get("error", "no answer in time"), fired)
        except EOFError:
            return self._fail("crash", "")
        except (protocol.ProtocolError, struct.error, OSError) as exc:
            return self._fail("protocol", f"a malformed reply from the child ({exc})")
        finally:
            self._budget = None
        if got_id != rid:
            return self._fail("protocol", f"a reply to request {got_id} while waiting for {rid}")
        return reply

    def _send(self, frame: bytes, budget: Budget) -> bool:
        data = memoryview(frame)
        while data:
            if budget.fired is not None:
                return False
            _r, ready, _x = select.select([], [self._req_fd], [], budget.wait_s())
            if not ready:
                budget.over()
                continue
            try:
                data = data[os.write(self._req_fd, data[: 1 << 20]) :]
            except BlockingIOError:
                continue
            except OSError:  # the child is gone (EPIPE)
                return False
            budget.flowed = True
        return True

    def request(self, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request; the reply, or {"status": "timeout" | "crash" | "protocol", ...}.

        timeout: CPU seconds the child's process tree may spend on it; a request that sleeps or
        blocks ends on the wall-clock guard (see Budget). A timeout's reply says which limit
        ended it: "limit" ("cpu", "blocked", "starved"; "wall" where nothing is measured),
        "cpu_s" and "wall_s". A child that died is a "crash", whatever fired first.
        A call request may carry "out_cap": the most elements its output may have (default:
        generous, from the inputs); it is not sent to the child."""
        loaded = self.info is not None and self.info.get("status") == "ok"
        # A restart (the last call killed the child) imports the module again within this
        # request's timeout: an import that stalls only on a restart must not stretch each call
        # by START_TIMEOUT_S, past the per-case timeout and the run's budget. The call then gets
        # its own timeout: a restart takes 0.3-0.5 s here, which a 0.5 s timeout cannot hold both.
        info = self.start(timeout if self.info is not None else None)
        if loaded and info.get("status") != "ok":
            status = str(info.get("status", "crash")).removeprefix("import_")
            status = status if status in ("timeout", "crash", "protocol") else "crash"
            error = f"restarting the child after the last call's end, its import: {info.get('error', '')}"
            limit = {k: info[k] for k in ("limit", "cpu_s", "wall_s") if k in info}
            return {"status": status, "error": error, "transport": 1, "restart": 1, **limit}
        if info.get("status") != "ok" and ("task" not in req or "import_" in info["status"]):
            return {"status": "unloadable", "error": info.get("error", "")}
        req, limits, validate = expected_reply(req)
        self._next_id += 1
        rid = self._next_id
        budget = Budget(self._meter, timeout)
        if not self._send(protocol.encode(rid, req), budget):
            if self._dying(budget):
                return self._fail("crash", "")
            fired = dict(budget.fired or {})
            fired["error"] = f"the child did not take the request: {fired.get('error', '')}"
            return self._fail("timeout", fired["error"], fired)
        return self._receive(rid, budget, limits, validate)

    # ---- stopping -----------------------------------------------------------------------------
    def kill(self) -> None:
        """Kill the child and everything it started, reap them, remove its folder."""
        proc, self._proc = self._proc, None
        self._meter = None
        if proc is not None:
            procs.kill_tree(proc, self._token, self._uid)
            uids.remove_leftovers(self._uid)  # files its processes left for the next run
        if self._req_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._req_fd)
            self._req_fd = -1
        if self._reader is not None:
            with contextlib.suppress(OSError):
                os.close(self._reader.fd)
            self._reader = None
        if self._root is not None:
            procs.remove_tree(self._root)
            self._root = None

    def close(self) -> None:
        """Kill and reap the whole process tree (the child is never trusted to exit by itself)."""
        self.kill()
