"""torch in a child process (for `tito bench`), on the same sandbox and wire as the grader.

Why a separate process: torch bundles its own libgomp. Loaded next to the system libgomp that the
C++ kernels link, two OpenMP runtimes share two cores, and their idle spinning threads steal time
from each other. The benchmark keeps torch out of its own process and asks this worker, one timed
call at a time, so torch and the C++ kernels are still interleaved in time.

`TorchWorker` starts a `tinytorch.sandbox.parent.Sandbox` without student code and sends it
task requests (the data-only wire format, with a timeout on every reply) that run `task` here:
  {"op": "gemm", "n": 512, "threads": 2}               -> {"seconds": ...}
  {"op": "bias_gelu", "rows": 512, "cols": 1024, "threads": 2, "inplace": true}
  {"op": "simd_gemm", "n": 1024, "threads": 2}          -> C++ GEMM timed with torch loaded and used,
                                                            and its OpenMP team size
  {"op": "info"}                                         -> {"torch": version, "threads": n}
Every reply also carries "cpu_s": the child's process_time (all its threads) so far. The
benchmark's LoadMeter counts what the worker used as its own work, not as other processes'.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

TASK = "tinytorch.bench.torch_worker:task"
REQUEST_TIMEOUT_S = 600.0  # one timed request, however large

from tinytorch import profiling
from tinytorch.extensions.probe import TORCH_MISSING, torch_installed
from tinytorch.profiling import per_call


def handle(req: dict[str, Any], torch: Any, tensors: Any) -> dict[str, Any]:
    """Answer one request (see the module docstring): the median of profiling.per_call's samples."""
    op = req.get("op")
    if op == "info":
        return {"torch": torch.__version__, "threads": torch.get_num_threads()}
    if op == "gemm":
        torch.set_num_threads(int(req["threads"]))
        n = int(req["n"])
        a, b = tensors(("gemm", n), lambda: profiling.gemm(n).inputs())
        c = torch.empty(n, n)
        return {"seconds": per_call(lambda: torch.mm(a, b, out=c)).median}
    if op == "bias_gelu":
        torch.set_num_threads(int(req["threads"]))
        rows, cols = int(req["rows"]), int(req["cols"])
        x, bias = tensors(("gelu", rows, cols), lambda: profiling.bias_gelu(rows, cols).inputs())
        y = torch.empty(rows, cols)
        gelu_ = getattr(torch._C._nn, "gelu_", None)  # in place: no allocation, like ours

        def run() -> Any:
            if gelu_ is None or not req.get("inplace", True):  # as usually written: allocates
                return torch.nn.functional.gelu(x + bias, approximate="tanh")
            return gelu_(torch.add(x, bias, out=y), approximate="tanh")

        return {"seconds": per_call(run).median}
    if op == "simd_gemm":
        from tinytorch.extensions import simd

        n, threads = int(req["n"]), int(req["threads"])
        torch.set_num_threads(2)
        ta, tb = tensors(("gemm", n), lambda: profiling.gemm(n).inputs())
        a, b = ta.numpy(), tb.numpy()
        repeats = int(req.get("repeats", 5))
        timing = per_call(
            lambda: simd.matmul(a, b, threads=threads),
            warmup=0,
            min_time=0.0,
            min_calls=repeats,
            max_calls=repeats,
            before=lambda _i: torch.mm(ta, tb),  # torch's OpenMP pool has just run, spinning down
        )
        torch.set_num_threads(1)  # changes the process-wide OpenMP default (shared libgomp)
        team = simd.team_size(threads)  # our regions pass num_threads, so they keep `threads`
        torch.set_num_threads(2)
        return {"seconds": timing.median, "team_size_after_torch_1_thread": team}
    return {"error": f"unknown op {op!r}"}


_STATE: dict[str, Any] = {}  # in the child: torch and the cached input tensors


def task(module: Any, *, req: dict[str, Any]) -> dict[str, Any]:
    """The sandbox task: answer one request (module is None: no student code here)."""
    if "torch" not in _STATE:
        import torch

        _STATE.update(torch=torch, cache={})
    torch, cache = _STATE["torch"], _STATE["cache"]

    def tensors(key: tuple, inputs: Any) -> list[Any]:
        """The problem's inputs (tinytorch.profiling.problems) as tensors, kept for the next call."""
        if key not in cache:
            cache.clear()  # keep one problem's inputs at a time
            cache[key] = [torch.from_numpy(v) for v in inputs()]
        return cache[key]

    try:
        reply = handle(req, torch, tensors)
    except Exception as exc:  # noqa: BLE001 - report, keep serving
        reply = {"error": f"{type(exc).__name__}: {exc}"}
    return reply | {"cpu_s": time.process_time()}


class TorchWorker:
    """torch in a child process; `time(req)` returns seconds per call, NaN when it failed.

    `cpu_s`: the CPU seconds the child had used at its last reply (for LoadMeter's helper_cpu).
    """

    def __init__(self, timeout: float = REQUEST_TIMEOUT_S) -> None:
        self.box: Any = None
        self.cpu_s = 0.0
        self.reason = ""
        self.version = ""
        self.timeout = timeout
        if not torch_installed():
            self.reason = TORCH_MISSING
            return
        from tinytorch.sandbox.parent import Sandbox

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
        if not isinstance(value, dict):
            return {"error": f"unexpected reply {value!r}"}
        if isinstance(value.get("cpu_s"), (int, float)):
            self.cpu_s = float(value["cpu_s"])
        return value

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
    """`python -m tinytorch.bench.torch_worker`: start a worker, print its info as JSON."""
    worker = TorchWorker()
    try:
        print(json.dumps(worker.ask({"op": "info"}) or {"error": worker.reason}))
    finally:
        worker.close()
    return 0 if worker.reason == "" else 1


if __name__ == "__main__":
    sys.exit(main())
