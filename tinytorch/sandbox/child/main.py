"""The sandbox child: contain itself, import the student's module, answer requests.

Started by `Sandbox` (tinytorch/sandbox/parent.py) through its boot code. The packages on the way
here import nothing of the grader, so the child never loads the grader or the float64 references
(tests/test_boundary.py checks it). Order matters: parent-death signal, rlimits, stdio to /dev/null, (as root) the mounts
that keep Python readable and the uid drop, the private folder, the audit's guard, the
grading-mode import blocker, and only then the student's module.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from typing import Any

import numpy as np

from tinytorch.sandbox.child import confine, exports, protocol
from tinytorch.sandbox.child.confine import ChildLimits

TEXT_CAP = 20000  # characters of any string in a reply (the parent's schema checks it)


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_CAP // 2 else text[: TEXT_CAP // 2 - 3] + "..."


def _student_frame(exc: BaseException) -> str:
    import traceback

    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if "milestone07" not in frame.filename:
            return f" (at {os.path.basename(frame.filename)}:{frame.lineno})"
    return ""


def _describe_exc(exc: BaseException) -> str:
    try:
        return _cut(f"{type(exc).__name__}: {exc}{_student_frame(exc)}")
    except BaseException:  # noqa: BLE001 (a student exception whose __str__ raises)
        return f"{type(exc).__name__}: <unprintable>"


def _qualname(code: Any, frame: Any) -> str:
    name = getattr(code, "co_qualname", None)
    if name:
        return name
    owner = frame.f_locals.get("self")  # 3.10: co_name plus the class of self
    return f"{type(owner).__name__}.{code.co_name}" if owner is not None else code.co_name


def _stub(exc: BaseException, student_file: str) -> str:
    """The innermost traceback frame inside the student's file, as 'Class.method' or 'function'."""
    found, tb = "", exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if student_file and exports.compiled_in(code, student_file):
            found = _qualname(code, tb.tb_frame)
        tb = tb.tb_next
    return found


class _Child:
    """State of the child process between requests."""

    def __init__(self, module: Any, student_file: str, guard: Any, refuse: Any) -> None:
        from tinytorch.core.tensor import Tensor
        from tinytorch.sandbox.child import audit

        self.module = module
        self.student_file = student_file
        self.guard = guard
        self.refuse = refuse  # the grading-mode import blocker, or None
        self.tensor = Tensor  # bound now: in grading mode our modules leave sys.modules
        self.tasks: dict[str, Any] = {}  # Part B's TASKS, copied at boot when asked for
        self.audit = audit

    def not_implemented(self, exc: BaseException, **extra: Any) -> dict[str, Any]:
        return {
            "status": "not_implemented",
            "error": _cut(f"NotImplementedError: {exc}"),
            "stub": _stub(exc, self.student_file),
            **extra,
        }

    def call(self, req: dict[str, Any]) -> dict[str, Any]:
        """Call module.<fn>(*args, **kwargs) with ndarrays wrapped as Tensors; report, never raise."""
        Tensor, audit = self.tensor, self.audit
        grad = req.get("grad")
        args: list[Any] = []
        tensors: list[Any] = []  # the Tensor handed over for each arg, or None
        for value in req["args"]:
            if isinstance(value, np.ndarray):
                t = Tensor(value, requires_grad=grad is not None)
                # Every call, audited or not, gets the same array class and the same NumPy: a
                # kernel must not be able to tell when it is watched (tile only for the audit).
                t.data = t.data.view(audit.AuditArray)
                tensors.append(t)
                args.append(t)
            else:
                tensors.append(None)
                args.append(value)
        handed = [t.data if t is not None else None for t in tensors]
        audit.reset(handed)  # every call alike: the child does not know which are audited
        start = time.perf_counter()
        try:
            fn = self.module
            for part in str(req["fn"]).split("."):  # "im2col" or "Im2colConv2dFunction.apply"
                fn = getattr(fn, part)
            with (
                np.errstate(all="ignore"),
                audit.patched_numpy(),
            ):
                out = fn(*args, **req.get("kwargs", {}))
        except NotImplementedError as exc:
            return self.not_implemented(exc, phase="forward")
        except BaseException as exc:  # noqa: BLE001 (untrusted code may raise even SystemExit)
            return {"status": "raised", "error": _describe_exc(exc), "phase": "forward",
                    "seconds": time.perf_counter() - start}  # fmt: skip
        seconds = time.perf_counter() - start
        reply: dict[str, Any] = {"seconds": seconds}
        reply["inputs"] = [_plain_array(a) for a in handed]  # the parent judges mutation
        recs, slices, boxes, dropped = self.guard.records()
        reply.update(records=recs, slices=slices, boxes=boxes, records_dropped=dropped)
        tampered = self.guard.check()
        if tampered:
            reply["tampered"] = tampered
        data = out.data if isinstance(out, Tensor) else None
        if data is None and type(out).__name__ == "Tensor":  # a student's own Tensor class
            data = getattr(out, "data", None)
        if not isinstance(data, np.ndarray) or data.dtype.str not in protocol.DTYPES:
            kind = type(out).__module__ + "." + type(out).__qualname__
            if isinstance(data, np.ndarray):
                kind += f" holding {data.dtype} data"
            reply.update(status="not_tensor", type=_cut(kind.replace("builtins.", "")))
            return reply
        reply.update(status="ok", output=np.array(data, copy=True, subok=False))
        if grad is not None:
            try:
                with np.errstate(all="ignore"):
                    out.backward(grad)
            except NotImplementedError as exc:
                return self.not_implemented(exc, phase="backward", seconds=seconds)
            except BaseException as exc:  # noqa: BLE001
                return {"status": "raised", "error": _describe_exc(exc), "phase": "backward",
                        "seconds": seconds}  # fmt: skip
            reply["grads"] = [None if t is None else _plain_array(t.grad) for t in tensors]
        return reply

    def task(self, req: dict[str, Any]) -> dict[str, Any]:
        """Run one of our own Part B functions in the child, fn(module, **kwargs). req["task"] is
        a key of tinytorch.bench.tasks.TASKS (Sandbox(tasks=True)), or "module:function"
        for our own workers that never load student code (the torch worker)."""
        import importlib

        name = str(req["task"])
        try:  # our own task code may import the grader's modules, even while grading
            with self.refuse.paused() if self.refuse else contextlib.nullcontext():
                if ":" in name and self.module is None:  # never after a student's import
                    mod_name, fn_name = name.split(":", 1)
                    fn = getattr(importlib.import_module(mod_name), fn_name)
                else:
                    fn = self.tasks.get(name)  # the registry as it was before the student's import
                    if fn is None:
                        return {"status": "raised", "error": f"unknown task {name!r}"}
                with np.errstate(all="ignore"):
                    value = fn(self.module, **req.get("kwargs", {}))
        except BaseException as exc:  # noqa: BLE001 (it may call the student's code)
            return {"status": "raised", "error": _describe_exc(exc)}
        try:
            value = json.loads(json.dumps(value))  # JSON-able data only
        except (TypeError, ValueError) as exc:
            return {"status": "raised", "error": f"task {name} returned non-JSON data: {exc}"}
        return {"status": "ok", "value": value}


def _plain_array(a: Any) -> np.ndarray | None:
    if isinstance(a, np.ndarray) and a.dtype.str in protocol.DTYPES:
        return np.array(a, copy=True, subok=False)
    data = getattr(a, "data", None)  # a Tensor as .grad
    if isinstance(data, np.ndarray) and data.dtype.str in protocol.DTYPES:
        return np.array(data, copy=True, subok=False)
    return None


class _Refuse:
    """A meta-path finder that refuses the bundled reference and the grader's own modules."""

    def __init__(self, allowed: str, blocked: tuple[str, ...]) -> None:
        self.allowed = allowed
        self.blocked = blocked
        self.off = False

    @contextlib.contextmanager
    def paused(self) -> Any:
        """Our own imports (a Part B task module) go through."""
        self.off = True
        try:
            yield
        finally:
            self.off = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if self.off:
            return
        blocked = self.blocked
        if name != self.allowed and any(name == b or name.startswith(b + ".") for b in blocked):
            raise ImportError(
                f"{name} cannot be imported while grading: the bundled reference solution and "
                "the grader's modules are off limits to a submission",
                name=name,
            )


def _origins(
    module: Any, functions: dict[str, str], student_file: str, reference: tuple[str, ...]
) -> dict[str, str]:
    out = {}
    for name, state in functions.items():
        if state != "ok":
            continue
        obj = getattr(module, name)
        if isinstance(obj, type):  # the graded Function class: judged by its backward
            obj = getattr(obj, "backward", obj)
        code = getattr(getattr(obj, "__func__", obj), "__code__", None)
        owner = getattr(obj, "__module__", None) or "?"
        if owner in reference:
            out[name] = "reference"
        elif code is not None and exports.compiled_in(code, student_file):
            out[name] = "student"
        else:
            out[name] = str(owner)
    return out


def _own_prints(impl: str, work: str) -> set[str]:
    """Fingerprints of the submission's own text: every file of its stage (`work`, which holds
    only what staging copied until the student's code runs) when `impl` was staged there, else
    `impl`'s alone."""
    from tinytorch.sandbox.child.fingerprint import folder_fingerprints, source_fingerprints

    own = source_fingerprints(impl)
    if os.path.dirname(os.path.realpath(impl)) == os.path.realpath(work):
        own |= folder_fingerprints(work)
    return own


def worker_main(cfg: dict[str, Any]) -> None:
    """Child process: contain itself, import the student's module, answer until the pipe closes."""
    from tinytorch.core.tensor import Tensor  # noqa: F401 (ours, imported before the drop)
    from tinytorch.sandbox.child import audit
    from tinytorch.sandbox.child.fingerprint import copies_of  # before grading refuses ours
    from tinytorch.sandbox.child.load import load_impl

    req_fd, rep_fd = int(cfg["req_fd"]), int(cfg["rep_fd"])
    layers: dict[str, list[Any]] = {}
    ok, why = confine.prctl(confine.PR_SET_PDEATHSIG, signal.SIGKILL)
    if ok and os.getppid() == 1 and not cfg.get("ns"):
        os._exit(1)  # the grader is already gone
    layers["pdeathsig"] = [ok, "SIGKILL when the parent dies" if ok else why]
    ids = tuple(cfg["ids"]) if cfg.get("ids") else None
    limits = ChildLimits(**cfg["limits"])
    done = confine.set_limits(limits, ids[0] if ids else None)
    refused = [k for k, v in done.items() if isinstance(v, str) and v.startswith("refused")]
    layers["limits"] = [not refused, json.dumps(done) if not refused else f"refused: {refused}"]
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # a student's input() reads nothing; prints go nowhere
        os.dup2(devnull, fd)
    sys.stdin = open(os.devnull)  # noqa: SIM115 (lives as long as the process)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115
    blocked = confine.blocked_dirs(cfg["needed"]) if ids else {}
    if blocked and cfg.get("ns"):  # e.g. Python under /root: re-expose it in our mount namespace
        exposed, why = confine.expose(blocked, os.path.join(os.path.dirname(cfg["work"]), "stage"))
        layers["mounts"] = [exposed, why]
        blocked = {} if exposed else blocked
    if blocked:
        ids = None
        layers["uid"] = [False, f"kept: {', '.join(blocked)} cannot be read by the sandbox uid"]
        if cfg.get("grading") and os.environ.get("TINYTORCH_TRUSTED_CODE") != "1":
            # fail closed: the parent found isolation possible, but re-exposing Python failed
            # here; the student's module is never imported with the grader's uid (the load
            # fails, and its error names the layer)
            why = f"isolation (uid): {layers.get('mounts', ['', 'no mount namespace'])[1]}"
            protocol.write_frame(rep_fd, 0, {"status": "import_error", "error": why})
            os._exit(1)
    keep = [os.path.dirname(cfg["work"]), *cfg["needed"], cfg.get("caller_dir") or ""]
    if cfg.get("ns") and cfg.get("hide"):  # grading: no copy of the reference to read
        files, checkout = cfg["hide"]["files"], cfg["hide"]["checkout"]
        hidden = confine.hide_reference(files, checkout, keep, [cfg.get("caller_dir") or ""])
        layers["reference"] = list(hidden)
        layers["elsewhere"] = list(confine.hide_elsewhere(keep, dropping=ids is not None))
    if cfg.get("ns"):  # fresh /tmp, /dev/shm, ...: nothing shared with other gradings or runs
        layers["tmp"] = list(confine.private_tmp(keep))
        layers["workdir"] = list(confine.private_workdir(cfg["work"], ids))
    # Always, uid drop or not: no_new_privs cannot be unset and every process the submission
    # starts inherits it, so the grader knows them even after setsid + double fork + env -i.
    nnp, why = confine.prctl(confine.PR_SET_NO_NEW_PRIVS, 1)
    layers["no_new_privs"] = [nnp, "set, inherited by all it starts" if nnp else why]
    try:
        if ids is not None or "uid" not in layers:
            layers["uid"] = list(confine.drop_privileges(ids))
    except OSError as exc:
        protocol.write_frame(
            rep_fd, 0, {"status": "import_error", "error": f"uid drop failed: {exc}"}
        )
        os._exit(1)
    os.chdir(cfg["work"])
    sys.path[:] = [p for p in sys.path if p not in ("", ".")]
    if cfg.get("caller_dir"):  # a module name may live in the caller's folder (after the drop)
        sys.path.append(cfg["caller_dir"])
    guard = audit.Guard()  # bound before the student's module runs
    child = _Child(None, "", guard, None)
    if cfg.get("tasks"):  # before the student's module: patching the registry changes nothing
        import importlib

        mod_name, attr = str(cfg["tasks"]).split(":", 1)
        child.tasks = dict(getattr(importlib.import_module(mod_name), attr))
    if cfg.get("grading"):
        blocked = tuple(cfg.get("blocked") or ())
        for name in list(sys.modules):
            if any(name == b or name.startswith(b + ".") for b in blocked):
                del sys.modules[name]  # our own references stay alive in `child`
        for b in blocked:  # e.g. tinytorch.milestone07, loaded by a task registry
            parent, _, attr = b.rpartition(".")
            with contextlib.suppress(AttributeError, KeyError):
                delattr(sys.modules[parent], attr)
        child.refuse = _Refuse(cfg["impl"] or "", blocked)
        sys.meta_path.insert(0, child.refuse)
    before = set(sys.modules)
    info: dict[str, Any] = {"status": "ok", "error": "", "functions": {}, "file": ""}
    module = None
    impl = cfg["impl"]
    # what the submission's own text defines, before any of it runs (it could rewrite its
    # files): every file staged with it, a folder submission's helpers as well as its main file
    own = (
        _own_prints(impl, cfg["work"])
        if cfg.get("ref_prints") and impl and os.path.isfile(impl)
        else set()
    )
    reference = tuple(cfg.get("reference") or ())
    if impl is not None:
        module, info = load_impl(impl, cfg.get("names") or (), cfg.get("classes") or ())
    student_file = os.path.realpath(info.get("file") or "") if info.get("file") else ""
    info["origins"] = _origins(module, info.get("functions", {}), student_file, reference)
    info["imports_reference"] = any(
        m in sys.modules and m not in before and m != cfg["impl"] for m in reference
    )
    if cfg.get("ref_prints"):  # grading: the reference's code, exec'd or copied, is not theirs
        info["copies_reference"] = copies_of(cfg["ref_prints"], own)
    info["layers"] = layers
    info["error"] = _cut(str(info.get("error", "")))
    protocol.write_frame(rep_fd, 0, info)
    child.module, child.student_file = module, student_file
    read = protocol.blocking_reader(req_fd)
    big = protocol.Limits(header=64 << 20, payload=1 << 40)
    while True:
        try:
            msg_id, req = protocol.read_frame(read, big)
        except (EOFError, OSError, protocol.ProtocolError):
            os._exit(0)
        if req.get("stop"):
            os._exit(0)
        try:
            reply = child.task(req) if "task" in req else child.call(req)
        except BaseException as exc:  # noqa: BLE001 (e.g. a student Tensor whose .data raises)
            reply = {"status": "raised", "error": _describe_exc(exc)}
        try:
            protocol.write_frame(rep_fd, msg_id, reply)
        except protocol.ProtocolError as exc:  # e.g. a grad of an unsendable dtype
            protocol.write_frame(
                rep_fd, msg_id, {"status": "raised", "error": f"unsendable: {exc}"}
            )
