"""Part B, context and never the verdict: the same problems on the student's kernels, NumPy, torch
and the bundled native kernels, each row with its spread, the load seen and its flags.

Three child processes, one after another, each gone before the next starts:
  1. the student's module, alone: only the student's kernels run there;
  2. a clean child that never loaded student code: the machine's ceilings, NumPy, the C++ kernels;
  3. a clean child for torch, MPS and Triton (torch's libgomp would skew the C++ timings; OpenBLAS
     runs on one thread there, it only computes float64 checks).
Flags (results.BenchRow.flags):
  - "incorrect": the student's kernel failed Part A: timed, but not credited (no rate);
  - "not_credible": a rate (any CPU backend's) above 1.2 x the measured ceiling (profiling.credible),
    or a student's child claiming more timed seconds than the parent saw pass: withheld with the
    reason, not credited, not plotted;
  - "noisy": the samples disagree (spread), other processes kept cores busy, or a baseline came
    out slower than the student's kernel. Rerun Part B alone on a quieter machine.
Ceilings are measured in single rounds spread over the run, between the rows they bound (in the
clean children only: the student's child could forge them): when the baseline child starts (just
after the student's rows), after each of its backends, and when the torch child starts (before
torch loads). Each figure is the best of its rounds; one whose rounds disagree is marked "moved".
The copy is of an array the size of the smallest memory-bound problem: rows that run from cache
are bounded by a copy that does too.
`progress`, when given, gets one line per row as it is timed (bench.report.progress_line).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection
from typing import Any

from tinytorch import profiling
from tinytorch.bench.report import busy_sentence, progress_line
from tinytorch.bench.tasks import TASKS
from tinytorch.milestone07.boundary import open_sandbox
from tinytorch.milestone07.cases import DEFAULT_IMPL
from tinytorch.milestone07.results import BENCH_STATUSES, BenchRow, PartAResult, PartBResult
from tinytorch.profiling.credible import (
    CREDIBLE,
    above_ceiling,
    above_ceiling_reason,
    bounded_by_cpu,
)
from tinytorch.profiling.load import NOISY_LOAD
from tinytorch.profiling.problems import Problem
from tinytorch.sandbox.parent import Sandbox

__all__ = ["CREDIBLE", "flag_rows", "run_part_b"]  # CREDIBLE: profiling.credible's, re-exported
SIZES = {
    # kind -> [(problem, min repeats)]; "gelu" is the fusion lesson: unfused vs fused vs C++
    "default": {
        "gemm": [(profiling.gemm(256), 5), (profiling.gemm(1024), 3)],
        "bias_gelu": [(profiling.bias_gelu(512, 1024), 5), (profiling.bias_gelu(2048, 2048), 3)],
        "gelu": [(profiling.gelu(2048, 2048), 3)],
    },
    "quick": {
        "gemm": [(profiling.gemm(256), 3)],
        "bias_gelu": [(profiling.bias_gelu(512, 1024), 3)],
        "gelu": [(profiling.gelu(512, 1024), 3)],
    },
}
QUIET_BLAS = {"OPENBLAS_NUM_THREADS": "1"}
# (child, extra env, status tasks, {backend: {kind: task}}); every task is a TASKS key.
CHILDREN: tuple[tuple[str, dict[str, str], tuple[str, ...], dict[str, dict[str, str]]], ...] = (
    (
        "student",
        {},
        (),
        {
            "student": {"gemm": "student_gemm", "bias_gelu": "student_bias_gelu"},
            "student unfused_gelu": {"gelu": "student_unfused_gelu"},
            "student fused_gelu": {"gelu": "student_fused_gelu"},
        },
    ),
    (
        "baseline",
        {},
        ("simd_status",),
        {
            "numpy": {"gemm": "numpy_gemm", "bias_gelu": "numpy_bias_gelu"},
            "c++ simd": {
                "gemm": "simd_gemm",
                "bias_gelu": "simd_bias_gelu",
                "gelu": "simd_fused_gelu",
            },
        },
    ),
    (
        "torch",
        QUIET_BLAS,
        ("accel_status",),
        {
            "torch-cpu": {"gemm": "torch_gemm", "bias_gelu": "torch_bias_gelu"},
            "mps": {"gemm": "mps_gemm"},
            "triton": {"bias_gelu": "triton_bias_gelu"},
        },
    ),
)
STUDENT_FN = {  # the student function behind each student row, as Part A groups name it
    ("student", "gemm"): "tiled_matmul",
    ("student", "bias_gelu"): "fused_gelu",
    ("student fused_gelu", "gelu"): "fused_gelu",
    ("student unfused_gelu", "gelu"): "unfused_gelu",
}
for _child, _env, _status, _group in CHILDREN:  # a typo in a task name fails at import
    for _tasks in _group.values():
        assert all(t in TASKS for t in _tasks.values()), _tasks
    assert all(t in TASKS for t in _status), _status


def task_kwargs(problem: Problem) -> dict[str, int]:
    """A task's size arguments for `problem`: n for a GEMM (n x n x n), m and n otherwise."""
    dims = problem.dims
    return {"n": dims[0]} if problem.kind == "gemm" else {"m": dims[0], "n": dims[1]}


def run_task(box: Sandbox, name: str, timeout: float, **kwargs: Any) -> dict[str, Any]:
    """Run TASKS[name] in the child; the reply gains "wall_s", the seconds the PARENT saw pass."""
    start = time.perf_counter()
    reply = box.request({"task": name, "kwargs": kwargs}, timeout)
    return reply | {"wall_s": time.perf_counter() - start}


def _skipped(fn: str) -> dict[str, Any]:
    why = f"not timed: your {fn} did not finish in Part A"
    return {"status": "ok", "value": {"status": "unavailable", "ms": None, "detail": why}}


def open_box(impl: str | None, env: dict[str, str]) -> Sandbox:
    """A started child; without the student's module if importing it kills the interpreter."""
    box = open_sandbox(impl, env, tasks=True)
    if box.start().get("status") in ("import_crash", "import_timeout"):
        box.close()
        box = open_sandbox(None, env, tasks=True)
        box.start()
    return box


def _malformed(value: Any) -> str | None:
    """Why a task's value (JSON the child made, maybe a student's) is not a timing, or None."""
    if not isinstance(value, dict) or value.get("status") not in BENCH_STATUSES:
        return "no timing status"
    keys = (("ms", 1e-12), ("min_ms", 1e-12), ("spread", 0.0), ("load", 0.0), ("pass_ms", 1e-12))
    for key, least in keys:
        v = value.get(key)
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if v is not None and not (number and math.isfinite(v) and v >= least):
            return f"'{key}' is not a number >= {least:g}"
    if not isinstance(value.get("samples", 0), int) or not isinstance(value.get("detail", ""), str):
        return "'samples' or 'detail' has the wrong type"
    return None


def bench_row(problem: Problem, backend: str, reply: dict[str, Any]) -> BenchRow:
    """One BenchRow from a task's reply: rate from the problem's flops or bytes (numbers)."""
    name, kind = problem.name, problem.kind
    base = {"flops": problem.flops, "bytes": problem.bytes}
    bad = _malformed(reply.get("value")) if reply["status"] == "ok" else None
    if reply["status"] != "ok" or bad:  # the task raised, hung, crashed or sent no timing
        status = "timeout" if reply["status"] == "timeout" else "error"
        why = f"a malformed timing from the child: {bad}" if bad else reply.get("error", "")
        return BenchRow(name, kind, backend, status, None, None, None, why, **base)
    value = reply["value"]
    ms = value.get("ms")
    timed = ms is not None and value["status"] == "ok"
    row = BenchRow(
        name,
        kind,
        backend,
        value["status"],
        ms,
        problem.flops / (ms * 1e-3) / 1e9 if timed and kind == "gemm" else None,
        problem.bytes / (ms * 1e-3) / 1e9 if timed and kind != "gemm" else None,
        value.get("detail", ""),
        value.get("min_ms"),
        int(value.get("samples", 0)),
        spread=value.get("spread"),
        load=value.get("load"),
        pass_ms=value.get("pass_ms") if timed else None,
        **base,
    )
    claimed_s = (row.min_ms or 0.0) * 1e-3 * row.samples  # at least this much was timed
    if timed and backend.startswith("student") and claimed_s > reply.get("wall_s", float("inf")):
        row.flags.append("not_credible")
        row.detail += f"; claims {claimed_s:.3g} s of samples in {reply['wall_s']:.3g} s"
    return row


def rate(row: BenchRow) -> float | None:
    """The row's figure: GFLOP/s for GEMM, GB/s otherwise."""
    return row.gflops if row.kind == "gemm" else row.gbps


def flag_rows(
    rows: list[BenchRow], ceilings: profiling.Ceilings | None, failed: Collection[str]
) -> list[str]:
    """Set every row's flags (see the module docstring); returns the run's warnings."""
    warnings = []
    for r in rows:
        fn = STUDENT_FN.get((r.backend, r.kind))
        if fn is not None and fn in failed and r.status == "ok":
            r.flags.append("incorrect")
        bounded = ceilings is not None and bounded_by_cpu(r.backend)  # a GPU is not bound
        if bounded and rate(r) is not None and "not_credible" not in r.flags:
            compute = r.kind == "gemm"
            ceiling = ceilings.gflops if compute else ceilings.gbps
            if above_ceiling(rate(r), ceiling):  # any backend: a bundled kernel too
                r.flags.append("not_credible")
                unit, name = ("GFLOP/s", "peak") if compute else ("GB/s", "copy bandwidth")
                why = above_ceiling_reason(rate(r), ceiling, unit, name)
                r.detail = f"{r.detail}; {why}" if r.detail else why
        noisy_spread = r.spread is not None and r.spread > profiling.NOISY_SPREAD
        if noisy_spread or (r.load is not None and r.load > NOISY_LOAD):
            r.flags.append("noisy")
        if "incorrect" in r.flags or "not_credible" in r.flags:
            r.gflops = r.gbps = None  # not credited: no rate in tables, JSON rates or plots
    for r in rows:  # a baseline slower than a credited student kernel: the machine was busy
        students = [
            rate(s) for s in rows if s.problem == r.problem and s.backend.startswith("student")
        ]
        best = max([s for s in students if s is not None], default=None)
        slower = best and rate(r) and rate(r) < best
        if slower and not r.backend.startswith("student") and "noisy" not in r.flags:
            r.flags.append("noisy")
    # Busy: the load seen while most rows ran, not one row's spike (that row is flagged noisy).
    loads = sorted(r.load for r in rows if r.load is not None)
    typical = loads[len(loads) // 2] if loads else 0.0
    if typical > NOISY_LOAD:
        warnings.append(
            f"the machine was busy: other processes kept {typical:.1f} cores busy while most rows "
            f"ran (up to {loads[-1]:.1f}), so its figures are low and uneven. {busy_sentence()}"
        )
    noisy = sorted({f"{r.backend} on {r.problem}" for r in rows if "noisy" in r.flags})
    if noisy:
        warnings.append(
            f"{len(noisy)} figure(s) marked 'noisy: rerun' ({', '.join(noisy[:4])}"
            + (", ..." if len(noisy) > 4 else "")
            + f"). {RERUN}"
        )
    return warnings


CEILING_NAMES = {"fma_gflops": ("FMA peak", "GFLOP/s"), "copy_gbs": ("copy bandwidth", "GB/s")}


def _figure_name(key: str) -> str:
    """ "fma_gflops_2t" -> "FMA peak on 2 threads"."""
    base, _, threads = key.rpartition("_")
    what = CEILING_NAMES.get(base, (base, ""))[0]
    count = threads.removesuffix("t")
    return f"{what} on {count} thread{'s' if count != '1' else ''}"


def ceiling_warnings(ceilings: profiling.Ceilings) -> list[str]:
    """What the run says about its own ceilings: figures withheld (and why), figures that moved."""
    out = [f"{_figure_name(k)} withheld: {why}" for k, why in ceilings.withheld.items()]
    if ceilings.moved:
        names = ", ".join(_figure_name(k) for k in ceilings.moved)
        out.append(
            f"the machine's ceilings moved during Part B ({names}): their rounds disagree by more "
            "than the noise allows, so the machine changed under the run; each ceiling is the "
            "best of its rounds"
        )
    return out


RERUN = (
    "Rerun Part B alone when the machine is quiet: `tito milestone run 07 --impl YOUR_FILE "
    "--part-b-only`, or the notebook's Part B cell"
)


def run_part_b(
    impl: str = DEFAULT_IMPL,
    *,
    sizes: str = "default",
    timeout: float = 60.0,
    skip_student: Collection[str] = (),
    part_a: PartAResult | None = None,
    progress: Callable[[str], None] | None = None,
) -> PartBResult:
    """Time every backend on the GEMM, bias+GELU and fusion problems; unavailable ones say why.

    skip_student: student functions not to time. part_a: the gate's result for this impl; the
    functions that hung, crashed or are unwritten there are skipped, those that failed a case
    are timed but marked "incorrect: not credited", and the per-task timeout scales with the
    gate's per-case one (a student kernel may be slow, but not unboundedly). progress: called
    with one line per row as it is timed (a terminal prints it, a notebook shows the same text).
    """
    failed: set[str] = set()
    if part_a is not None:
        skip_student = set(skip_student) | part_a.stalled()
        timeout = max(30.0, 6 * part_a.timeout)
        failed = {c.group for c in part_a.cases if c.status != "pass"} | part_a.blamed()
    if sizes not in SIZES:
        raise ValueError(f"run_part_b: sizes must be one of {sorted(SIZES)}, got {sizes!r}")
    say = progress or (lambda _line: None)
    start = time.perf_counter()
    problems = SIZES[sizes]
    plan = [  # (child index, backend, kind, task, problem, repeats): one row each
        (i, backend, kind, task, problem, reps)
        for i, (_child, _env, _status, group) in enumerate(CHILDREN)
        for backend, tasks in group.items()
        for kind, task in tasks.items()
        for problem, reps in problems.get(kind, [])
    ]
    built: dict[tuple[str, str], BenchRow] = {}
    backends: list[dict[str, Any]] = []
    rounds: list[profiling.Ceilings] = []
    quick = sizes == "quick"
    # the copy ceiling on the smallest memory-bound array: a row that fits in cache is bounded by
    # a copy that fits too (a 64 MiB copy from memory would call a fast cached kernel impossible)
    copy_floats = min(
        (math.prod(p.dims) for kind, e in problems.items() if kind != "gemm" for p, _ in e),
        default=None,
    )

    def ceiling_round(box: Sandbox) -> None:
        got = run_task(box, "ceilings", timeout, quick=quick, copy_floats=copy_floats)
        if got["status"] == "ok":
            try:
                rounds.append(profiling.Ceilings.from_dict(got["value"]))
            except (TypeError, ValueError, AttributeError):
                pass  # a malformed round is left out; the others still bound the rows

    for index, (child, env, status_tasks, group) in enumerate(CHILDREN):
        box = open_box(impl if child == "student" else None, env)
        try:
            if child != "student":  # a round just after the rows before (before torch loads)
                ceiling_round(box)
            for status_task in status_tasks:
                status = run_task(box, status_task, timeout)
                value = status.get("value") if status["status"] == "ok" else None
                backends += value if isinstance(value, list) else [value] if value else []
            for backend in group:
                for i, b, _kind, task, problem, reps in plan:
                    if i != index or b != backend:
                        continue
                    fn = STUDENT_FN.get((backend, problem.kind))
                    if fn is not None and fn in skip_student:
                        reply = _skipped(fn)
                    else:
                        reply = run_task(box, task, timeout, repeats=reps, **task_kwargs(problem))
                    row = built[(backend, problem.name)] = bench_row(problem, backend, reply)
                    say(progress_line(len(built), len(plan), row))
                if child == "baseline":  # a round between the baseline's backends, and after
                    ceiling_round(box)
        finally:
            box.close()  # killed and reaped before the next child starts
    ceilings = profiling.combine_rounds(rounds) if rounds else None
    rows = [  # grouped by problem, in CHILDREN's order within each
        built[(backend, problem.name)]
        for kind, entries in problems.items()
        for problem, _reps in entries
        for _child, _env, _status, group in CHILDREN
        for backend, tasks in group.items()
        if kind in tasks
    ]
    warnings = flag_rows(rows, ceilings, failed)
    warnings += ceiling_warnings(ceilings) if ceilings is not None else []
    if ceilings is None:
        warnings.append(
            "the machine's ceilings could not be measured: no rate was checked against them"
        )
    return PartBResult(
        rows,
        backends,
        time.perf_counter() - start,
        warnings,
        ceilings.to_dict() if ceilings else None,
    )
