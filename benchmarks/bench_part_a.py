"""Part A's wall time, whole process: `tito milestone run 07 --no-part-b`, practice and grading.

    python benchmarks/bench_part_a.py [--rounds 7] [--impl PATH]

One sample is one `tito milestone run 07 --no-part-b --json ...` process, from start to exit:
the interpreter and its imports, the sandbox child (namespaces, uid drop, private folder, limits,
the student's import), the 30 cases and 6 deeper checks, the result file. A grading sample adds
`--grading`: a secret seed, the 16 hidden cases, the audit on seed-drawn shapes, the own-work
check (the reference's fingerprints, matched in the child). Both modes are run once untimed
first (disk cache, compiled bytecode), then timed in interleaved rounds (tinytorch.profiling's
`interleaved`: round r starts with mode r mod 2, so a noisy moment hits both alike); the figures
are the medians. The default submission is the bundled reference's source in a file of its own,
as a student's acceleration.py would be (it PASSes in both modes; anything else is an error).

Napkin math: ~0.4 s of interpreter + NumPy imports in each of the grader and its child, ~0.1 s of
sandbox set-up, ~0.3 s for 30 cases and 6 checks of small problems; the hidden cases are 16 more
small problems. Issue 9's goal on a 2-core machine: practice <= 1.5 s, grading <= practice + 1 s.
The machine is shared: the load average is printed with the figures, and a busy machine slows
every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tinytorch.profiling.timing import interleaved
from tinytorch.release import reference_path

MODES = {"practice": [], "grading": ["--grading"]}


def run_once(impl: Path, out: Path, extra: list[str]) -> float:
    """Seconds of one whole `tito milestone run 07 --no-part-b` process; it must PASS."""
    cmd = [
        sys.executable,
        "-m",
        "tinytorch.cli.main",
        "milestone",
        "run",
        "07",
        "--impl",
        str(impl),
    ]
    cmd += ["--no-part-b", "--json", str(out), *extra]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    verdict = json.loads(out.read_text()).get("verdict") if out.exists() else None
    if done.returncode != 0 or verdict != "PASS":
        tail = (done.stdout + done.stderr)[-1500:]
        raise SystemExit(f"bench_part_a: {' '.join(extra) or 'practice'} run: exit "
                         f"{done.returncode}, verdict {verdict}:\n{tail}")  # fmt: skip
    return seconds


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed runs of each mode (default 7)")
    parser.add_argument("--impl", type=Path, help="the submission (default: the reference's text)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    with tempfile.TemporaryDirectory(prefix="bench-part-a-") as tmp:
        impl = args.impl
        if impl is None:
            impl = Path(tmp) / "acceleration.py"
            impl.write_text(reference_path(17).read_text(encoding="utf-8"), encoding="utf-8")
        out = Path(tmp) / "result.json"
        fns = {
            name: (lambda extra=extra: run_once(impl, out, extra)) for name, extra in MODES.items()
        }
        print(f"tito milestone run 07 --no-part-b on {impl.name}; load average at start "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")  # fmt: skip
        for fn in fns.values():  # warm: untimed
            fn()
        timings = interleaved(fns, args.rounds, default_settle=0.2)
    for name, t in timings.items():
        spread = f"{t.spread:.2f}" if t.spread is not None else "-"
        print(f"  {name:<9} median {t.median:5.2f} s   best {t.min:5.2f} s   spread {spread}   "
              f"({len(t.samples)} runs)")  # fmt: skip
    extra = timings["grading"].median - timings["practice"].median
    print(f"  grading mode costs {extra:+.2f} s over practice (medians)")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    sys.exit(main_bench())
