"""Run untrusted student code in a child process: a raise, a hang or a segfault becomes a result.

The parent starts `python -m tinytorch.milestone07.sandbox IMPL` and exchanges length-prefixed
pickles over the child's stdin/stdout (the child's own prints go to its stderr). A reader thread
in the parent turns "no answer in time" into a timeout and end-of-file into a crash; either way
the child is gone and the next request starts a fresh one, so the remaining cases still run.
Not multiprocessing: its spawn start re-runs the parent's __main__ script in the child, which
breaks for stdin, notebooks and grader scripts without an `if __name__ == "__main__"` guard.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import IO, Any

import numpy as np

START_TIMEOUT_S = 60.0  # importing numpy + the student's module in a fresh interpreter
_HEADER = struct.Struct("<Q")  # frame = 8-byte length + pickle


def send_frame(stream: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def recv_frame(stream: IO[bytes]) -> Any:
    """The next object, or raises EOFError when the other side is gone."""
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError
    size = _HEADER.unpack(head)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


# ---- child side -------------------------------------------------------------------------------
def _student_frame(exc: BaseException) -> str:
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if "milestone07" not in frame.filename:
            return f" (at {os.path.basename(frame.filename)}:{frame.lineno})"
    return ""


def _stub_place(exc: BaseException, module: Any) -> str:
    """The qualname of the innermost frame of `exc` in the student's file ("" if none)."""
    own = os.path.abspath(getattr(module, "__file__", "") or "")
    place, tb = "", exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if os.path.abspath(code.co_filename) == own:
            place = getattr(code, "co_qualname", code.co_name)
        tb = tb.tb_next
    return place


def _not_implemented(exc: BaseException, module: Any, phase: str) -> dict[str, Any]:
    return {
        "status": "not_implemented",
        "error": f"NotImplementedError: {exc}",
        "stub": _stub_place(exc, module),
        "phase": phase,
    }


def _call(module: Any, req: dict[str, Any]) -> dict[str, Any]:
    """Call module.<fn>(*args, **kwargs) with ndarrays wrapped as Tensors; report, never raise.

    With req["grad"] (an ndarray shaped like the output), the array arguments require grad and
    `out.backward(grad)` runs after the call; the reply's "grads" holds each argument's `.grad`.
    """
    from tinytorch.core.tensor import Tensor
    from tinytorch.milestone07 import audit

    audited = bool(req.get("audit"))
    grad = req.get("grad")
    args, watched = [], []  # watched: (arg index, the array handed over, a pristine copy)
    for i, value in enumerate(req["args"]):
        if isinstance(value, np.ndarray):
            wrap = Tensor.wrap if value.dtype == np.float32 else Tensor  # ours: no copy needed
            t = wrap(value, requires_grad=grad is not None)
            if audited:
                t.data = t.data.view(audit.AuditArray)
            watched.append((i, t.data, t.data.copy()))
            args.append(t)
        else:
            args.append(value)
    fn = getattr(module, req["fn"])
    audit.RECORDS.clear()
    sink = io.StringIO()  # the student's prints would garble the terminal report
    start = time.perf_counter()
    try:
        with (
            contextlib.redirect_stdout(sink),
            np.errstate(all="ignore"),
            audit.patched_numpy() if audited else contextlib.nullcontext(),
        ):
            out = fn(*args, **req.get("kwargs", {}))
    except NotImplementedError as exc:
        return _not_implemented(exc, module, "forward")
    except BaseException as exc:  # noqa: BLE001 (untrusted code may raise even SystemExit)
        return {
            "status": "raised",
            "error": f"{type(exc).__name__}: {exc}{_student_frame(exc)}",
            "seconds": time.perf_counter() - start,
        }
    seconds = time.perf_counter() - start
    reply: dict[str, Any] = {
        "seconds": seconds,
        "mutated": [i for i, arr, snap in watched if not np.array_equal(arr, snap, equal_nan=True)],
        "records": list(audit.RECORDS),
    }
    data = out.data if isinstance(out, Tensor) else None
    if data is None and type(out).__name__ == "Tensor":  # a student's own Tensor class
        data = getattr(out, "data", None)
    if not isinstance(data, np.ndarray):
        kind = type(out).__module__ + "." + type(out).__qualname__
        reply.update(status="not_tensor", type=kind.replace("builtins.", ""))
        return reply
    reply.update(status="ok", output=np.array(data, copy=True, subok=False))
    if grad is not None:
        reply.update(_backward(module, out, grad, args))
    return reply


def _backward(module: Any, out: Any, grad: np.ndarray, args: list[Any]) -> dict[str, Any]:
    """Run out.backward(grad) and collect each argument's gradient (None where it has none)."""
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), np.errstate(all="ignore"):
            out.backward(grad)
    except NotImplementedError as exc:
        return _not_implemented(exc, module, "backward")
    except BaseException as exc:  # noqa: BLE001 (the student's backward is untrusted too)
        return {
            "status": "raised",
            "phase": "backward",
            "error": f"in backward: {type(exc).__name__}: {exc}{_student_frame(exc)}",
        }
    grads = []
    for a in args:
        g = getattr(a, "grad", None) if hasattr(a, "requires_grad") else None
        grads.append(None if g is None else np.array(g, copy=True, subok=False))
    return {"grads": grads}


def _task(module: Any, req: dict[str, Any]) -> dict[str, Any]:
    """Run one of our own functions (Part B timings) in the child: req["task"] = "module:function"."""
    import importlib

    mod_name, fn_name = req["task"].split(":")
    fn = getattr(importlib.import_module(mod_name), fn_name)
    try:
        with np.errstate(all="ignore"):
            return {"status": "ok", "value": fn(module, **req.get("kwargs", {}))}
    except BaseException as exc:  # noqa: BLE001 (it may call the student's code)
        return {"status": "raised", "error": f"{type(exc).__name__}: {exc}{_student_frame(exc)}"}


def worker_main(impl: str | None) -> None:
    """Child process: import the student's module, then answer requests until stdin closes."""
    from tinytorch.milestone07.impl import load_impl

    requests = os.fdopen(os.dup(0), "rb")  # the protocol keeps the real stdin and stdout ...
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # ... so a student's input() reads nothing rather than our requests
    os.dup2(2, 1)  # ... and anything printed (Python or C) goes to stderr instead
    sys.stdin = open(os.devnull)  # noqa: SIM115 (lives as long as the process)
    sys.stdout = sys.stderr
    if impl is None:
        module, info = None, {"status": "ok", "error": "", "functions": {}, "file": ""}
    else:
        module, info = load_impl(impl)
    send_frame(replies, info)
    while True:
        try:
            req = recv_frame(requests)
        except EOFError:
            return
        if req is None:
            return
        send_frame(replies, _task(module, req) if "task" in req else _call(module, req))


# ---- parent side ------------------------------------------------------------------------------
def _death(exitcode: int | None) -> str:
    if exitcode is None:
        return "the child process stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"the child process died with {name}"
    return f"the child process exited with status {exitcode}"


def _child_env() -> dict[str, str]:
    """The parent's environment, with its import path, so the child finds what the parent finds."""
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[2])  # the folder holding the tinytorch package
    paths = [here] + [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def _pump(stream: IO[bytes], inbox: queue.Queue) -> None:
    """Reader thread: every frame from the child into `inbox`, then EOFError when it is gone."""
    while True:
        try:
            inbox.put(recv_frame(stream))
        except (EOFError, OSError, pickle.UnpicklingError, ValueError):
            inbox.put(EOFError)
            return


class Sandbox:
    """One child process running the student's module; restarted after a timeout or crash."""

    def __init__(self, impl: str | None, env: dict[str, str] | None = None) -> None:
        self.impl = impl
        self.env = env or {}  # extra environment variables for the child
        self.info: dict[str, Any] | None = None  # what loading the module found, first start
        self.restarts = 0
        self._proc: subprocess.Popen | None = None
        self._inbox: queue.Queue = queue.Queue()

    def __enter__(self) -> Sandbox:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> dict[str, Any]:
        """Start the child (if needed) and return what loading the module found."""
        if self._proc is not None and self._proc.poll() is None:
            return self.info or {}
        cmd = [sys.executable, "-m", "tinytorch.milestone07.sandbox"]
        cmd += [] if self.impl is None else [self.impl]
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # the student's prints and warnings
            env=_child_env() | self.env,
        )
        self._inbox = queue.Queue()
        threading.Thread(target=_pump, args=(self._proc.stdout, self._inbox), daemon=True).start()
        if self.info is not None:
            self.restarts += 1
        info = self._receive(START_TIMEOUT_S)
        if info.get("transport"):  # the import itself hung or crashed
            info = {"status": "import_" + info["status"], "error": info["error"], "functions": {}}
        if self.info is None:
            self.info = info
        return info

    def _receive(self, timeout: float) -> dict[str, Any]:
        try:
            reply = self._inbox.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            return {"status": "timeout", "error": f"no answer within {timeout:g} s", "transport": 1}
        if reply is EOFError:
            code = self._proc.wait(5) if self._proc is not None else None
            self.kill()
            return {"status": "crash", "error": _death(code), "transport": 1}
        return reply

    def request(self, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request; the reply, or {"status": "timeout" | "crash", "error": why}."""
        info = self.start()
        if info.get("status") != "ok" and ("task" not in req or "import_" in info["status"]):
            return {"status": "unloadable", "error": info.get("error", "")}
        try:
            send_frame(self._proc.stdin, req)
        except OSError:
            return self._receive(5.0)  # the child died: report how
        return self._receive(timeout)

    def kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()

    def close(self) -> None:
        """Ask the child to exit (end of stdin), then make sure it has."""
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(2)
        self.kill()


if __name__ == "__main__":
    worker_main(sys.argv[1] if len(sys.argv) > 1 else None)
