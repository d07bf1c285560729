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
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
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


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: the usable cores plus one (see the module docstring)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + 1


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
