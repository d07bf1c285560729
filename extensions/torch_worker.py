"""A child process that times torch (and, for the thread check, the C++ kernels beside torch).

Why a separate process: torch bundles its own libgomp. Loaded next to the system libgomp that the
C++ kernels link, two OpenMP runtimes share two cores, and their idle spinning threads steal time
from each other. The benchmark keeps torch out of its own process and asks this worker, one timed
call at a time, so torch and the C++ kernels are still interleaved in time.

Protocol: one JSON request per stdin line, one JSON reply per stdout line.
  {"op": "gemm", "n": 512, "threads": 2}               -> {"seconds": ...}
  {"op": "bias_gelu", "rows": 512, "cols": 1024, "threads": 2, "inplace": true}
  {"op": "simd_gemm", "n": 1024, "threads": 2}          -> C++ GEMM timed with torch loaded and used,
                                                            and its OpenMP team size
  {"op": "info"}                                         -> {"torch": version, "threads": n}
"""

from __future__ import annotations

import json
import sys
from typing import Any

from tinytorch.extensions.benchmark import _per_call as _seconds

from tinytorch.profiling import per_call


def handle(req: dict[str, Any], torch: Any, tensors: Any) -> dict[str, Any]:
    """Answer one request (see the module docstring)."""
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


def main() -> int:
    import torch

    cache: dict[tuple, Any] = {}
    gen = torch.Generator().manual_seed(0)

    def tensors(key: tuple, *shapes: tuple[int, ...]) -> list[Any]:
        if key not in cache:
            cache.clear()  # keep one problem's buffers at a time
            cache[key] = [torch.randn(*s, generator=gen) for s in shapes]
        return cache[key]

    for line in sys.stdin:
        try:
            reply = handle(json.loads(line), torch, tensors)
        except Exception as exc:  # noqa: BLE001 - report, keep serving
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
