"""The milestone on a busy machine: what must hold with 6 hogs per core beside it.

    .venv/bin/python benchmarks/bench_load.py [--runs 10] [--per-core 6]

Starts `--per-core` hogs per usable core, half of them CPU-bound (a busy loop), half copying
memory (NumPy copies of 32 MB arrays, larger than any last-level cache), each in a session of its
own (with the kernel's autogroups, hogs sharing one session would weigh as one). With them
running it checks, and prints one line each and a summary:

- `tito milestone run 07 --no-part-b` on the bundled reference, `--runs` times: PASS every time
  (exit status 0). Part B is left out: it is timings, context only, and says itself that a busy
  machine's rates are not to be trusted;
- the same on a kernel that segfaults (the reference with a tiled_matmul that reads a
  kernel-space address), `--runs` times: every run names the crash (its tiled_matmul cases are
  CRASH, saying SIGSEGV);
- the notebook heatmap's full grid on the reference (tinytorch.viz.widget's 6 shapes x 8 tile
  sizes through check_matmul_grid, computed, not drawn): 48 of 48 green.

The timeouts are CPU time of the student's process tree (tinytorch/sandbox/parent.py), so load
stretches the wall time of a run but changes no verdict. The hogs are killed (by pid) when the
benchmark ends, however it ends. Exit status 0 when everything held, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tinytorch.milestone07.cases import DEFAULT_IMPL
from tinytorch.milestone07.part_a import check_matmul_grid
from tinytorch.release import reference_path
from tinytorch.viz.widget import SHAPES, TILE_SIZES

CPU_HOG = "while True:\n    pass\n"
COPY_HOG = (
    "import numpy as np\n"
    "a = np.ones(4 << 20)  # 32 MB of float64\n"
    "b = np.empty_like(a)\n"
    "while True:\n"
    "    np.copyto(b, a)\n"
    "    np.copyto(a, b)\n"
)
SEGFAULT = '''

import ctypes as _ctypes


def tiled_matmul(a, b, tile_size=64):
    """Reads a kernel-space address: SIGSEGV, as a broken native kernel does (address 0 is
    readable on some machines)."""
    return _ctypes.string_at(0xFFFFFFFFFFFFF000, 8)
'''
TITO = [sys.executable, "-m", "tinytorch.cli.main"]


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextlib.contextmanager
def hogs(per_core: int) -> Iterator[list[subprocess.Popen]]:
    """per_core hogs per usable core, half busy loops and half memory copies, each in its own
    session; SIGKILLed by pid when the block ends (an exception, Ctrl-C or SIGTERM included)."""
    started: list[subprocess.Popen] = []
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        for i in range(per_core * cores()):
            started.append(
                subprocess.Popen(
                    [sys.executable, "-c", CPU_HOG if i % 2 == 0 else COPY_HOG],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        time.sleep(1.0)  # the copying hogs import NumPy and allocate first
        yield started
    finally:
        for hog in started:
            with contextlib.suppress(OSError):
                hog.kill()
        for hog in started:
            hog.wait()
        signal.signal(signal.SIGTERM, previous)


def tito_run(impl: str, out: Path) -> tuple[int, dict, float]:
    """(exit status, the run's JSON, wall seconds) of `tito milestone run 07 --no-part-b`."""
    start = time.perf_counter()
    done = subprocess.run(
        [*TITO, "milestone", "run", "07", "--impl", impl, "--no-part-b", "--json", str(out)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    took = time.perf_counter() - start
    try:
        doc = json.loads(out.read_text())
    except (OSError, ValueError):
        doc = {"error": done.stderr.decode(errors="replace")[-500:]}
    return done.returncode, doc, took


def _cases(doc: dict) -> list[dict]:
    part_a = doc.get("part_a", doc)
    return [c for c in part_a.get("cases", []) if isinstance(c, dict)]


def names_the_crash(doc: dict) -> bool:
    """Every tiled_matmul case of the run is a crash, and the report says SIGSEGV."""
    gemm = [c for c in _cases(doc) if str(c.get("name", "")).startswith("tiled_matmul")]
    return (
        bool(gemm)
        and all(
            c.get("status") == "crash" or (c.get("status") == "not_run" and "crash" in str(c))
            for c in gemm
        )
        and "SIGSEGV" in json.dumps(gemm)
    )


def spread(seconds: list[float]) -> str:
    return f"wall {min(seconds):.1f} / {statistics.median(seconds):.1f} / {max(seconds):.1f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each milestone check")
    parser.add_argument("--per-core", type=int, default=6, help="hogs per usable core")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    if args.per_core < 0:
        parser.error(f"--per-core must be 0 or more, got {args.per_core}")
    work = Path(tempfile.mkdtemp(prefix="tt-bench-load-"))
    bad = work / "acceleration.py"
    bad.write_text(reference_path(17).read_text(encoding="utf-8") + SEGFAULT)
    lines: list[str] = []
    held = True
    with hogs(args.per_core) as running:
        n_cpu = (len(running) + 1) // 2
        print(
            f"load: {len(running)} hogs on {cores()} cores ({n_cpu} CPU-bound, "
            f"{len(running) - n_cpu} copying memory), load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        passes, times = 0, []
        for i in range(args.runs):
            code, doc, took = tito_run(DEFAULT_IMPL, work / f"ref-{i}.json")
            verdict = doc.get("verdict") or doc.get("part_a", {}).get("verdict")
            passes += code == 0 and verdict == "PASS"
            times.append(took)
            print(f"  reference run {i + 1}: exit {code}, {verdict}, {took:.1f} s", flush=True)
        lines.append(f"reference: PASS {passes}/{args.runs} ({spread(times)})")
        held &= passes == args.runs

        named, times = 0, []
        for i in range(args.runs):
            code, doc, took = tito_run(str(bad), work / f"segv-{i}.json")
            ok = code == 1 and names_the_crash(doc)
            named += ok
            times.append(took)
            print(
                f"  segfault run {i + 1}: exit {code}, crash named: {ok}, {took:.1f} s", flush=True
            )
        lines.append(f"segfaulting kernel: crash named {named}/{args.runs} ({spread(times)})")
        held &= named == args.runs

        start = time.perf_counter()
        grid = check_matmul_grid(DEFAULT_IMPL, SHAPES, TILE_SIZES)
        took = time.perf_counter() - start
        green = sum(r.status == "pass" for r in grid)
        others = sorted({f"{r.name}: {r.status}" for r in grid if r.status != "pass"})[:5]
        lines.append(
            f"heatmap, reference, {len(SHAPES)} shapes x {len(TILE_SIZES)} tile sizes: "
            f"{green}/{len(grid)} green ({took:.1f} s)"
            + (f"; not green: {others}" if others else "")
        )
        held &= green == len(grid) == len(SHAPES) * len(TILE_SIZES)
        load = os.getloadavg()[0]
    print(f"\nsummary ({len(running)} hogs, load average {load:.1f} at the end):")
    for line in lines:
        print(f"  {line}")
    print("  everything held" if held else "  NOT everything held")
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
