"""What `Tensor(data)` always copying costs the grader: Part A's call path, and Part B.

    python benchmarks/bench_tensor_copy.py [--rounds 15] [--sizes default|quick]

`Tensor(data)` copies, as in the course. The grader's own code takes the explicit view path,
`Tensor.wrap`, everywhere but one place: the sandbox child (sandbox/child/main.py, `_Child.call`)
hands each input array to the student's function as `Tensor(value)`, a copy. Part B builds its
inputs' Tensors before timing, so its timed figures should not move (expected ~0).

1. Part A: `run_part_a` on the bundled reference (practice mode: the 30 cases and every deeper
   check), `--rounds` runs after one untimed run: the wall time a student waits for a verdict.
2. The sandbox's call path: the call requests of that untimed run are recorded, then replayed in
   this process through `_Child.call`, with `Tensor(value)` copying as always vs sharing the array
   as `Tensor.wrap(value)` does, in interleaved rounds (round r's two replays saw the same load).
   The copy's cost is the median over rounds of (copying - sharing), and its share of step 1.
   Napkin math: a practice run makes 47 calls that hand over 84 arrays, 0.7 MB in all (printed
   as "handed over"); at a copy bandwidth of ~10 GB/s that is ~0.1 ms, plus ~1 us per Tensor
   made, against a run of about a second: the copy should cost Part A well under 1 %.
3. Part B: the student rows (Part B's own tasks and sizes, part_b.SIZES) on the reference, each
   task's timed median with Tensor(data) copying vs sharing, in interleaved rounds.

Correctness first: the replay must give the recorded run's statuses in both modes, and every
Part B task must time "ok". Timing is tinytorch.profiling's (per_call, interleaved,
interleaved_calls); nothing here has its own timing loop. The switch is global while it is on:
any other `Tensor(data)` of a float32 array made meanwhile shares too.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tinytorch.bench import part_b
from tinytorch.bench.tasks import TASKS
from tinytorch.core.tensor import Tensor
from tinytorch.milestone07 import run_part_a
from tinytorch.perf import acceleration
from tinytorch.profiling import Timing, interleaved, interleaved_calls, per_call
from tinytorch.sandbox.child.audit import Guard
from tinytorch.sandbox.child.main import _Child
from tinytorch.sandbox.parent import Sandbox

REFERENCE = "tinytorch.perf.acceleration"
MODES = ("copying", "sharing")


@contextlib.contextmanager
def tensors(mode: str) -> Iterator[None]:
    """Inside, `Tensor(data)` of a float32 ndarray shares it as `Tensor.wrap(data)` does
    ("sharing"), or copies it as always ("copying": both modes enter the same context)."""
    copying = Tensor.__init__

    def sharing(self: Tensor, data: Any, requires_grad: bool = False) -> None:
        if isinstance(data, np.ndarray) and data.dtype == np.float32:
            self.data, self.requires_grad = data, bool(requires_grad)
            self.grad, self._grad_fn = None, None
        else:
            copying(self, data, requires_grad)

    Tensor.__init__ = sharing if mode == "sharing" else copying  # type: ignore[method-assign]
    try:
        yield
    finally:
        Tensor.__init__ = copying  # type: ignore[method-assign]


def recorded_part_a(timeout: float) -> tuple[Any, list[tuple[dict[str, Any], str]]]:
    """One run_part_a on the reference, and each call request it sent with its reply's status."""
    calls: list[tuple[dict[str, Any], str]] = []
    send = Sandbox.request

    def recording(self: Sandbox, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        reply = send(self, req, timeout)
        if "task" not in req:
            calls.append((req, reply["status"]))
        return reply

    Sandbox.request = recording  # type: ignore[method-assign]
    try:
        result = run_part_a(REFERENCE, timeout=timeout)
    finally:
        Sandbox.request = send  # type: ignore[method-assign]
    return result, calls


def replays(calls: list[tuple[dict[str, Any], str]]) -> dict[str, Callable[[], None]]:
    """Per mode, one replay of every recorded request through the child's call path."""
    child = _Child(acceleration, os.path.realpath(acceleration.__file__), Guard(), None)

    def replay(mode: str) -> Callable[[], None]:
        def run() -> None:
            with tensors(mode):
                for req, _status in calls:
                    child.call(req)

        return run

    for mode in MODES:  # the same answers as the sandbox gave, in both modes
        with tensors(mode):
            got = [child.call(req)["status"] for req, _status in calls]
        if got != [status for _req, status in calls]:
            sys.exit(f"bench_tensor_copy: replaying with Tensor(data) {mode} changed the replies")
    return {mode: replay(mode) for mode in MODES}


def student_rows(sizes: str) -> dict[str, Callable[[str], float]]:
    """Part B's student rows on the reference: (mode) -> the task's timed median, in seconds."""
    (group,) = [g for name, _env, _status, g in part_b.CHILDREN if name == "student"]
    rows = {}
    for backend, tasks in group.items():
        for kind, task in tasks.items():
            for problem, repeats in part_b.SIZES[sizes].get(kind, []):

                def timed(mode: str, task=task, problem=problem, repeats=repeats) -> float:
                    with tensors(mode):
                        value = TASKS[task](
                            acceleration, repeats=repeats, **part_b.task_kwargs(problem)
                        )
                    if value["status"] != "ok":
                        sys.exit(f"bench_tensor_copy: {task} on {problem.name}: {value}")
                    return value["ms"] * 1e-3

                rows[f"{backend}, {problem.name}"] = timed
    return rows


def paired(t: dict[str, Timing]) -> float:
    """Median over rounds of (copying - sharing), seconds: round r's two samples share its load."""
    return statistics.median(
        c - s for c, s in zip(t["copying"].samples, t["sharing"].samples, strict=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="timed runs / rounds per figure")
    parser.add_argument(
        "--sizes", choices=sorted(part_b.SIZES), default="default", help="Part B's problem sizes"
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="Part A's per-case timeout")
    args = parser.parse_args()

    result, calls = recorded_part_a(args.timeout)  # also the untimed first run
    if result.verdict != "PASS":
        sys.exit(f"bench_tensor_copy: the reference did not PASS Part A: {result.verdict}")
    wall = per_call(
        lambda: run_part_a(REFERENCE, timeout=args.timeout),
        warmup=0,
        min_time=0.0,
        min_calls=args.rounds,
        max_calls=args.rounds,
    )
    handed = sum(a.nbytes for req, _s in calls for a in req["args"] if isinstance(a, np.ndarray))
    made = sum(isinstance(a, np.ndarray) for req, _s in calls for a in req["args"])
    print(
        f"Part A, run_part_a on the reference ({len(result.cases)} cases, {len(result.checks)} "
        f"checks): median {wall.median:.2f} s, best {wall.min:.2f} s over {args.rounds} run(s)"
    )
    print(
        f"the sandbox's call path: {len(calls)} calls, {made} Tensors made from "
        f"{handed / 1e6:.1f} MB handed over per run, replayed in-process, {args.rounds} "
        "interleaved round(s)"
    )
    t = interleaved_calls(replays(calls), args.rounds)
    for mode, label in zip(
        MODES, ("Tensor(value) copies", "Tensor.wrap(value) shares"), strict=True
    ):
        print(
            f"  {label:<26} median {t[mode].median * 1e3:8.2f} ms   best {t[mode].min * 1e3:8.2f} ms"
        )
    cost = paired(t)
    print(
        f"  the copy costs {cost * 1e3:+.2f} ms per run (median of per-round differences), "
        f"{cost / wall.median * 100:+.2f} % of Part A's wall time"
    )

    print(
        f"Part B, the student rows on the reference ({args.sizes} sizes): each task's timed "
        f"median, {args.rounds} interleaved round(s)"
    )
    rows = student_rows(args.sizes)
    width = max(map(len, rows)) + 2
    for name, timed in rows.items():
        fns = {mode: lambda mode=mode, timed=timed: timed(mode) for mode in MODES}
        t = interleaved(fns, args.rounds)
        diff = paired(t)
        print(
            f"  {name:<{width}}copying {t['copying'].median * 1e3:8.3f} ms  sharing "
            f"{t['sharing'].median * 1e3:8.3f} ms  difference {diff * 1e3:+.3f} ms "
            f"({diff / t['sharing'].median * 100:+.1f} %)"
        )


if __name__ == "__main__":
    main()
