"""Grade one submission as its own process tree: `tito milestone run 07 --grading --json OUT`.

Each student gets a fresh `python -m tinytorch.cli.main` process (its own session), so nothing a
submission does can reach another's grading. The parent watches the tree: a wall timeout, an
output flood or a memory flood kills the whole tree and yields a named result. The tree's peak
resident memory (the sum over every live process, sampled) is recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from tinytorch.milestone07.results import exit_code
from tinytorch.render.json_doc import SCHEMA_VERSION
from tinytorch.sandbox import procs

WALL_TIMEOUT_S = 300.0  # per submission, the whole milestone run
# Part A's --budget is the wall timeout less this: the first import (START_TIMEOUT_S), start-up,
# one call cut short and the grader's own math, so that a slow but legal submission ends on its
# budget (TIMEOUT cases, NOT PASSED) and never on the wall timeout, which is an ERROR
BUDGET_MARGIN_S = 90.0
MAX_LOG_BYTES = 4 * 1024 * 1024  # more output than this is a flood
MAX_TREE_MB = 2048.0  # more resident memory than this (whole tree) is a memory flood
_POLL_S = 0.05


@dataclass
class TreeRun:
    """How one watched process tree ended."""

    returncode: int | None  # None when the parent killed it
    seconds: float
    peak_mb: float
    killed: str = ""  # "" | "timeout" | "flood" | "memory" | "interrupted"


# One BLAS/OpenMP thread per grading. Where students are graded side by side (the class grader
# with --jobs above 1) they already fill the cores, and OpenBLAS's idle threads spin for ~0.1 s
# after every call, taking turns from the student graded beside them: 8 gradings run in pairs
# took 28.2 s with the default threads and 5.6 s with one (user CPU 51.7 s vs 7.1 s).
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


# The milestone process is the grader's (root in a class run). With `-m`, Python puts the working
# folder first on sys.path: started from inside a class folder, a student's numpy.py ran as root in
# every student's grading (red-teaming). -P (Python 3.11+) puts nothing there, and the process
# starts in NEUTRAL_CWD, where only root can write, for 3.10.
SAFE_PATH = ["-P"] if sys.version_info >= (3, 11) else []
NEUTRAL_CWD = "/"


def milestone_command(
    impl: str | Path,
    json_path: str | Path,
    *,
    part_b: bool = False,
    grading: bool = True,
    case_timeout: float | None = None,
    budget: float | None = None,
    fmt: str | None = None,
    memory_limit_mb: int | None = None,
    seed: int | None = None,
    plots: str | Path | None = None,
) -> list[str]:
    """The argv that grades `impl` once and writes its result to `json_path`.

    memory_limit_mb: the address-space limit of the student's process (`--memory-limit`).
    seed: the data seed (None: in grading mode the milestone draws a fresh secret one).
    plots: a folder for the drawings of each group's first failure (`--plots`)."""
    cmd = [sys.executable, *SAFE_PATH, "-m", "tinytorch.cli.main", "milestone", "run", "07"]
    cmd += ["--impl", os.path.abspath(impl), "--json", os.path.abspath(json_path)]
    if seed is not None:
        cmd += ["--seed", str(int(seed))]
    if not part_b:
        cmd.append("--no-part-b")
    if grading:
        cmd.append("--grading")
    if case_timeout is not None:
        cmd += ["--timeout", str(case_timeout)]
    if budget is not None:
        cmd += ["--budget", f"{budget:g}"]
    if fmt is not None:
        cmd += ["--format", fmt]
    if memory_limit_mb is not None:
        cmd += ["--memory-limit", str(int(memory_limit_mb))]
    if plots is not None:
        cmd += ["--plots", os.path.abspath(plots)]
    return cmd


def _tree(root: psutil.Process, known: dict[int, psutil.Process]) -> list[psutil.Process]:
    """The live tree under `root`, remembering every process seen (a child that re-parents or
    starts its own session is still killed at the end)."""
    try:
        for p in [root, *root.children(recursive=True)]:
            known.setdefault(p.pid, p)
    except psutil.Error:
        pass
    return [p for p in known.values() if p.is_running()]


def _rss_mb(procs: list[psutil.Process]) -> float:
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total / 2**20


def _kill(proc: subprocess.Popen, known: dict[int, psutil.Process]) -> None:
    procs.kill_session(proc, list(known.values()))  # the one tree kill: tinytorch.sandbox.procs
    psutil.wait_procs(list(known.values()), timeout=2)


def run_tree(
    cmd: list[str],
    log_path: Path,
    *,
    wall_timeout: float = WALL_TIMEOUT_S,
    max_log_bytes: int = MAX_LOG_BYTES,
    max_tree_mb: float = MAX_TREE_MB,
    stop: threading.Event | None = None,
    env: dict[str, str] | None = None,
    popen_kwargs: dict[str, Any] | None = None,
) -> TreeRun:
    """Run `cmd` in its own session with output to `log_path`; watch, measure, kill if needed."""
    start = time.monotonic()
    known: dict[int, psutil.Process] = {}
    peak = 0.0
    killed = ""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            **{"cwd": NEUTRAL_CWD, **(popen_kwargs or {})},
        )
        try:
            root = psutil.Process(proc.pid)
        except psutil.Error:
            root = None
        while True:
            try:
                proc.wait(timeout=_POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            live = _tree(root, known) if root else []
            peak = max(peak, _rss_mb(live))
            if stop is not None and stop.is_set():
                killed = "interrupted"
            elif time.monotonic() - start > wall_timeout:
                killed = "timeout"
            elif log_path.stat().st_size > max_log_bytes:
                killed = "flood"
            elif peak > max_tree_mb:
                killed = "memory"
            if killed:
                break
        _kill(proc, known)  # also reaps any grandchild the milestone left behind
    seconds = time.monotonic() - start
    return TreeRun(None if killed else proc.returncode, seconds, peak, killed)


def error_doc(impl: str, verdict: str, error: str) -> dict[str, Any]:
    """A milestone-shaped result for a submission the milestone produced no result for."""
    return {
        "schema_version": SCHEMA_VERSION,
        "milestone": "07",
        "verdict": verdict,
        "impl": impl,
        "seed": 0,
        "grading": True,
        "summary": {"cases_passed": 0, "cases_total": 0, "checks_passed": 0, "checks_total": 0},
        "missing": [error] if verdict == "INCOMPLETE" else [],
        "cases": [],
        "checks": [],
        "hidden_cases": [],
        "isolation": {},
        "warnings": [],
        "part_b": None,
        "environment": None,
        "error": error,
    }


_KILLED = {
    "timeout": "the grader was stopped after {limit:.0f} s (the whole run, not one case)",
    "flood": "the submission flooded the output (over {mb:.0f} MB); the run was stopped",
    "memory": "the submission used over {mem:.0f} MB of memory; the run was stopped",
}
# What a stopped run is: a flood or a memory flood is the submission's doing (its processes are
# the tree's only big ones), graded NOT PASSED with no points; a wall timeout past the budget
# derived from it is the grader's failure to stop a run, ERROR.
_KILLED_VERDICT = {"flood": "NOT_PASSED", "memory": "NOT_PASSED"}


def _tail(path: Path, lines: int = 6) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - 4000))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return " | ".join(t.strip() for t in text.strip().splitlines()[-lines:])


def _agreed(doc: Any, returncode: int | None, impl: Path, log_path: Path) -> dict[str, Any]:
    """`doc` when the milestone's exit status is the one its verdict gives (cli.milestone
    exit_code), else an ERROR doc: a result file from a process that was killed, or that exited
    otherwise, was not written by the milestone at its end (red-teaming: a student's process that
    shared the grader's uid, on a host without namespaces, wrote a PASS there and SIGKILLed it)."""
    verdict = doc.get("verdict") if isinstance(doc, dict) else None
    if isinstance(verdict, str) and returncode == exit_code(verdict):
        return doc
    how = f"was killed by signal {-returncode}" if returncode and returncode < 0 else (
        f"exited {returncode}")  # fmt: skip
    why = (f"the milestone process {how}, but its result file says {verdict!r}: "
           f"not trusted: {_tail(log_path)}")  # fmt: skip
    return error_doc(str(impl), "ERROR", why)


def grade_submission(
    impl: Path,
    work: Path,
    *,
    part_b: bool = False,
    case_timeout: float | None = None,
    wall_timeout: float = WALL_TIMEOUT_S,
    max_tree_mb: float = MAX_TREE_MB,
    memory_limit_mb: int | None = None,
    stop: threading.Event | None = None,
    log_path: Path | None = None,
    popen_kwargs: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    prefix: list[str] | None = None,
    seed: int | None = None,
    plots: Path | None = None,
) -> tuple[dict[str, Any], TreeRun]:
    """Grade one file in grading mode; always returns a doc (an ERROR doc when none came back).

    prefix: argv words the milestone command runs under (CpuGroups.prefix: its CPU cgroup).
    seed: the data seed (a regrade reuses the first run's; None: a fresh secret one).
    plots: a folder of the grader's for the drawings of each group's first failure (PNGs drawn
    by the milestone process from what it observed, never by the student's code).
    The doc gains "grader": {"seconds", "peak_mb", "killed", "returncode"} (the run itself).
    """
    work.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".result-", suffix=".json", dir=work)
    os.close(fd)
    os.unlink(tmp)  # the milestone writes it; its absence afterwards means no result
    log_path = log_path or Path(tmp).with_suffix(".log")
    budget = max(wall_timeout - BUDGET_MARGIN_S, wall_timeout / 2)
    cmd = milestone_command(
        impl,
        tmp,
        part_b=part_b,
        case_timeout=case_timeout,
        budget=budget,
        memory_limit_mb=memory_limit_mb,
        seed=seed,
        plots=plots,
    )
    run = run_tree(
        [*(prefix or []), *cmd],
        log_path,
        wall_timeout=wall_timeout,
        max_tree_mb=max_tree_mb,
        stop=stop,
        env=env,
        popen_kwargs=popen_kwargs,
    )
    doc = None
    if not run.killed and os.path.exists(tmp):
        try:
            with open(tmp, encoding="utf-8") as fh:
                doc = _agreed(json.load(fh), run.returncode, impl, log_path)
        except (OSError, ValueError) as exc:
            doc = error_doc(str(impl), "ERROR", f"the result file was unreadable: {exc}")
    if os.path.exists(tmp):
        os.unlink(tmp)
    if doc is None:
        if run.killed in _KILLED:
            why = _KILLED[run.killed].format(
                limit=wall_timeout, mb=MAX_LOG_BYTES / 2**20, mem=max_tree_mb
            )
        elif run.killed == "interrupted":
            why = "interrupted (Ctrl-C) before the run finished"
        else:
            why = f"the grader exited {run.returncode} without a result: {_tail(log_path)}"
        doc = error_doc(str(impl), _KILLED_VERDICT.get(run.killed, "ERROR"), why)
    doc["grader"] = {
        "seconds": round(run.seconds, 3),
        "peak_mb": round(run.peak_mb, 1),
        "killed": run.killed,
        "returncode": run.returncode,
    }
    return doc, run
