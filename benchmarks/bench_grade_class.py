"""`tito grade-class` on a synthetic class: seconds per submission, peak memory, scaling.

    python benchmarks/bench_grade_class.py [--sizes 50,200] [--jobs 2] [--similarity-only]

The class is built here from the bundled reference (tinytorch/perf/acceleration.py) and buggy
variants of it, each a one-line mutation written below, plus the all-stubs student edition:

    correct 40%, ragged K dropped 12%, k-tiles not accumulated 12%, wrong GELU constant 12%,
    col2im overwrites instead of adding 12%, all stubs 12%

Each student's file carries its own id in a comment (the similarity pass still sees copies). A
class of each size is graded from scratch (Part A only, grading mode) by grade_and_report, the
pipeline tito grade-class runs, similarity and report included, and each phase is timed
(grading, similarity, report). Goal on a 2-core machine: 200 submissions within 240 s with --jobs 2.
Napkin math: one milestone run is ~2 s of one core (interpreter + NumPy import ~0.4 s, 30 cases +
6 checks + hidden cases), so 200 runs on 2 cores are ~200 s if nothing else is running.

--similarity-only times the similarity pass alone (no grading), on the same class, as
grade_and_report calls it: every file read through the AST, scored pair by pair and function by
function. Goal: a class of 200 within SIMILARITY_GOAL_S on a 2-core machine. Napkin math: about
5,000 tokens per file, parsed and printed back statement by statement (~50 ms a file), then
shingles compared group by group: ~10 s of one core for 200 distinct files.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tinytorch.classroom.classgrade import grade_and_report
from tinytorch.milestone07.scoring import load_points
from tinytorch.release import make_student_source, reference_path

MUTATIONS = {  # name -> (exact snippet of the reference, replacement)
    "ragged_k": ("for k0 in range(0, k, t):", "for k0 in range(0, (k // t) * t, t):"),
    "no_accumulate": ("c_tile += buf", "c_tile[...] = buf"),
    "gelu_constant": ("y *= two_kc  # 2kc t^2", "y *= two_k  # 2kc t^2"),
    "col2im_overwrite": ("window += c6", "window[...] = c6"),
}
MIX = [("correct", 0.40), *((name, 0.12) for name in MUTATIONS), ("stubs", 0.12)]
SIMILARITY_GOAL_S = 90  # a class of 200, similarity pass alone, 2 cores


def variants() -> dict[str, str]:
    ref = reference_path(17).read_text(encoding="utf-8")
    out = {"correct": ref, "stubs": make_student_source(ref)}
    for name, (old, new) in MUTATIONS.items():
        if ref.count(old) != 1:
            raise SystemExit(f"bench_grade_class: mutation {name}: {old!r} is not in the reference")
        out[name] = ref.replace(old, new)
    return out


def build_class(folder: Path, size: int) -> dict[str, int]:
    """`size` students in the MIX proportions; the count of each variant."""
    texts = variants()
    names = [name for name, share in MIX for _ in range(round(share * size))]
    names = (names + ["correct"] * size)[:size]
    folder.mkdir(parents=True)
    for i, name in enumerate(names):
        (folder / f"s{i:04d}.py").write_text(f"# student s{i:04d}\n" + texts[name])
    return {name: names.count(name) for name, _ in MIX}


def grade(size: int, jobs: int, top: Path) -> dict[str, float]:
    subs, out = top / f"class{size}", top / f"out{size}"
    mix = build_class(subs, size)
    start = time.perf_counter()
    done = grade_and_report(subs, out, points=load_points(None), jobs=jobs)  # what the CLI runs
    seconds = time.perf_counter() - start
    if done.run.interrupted or len(done.rows) != size:
        raise SystemExit(f"bench_grade_class: {len(done.rows)} of {size} students graded")
    docs = [json.loads(p.read_text()) for p in (out / "results").glob("*.json")]
    peaks = [d["grader"]["peak_mb"] for d in docs]
    runs = [d["grader"]["seconds"] for d in docs]
    verdicts = {v: sum(d["verdict"] == v for d in docs) for v in ("PASS", "NOT_PASSED", "INCOMPLETE", "ERROR")}  # fmt: skip
    print(f"  class of {size}: {mix}")
    print(f"  verdicts: {verdicts} (expected PASS = {mix['correct']})")
    return {
        "seconds": seconds,
        **{f"phase_{name}": s for name, s in done.phases.items()},
        "per_submission": seconds / size,
        "run_median": statistics.median(runs),
        "peak_median": statistics.median(peaks),
        "peak_max": max(peaks),
    }


def similarity_only(size: int, top: Path) -> dict[str, float]:
    """The similarity pass alone on a class of `size`, as grade_and_report runs it; its seconds
    (wall and CPU) and its flags by kind."""
    from tinytorch.classroom.similarity import KINDS, similarity_flags

    subs = top / f"class{size}"
    mix = build_class(subs, size)
    sources = {p.stem: p.read_text(encoding="utf-8") for p in sorted(subs.glob("*.py"))}
    ref = reference_path(17).read_text(encoding="utf-8")
    start, cpu = time.perf_counter(), time.process_time()
    flags = similarity_flags(sources, ref, make_student_source(ref))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"  class of {size}: {mix}")
    return {"seconds": seconds, "cpu": cpu, **{k: sum(f.kind == k for f in flags) for k in KINDS}}


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,200", help="class sizes, comma-separated")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--similarity-only", action="store_true", help="time the similarity pass alone"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    load = os.getloadavg()[0]
    print(f"tito grade-class, --jobs {args.jobs}, Part A only; load average at start {load:.1f} "
          f"on {os.cpu_count()} CPUs (other work on the machine slows every figure)")  # fmt: skip
    figures = {}
    if args.similarity_only:
        with tempfile.TemporaryDirectory(prefix="bench-similarity-") as tmp:
            for size in sizes:
                f = similarity_only(size, Path(tmp))
                print(
                    f"{size:4d} submissions: similarity {f['seconds']:.1f} s wall, {f['cpu']:.1f} s"
                    f" CPU; flags verbatim {f['verbatim']}, renamed {f['renamed']}, contained "
                    f"{f['contained']}"
                )
                if size == 200:
                    met = "met" if f["seconds"] <= SIMILARITY_GOAL_S else "NOT met"
                    print(f"goal similarity of 200 <= {SIMILARITY_GOAL_S} s: {met}")
        print(f"load average at the end {os.getloadavg()[0]:.1f}")
        return
    with tempfile.TemporaryDirectory(prefix="bench-grade-class-") as tmp:
        for size in sizes:
            f = figures[size] = grade(size, args.jobs, Path(tmp))
            print(
                f"{size:4d} submissions: {f['seconds']:7.1f} s total, {f['per_submission']:.2f} s "
                f"per submission ({f['run_median']:.2f} s median run of one student), peak memory "
                f"per worker tree {f['peak_median']:.0f} MB median, {f['peak_max']:.0f} MB max"
            )
            print(
                f"      phases: grading {f['phase_grading']:.1f} s, similarity "
                f"{f['phase_similarity']:.1f} s, report {f['phase_report']:.1f} s"
            )
    if len(sizes) > 1:
        lo, hi = min(sizes), max(sizes)
        ratio = figures[hi]["seconds"] / figures[lo]["seconds"]
        print(f"scaling {lo} -> {hi}: {ratio:.2f}x the time for {hi / lo:.1f}x the students")
    if 200 in figures:
        verdict = "met" if figures[200]["seconds"] <= 240 else "NOT met"
        print(f"goal 200 submissions <= 240 s: {verdict} ({figures[200]['seconds']:.0f} s)")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    sys.exit(main_bench())
