"""torch in a child process (for `tito bench`), on the same sandbox and wire as the grader.

Why a separate process: torch bundles its own libgomp. Loaded next to the system libgomp that the
C++ kernels link, two OpenMP runtimes share two cores, and their idle spinning threads steal time
from each other. The benchmark keeps torch out of its own process and asks this worker, one timed
call at a time, so torch and the C++ kernels are still interleaved in time.

`TorchWorker` starts a `tinytorch.milestone07.sandbox.Sandbox` without student code and sends it
task requests (the data-only wire format, with a timeout on every reply) that run `task` here:
  {"op": "gemm", "n": 512, "threads": 2}               -> {"seconds": ...}
  {"op": "bias_gelu", "rows": 512, "cols": 1024, "threads": 2, "inplace": true}
  {"op": "simd_gemm", "n": 1024, "threads": 2}          -> C++ GEMM timed with torch loaded and used,
                                                            and its OpenMP team size
  {"op": "info"}                                         -> {"torch": version, "threads": n}
"""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any

TASK = "tinytorch.extensions.torch_worker:task"
REQUEST_TIMEOUT_S = 600.0  # one timed request, however large

from tinytorch.profiling import per_call

from . import TORCH_MISSING


def handle(req: dict[str, Any], torch: Any, tensors: Any) -> dict[str, Any]:
    """Answer one request (see the module docstring)."""
    from tinytorch.extensions.benchmark import _per_call as _seconds

    op = req.get("op")
    if op == "info":
        return {"torch": torch.__version__, "threads": torch.get_num_threads()}
    if op == "gemm":
        torch.set_num_threads(int(req["threads"]))
        n = int(req["n"])
        a, b, c = tensors(("gemm", n), (n, n), (n, n), (n, n))
        return {"seconds": _seconds(lambda: torch.mm(a, b, out=c))}
    if op == "bias_gelu":
        torch.set_num_threads(int(req["threads"]))
        rows, cols = int(req["rows"]), int(req["cols"])
        x, bias, y = tensors(("gelu", rows, cols), (rows, cols), (cols,), (rows, cols))
        gelu_ = getattr(torch._C._nn, "gelu_", None)  # in place: no allocation, like ours

        def run() -> Any:
            if gelu_ is None or not req.get("inplace", True):  # as usually written: allocates
                return torch.nn.functional.gelu(x + bias, approximate="tanh")
            return gelu_(torch.add(x, bias, out=y), approximate="tanh")

        return {"seconds": _seconds(run)}
    if op == "simd_gemm":
        from tinytorch.extensions import simd

        n, threads = int(req["n"]), int(req["threads"])
        torch.set_num_threads(2)
        (ta,) = tensors(("simd", n), (n, n))
        a = ta.numpy()
        repeats = int(req.get("repeats", 5))
        timing = per_call(
            lambda: simd.matmul(a, a, threads=threads),
            warmup=0,
            min_time=0.0,
            min_calls=repeats,
            max_calls=repeats,
            before=lambda _i: torch.mm(ta, ta),  # torch's OpenMP pool has just run, spinning down
        )
        torch.set_num_threads(1)  # changes the process-wide OpenMP default (shared libgomp)
        team = simd.team_size(threads)  # our regions pass num_threads, so they keep `threads`
        torch.set_num_threads(2)
        return {"seconds": timing.median, "team_size_after_torch_1_thread": team}
    return {"error": f"unknown op {op!r}"}


_STATE: dict[str, Any] = {}  # in the child: torch, its generator and the cached tensors


def task(module: Any, *, req: dict[str, Any]) -> dict[str, Any]:
    """The sandbox task: answer one request (module is None: no student code here)."""
    if "torch" not in _STATE:
        import torch

        _STATE.update(torch=torch, cache={}, gen=torch.Generator().manual_seed(0))
    torch, cache = _STATE["torch"], _STATE["cache"]

    def tensors(key: tuple, *shapes: tuple[int, ...]) -> list[Any]:
        if key not in cache:
            cache.clear()  # keep one problem's buffers at a time
            cache[key] = [torch.randn(*s, generator=_STATE["gen"]) for s in shapes]
        return cache[key]

    try:
        return handle(req, torch, tensors)
    except Exception as exc:  # noqa: BLE001 - report, keep serving
        return {"error": f"{type(exc).__name__}: {exc}"}


class TorchWorker:
    """torch in a child process; `time(req)` returns seconds per call, NaN when it failed."""

    def __init__(self, timeout: float = REQUEST_TIMEOUT_S) -> None:
        self.box: Any = None
        self.reason = ""
        self.version = ""
        self.timeout = timeout
        if importlib.util.find_spec("torch") is None:
            self.reason = TORCH_MISSING
            return
        from tinytorch.milestone07.sandbox import Sandbox

        self.box = Sandbox(None)
        info = self.ask({"op": "info"})
        if info is None or "error" in info:
            self.reason = f"torch worker failed: {(info or {}).get('error', 'no answer')}"
            self.close()
            return
        self.version = info["torch"]

    def ask(self, req: dict[str, Any]) -> dict[str, Any] | None:
        if self.box is None:
            return None
        reply = self.box.request({"task": TASK, "kwargs": {"req": req}}, self.timeout)
        if reply["status"] in ("timeout", "crash", "protocol"):  # killed: not asked again
            self.reason = f"torch worker {reply['status']}: {reply.get('error', '')}"
            self.close()
            return None
        if reply["status"] != "ok":
            return {"error": f"{reply['status']}: {reply.get('error', '')}"}
        value = reply.get("value")
        return value if isinstance(value, dict) else {"error": f"unexpected reply {value!r}"}

    def time(self, req: dict[str, Any]) -> float:
        reply = self.ask(req)
        if not reply or "seconds" not in reply:
            return float("nan")
        return float(reply["seconds"])

    @property
    def ok(self) -> bool:
        return self.box is not None

    def close(self) -> None:
        if self.box is not None:
            self.box.close()
            self.box = None


def main() -> int:
    """`python -m tinytorch.extensions.torch_worker`: start a worker, print its info as JSON."""
    worker = TorchWorker()
    try:
        print(json.dumps(worker.ask({"op": "info"}) or {"error": worker.reason}))
    finally:
        worker.close()
    return 0 if worker.reason == "" else 1


if __name__ == "__main__":
    sys.exit(main())
