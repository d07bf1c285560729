"""Gradescope's run_autograder on one CPU: seconds and the process tree's peak memory.

    python benchmarks/bench_autograder.py [--runs N] [--cpu 0]

Builds the autograder zip (`tito autograder gradescope`), lays out a temporary AUTOGRADER_ROOT
(source/ = the unzipped zip, submission/acceleration.py = a correct Module 17: the bundled
reference's text), and runs `taskset -c CPU bash ROOT/source/run_autograder` with this
interpreter (TINYTORCH_PYTHON), Part A only, as Gradescope would run it. It prints the wall
seconds of each run and the peak resident memory of the whole process tree the grader measured
(results.json extra_data.peak_mb: run_platform's own process + the milestone run + the
student's process, sampled every 50 ms).

Goals (Gradescope's default container: 768 MB, half a vCPU, 10 min): peak within 768 MB, target
512 MB; one submission within 60 s on one CPU. Napkin math: a milestone run is ~2 s of one core
(interpreter and NumPy imports ~0.4 s each for the grader and the student's process, 30 cases +
7 checks + 14 hidden cases of small arrays), plus ~0.5 s for run_platform's own start.
Other work on the same CPU slows every figure; the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tinytorch.classroom.autograder import build_gradescope_zip, run_zip_locally
from tinytorch.classroom.platform_schemas import validate_gradescope
from tinytorch.release import reference_path

MEMORY_LIMIT_MB, MEMORY_TARGET_MB, TIME_GOAL_S = 768, 512, 60


def pinned(cpu: int) -> tuple[list[str], str]:
    """(command prefix, what it does): `taskset -c CPU`, or nothing and why not."""
    taskset = shutil.which("taskset")
    if taskset is None:
        return [], "NOT pinned: no taskset command"
    if cpu not in os.sched_getaffinity(0):
        return [], f"NOT pinned: CPU {cpu} is not one this process may use"
    return [taskset, "-c", str(cpu)], f"pinned to CPU {cpu} (taskset -c {cpu})"


def run_once(zip_path: Path, root: Path, prefix: list[str]) -> dict:
    source = reference_path(17).read_text(encoding="utf-8")
    start = time.perf_counter()
    done = run_zip_locally(zip_path, root, {"acceleration.py": source}, prefix=tuple(prefix))
    seconds = time.perf_counter() - start  # with the zip's unzipping, a few ms
    if done.returncode != 0:
        raise SystemExit(
            f"bench_autograder: run_autograder exited {done.returncode}:\n{done.stderr}"
        )
    results = json.loads((root / "results" / "results.json").read_text())
    validate_gradescope(results)
    extra = results["extra_data"]
    return {"seconds": seconds, "peak_mb": extra["peak_mb"], "verdict": extra["verdict"]}


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="runs of one submission (default 1)")
    parser.add_argument("--cpu", type=int, default=0, help="the CPU to pin to (default 0)")
    args = parser.parse_args()
    prefix, how = pinned(args.cpu)
    print(f"run_autograder, one correct submission, Part A only, {how}; load average at start "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")  # fmt: skip
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-autograder-") as tmp:
        zip_path = build_gradescope_zip(Path(tmp) / "autograder.zip")
        for i in range(args.runs):
            r = run_once(zip_path, Path(tmp) / f"root{i}", prefix)
            runs.append(r)
            print(f"run {i + 1}: {r['verdict']}, {r['seconds']:.1f} s, peak memory of the process "
                  f"tree {r['peak_mb']:.0f} MB")  # fmt: skip
    if any(r["verdict"] != "PASS" for r in runs):
        raise SystemExit("bench_autograder: the correct submission did not PASS")
    seconds = statistics.median(r["seconds"] for r in runs)
    peak = max(r["peak_mb"] for r in runs)
    time_ok = "met" if seconds <= TIME_GOAL_S else "NOT met"
    mem_ok = "within" if peak <= MEMORY_LIMIT_MB else "OVER"
    target = "met" if peak <= MEMORY_TARGET_MB else "not met"
    print(f"time: {seconds:.1f} s (median of {len(runs)}; goal <= {TIME_GOAL_S} s: {time_ok})")
    print(f"peak memory: {peak:.0f} MB ({mem_ok} {MEMORY_LIMIT_MB} MB; target "
          f"{MEMORY_TARGET_MB} MB: {target})")  # fmt: skip
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    sys.exit(main_bench())
