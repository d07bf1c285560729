"""Shared pytest setup: one hypothesis profile for every test file, and the `exclusive` lock.

No deadline: two shared cores make per-example timings noisy, and timing is not what we test.
Under CI (the CI variable set, as .ci/run does) examples are derandomised, so a red run repeats.
HYPOTHESIS_PROFILE=thorough runs 300 examples per test locally.

The suite runs on pytest-xdist workers (`-n auto` in pyproject.toml): one more than the cores this
process may use, because many tests spend their time waiting on a grader's timeout or sleep rather
than computing (on 2 cores, 3 workers took the suite from 577 s to 474 s). A test marked `exclusive`
(it races a timeout or a neighbour's CPU share, or it times something) runs while no other test
runs: every test (its setup, the module fixtures built for it, its call and teardown) holds a
shared lock on one file, an exclusive test holds it exclusively. A second "turnstile" lock, taken
briefly before either, keeps the exclusive test from being starved by the next shared ones.
On one worker (`-n 0`) the lock is uncontended and costs nothing.

The order in which the workers take the modules is made here (`--no-loadscope-reorder` in
pyproject.toml keeps it). The `exclusive` tests come first, back to back: spread over the session,
each one first waited for the tests then running to end, the other workers idle all that time.
Then the longest modules: one started last would run on with the other workers idle. Each
module's seconds are in tests/durations.json, measured on a 2-core machine; a module not listed
there goes first. `--write-durations tests/durations.json` measures them again (each
test's setup, call and teardown, summed by module; lock waits excluded). On 2 cores this order
took the suite from 10:10 to 8:15.

A test marked `timing` times something or races a timeout: it must hold on a busy machine (it
asserts on CPU time, on a ratio measured in the same run, or keeps a budget that load cannot
spend). `.ci/run` runs them once more with one CPU hog per core beside them; the `cpu_hogs`
fixture starts such hogs inside a test, and stops them after it whatever happens.
"""

from __future__ import annotations

import compileall
import contextlib
import fcntl
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "tinytorch",
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "tinytorch-ci", parent=settings.get_profile("tinytorch"), derandomize=True, database=None
)
settings.register_profile("thorough", parent=settings.get_profile("tinytorch"), max_examples=300)
default = "tinytorch-ci" if os.environ.get("CI") else "tinytorch"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", default))


DURATIONS = Path(__file__).with_name("durations.json")  # module path -> seconds


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--write-durations",
        metavar="PATH",
        help="write each test module's seconds (setup + call + teardown) to PATH as JSON; "
        "tests/durations.json orders the modules longest first",
    )


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _controller(config: pytest.Config) -> bool:
    """The process that runs the session: xdist's controller, or the one process under -n 0."""
    return not hasattr(config, "workerinput")


def suite_order(items: list[pytest.Item], seconds: dict[str, float]) -> list[pytest.Item]:
    """The order the workers take the tests in (see the module docstring): first the modules
    holding `exclusive` tests, those tests first in each, so that they run back to back while
    the session starts; then the other modules, longest first by `seconds` (a module missing
    there, not measured yet, goes before them all). Otherwise each module's tests keep their own
    order."""
    first: dict[str, int] = {}
    exclusive: set[str] = set()
    for index, item in enumerate(items):
        first.setdefault(_module(item.nodeid), index)
        if item.get_closest_marker("exclusive"):
            exclusive.add(_module(item.nodeid))

    def key(pair: tuple[int, pytest.Item]) -> tuple:
        index, item = pair
        module = _module(item.nodeid)
        return (
            module not in exclusive,
            -seconds.get(module, math.inf),
            first[module],
            item.get_closest_marker("exclusive") is None,
            index,
        )

    return [item for _, item in sorted(enumerate(items), key=key)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    items[:] = suite_order(items, seconds)


_seconds: defaultdict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Under xdist this runs in the controller too, with every worker's reports."""
    _seconds[_module(report.nodeid)] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("--write-durations")
    # the controller (or -n 0), and only after tests ran: a --collect-only run writes nothing
    if path and _seconds and _controller(session.config):
        ordered = dict(sorted(((m, round(s, 1)) for m, s in _seconds.items()), key=lambda x: -x[1]))
        Path(path).write_text(json.dumps(ordered, indent=1) + "\n")


def pytest_sessionstart(session: pytest.Session) -> None:
    """The package's bytecode, written once before any test runs (the controller, or -n 0).

    These machines set PYTHONDONTWRITEBYTECODE, and a grading child (another uid) could not
    write it anyway, so without this every one of the suite's Python processes (each grader,
    sandbox child and `tito` run) compiled the package again: ~0.2 s of CPU each, a quarter of
    a grading run. Python still reads bytecode it did not write; the sources decide staleness."""
    if not _controller(session.config):
        return
    root = Path(__file__).resolve().parents[1]
    for package in ("tinytorch", "extensions"):
        compileall.compile_dir(root / package, quiet=1)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: the usable cores plus one (see the module docstring)."""
    return _cores() + 1


def _lock_dir(config: pytest.Config) -> Path:
    """One folder per pytest run, shared by its xdist workers (they inherit the controller's id)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"solo-{os.getpid()}"
    path = Path(tempfile.gettempdir()) / f"tinytorch-pytest-{run}"
    path.mkdir(exist_ok=True)
    return path


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Each test's setup, call and teardown (module fixtures built for it too) under the lock:
    shared for ordinary tests, exclusive (alone on the machine) for tests marked `exclusive`."""
    folder = _lock_dir(item.config)
    mode = fcntl.LOCK_EX if item.get_closest_marker("exclusive") else fcntl.LOCK_SH
    with open(folder / "turnstile", "a") as turnstile, open(folder / "tests", "a") as tests:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(tests, mode)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            return (yield)
        finally:
            fcntl.flock(tests, fcntl.LOCK_UN)


HOG = "while True:\n    pass\n"  # one busy-looping process: a CPU hog


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@pytest.fixture
def cpu_hogs() -> Iterator[Callable[[int], int]]:
    """start(per_core) starts `per_core` busy-looping processes per usable core and returns how
    many; all of them are killed (by pid) when the test ends, however it ends."""
    hogs: list[subprocess.Popen] = []

    def start(per_core: int) -> int:
        if not (isinstance(per_core, int) and per_core > 0):
            raise ValueError(f"cpu_hogs: per_core must be an int > 0, got {per_core!r}")
        for _ in range(per_core * _cores()):
            hogs.append(
                subprocess.Popen(
                    [sys.executable, "-c", HOG],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    # a session of its own: with the kernel's autogroups (sched_autogroup), hogs
                    # in the test's session compete with the test only, never with a sandbox
                    start_new_session=True,
                )
            )
        return len(hogs)

    try:
        yield start
    finally:
        for hog in hogs:
            with contextlib.suppress(OSError):
                hog.send_signal(signal.SIGKILL)
        for hog in hogs:
            hog.wait()
