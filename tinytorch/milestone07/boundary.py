"""What Milestone 07 tells the sandbox, and the one way the milestone opens one.

The sandbox knows nothing of milestones: it is told the graded names (the five functions and
the Function class the backward check calls), the bundled reference to keep out of a grading
child, how to fingerprint the reference's code, and the registry of our own Part B tasks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib

from tinytorch.milestone07.cases import CONV_FUNCTION, FUNCTIONS
from tinytorch.milestone07.own_work import BLOCKED, REFERENCE_MODULES, reference_fingerprints
from tinytorch.sandbox.child.confine import ChildLimits
from tinytorch.sandbox.parent import Graded, Sandbox

GRADED = Graded(
    names=FUNCTIONS,
    classes=(CONV_FUNCTION,),
    reference=REFERENCE_MODULES,
    blocked=BLOCKED,
    fingerprints=reference_fingerprints,
    tasks="tinytorch.bench.tasks:TASKS",
)


# Every module the milestone process imports after the student's code has started, imported before
# it starts (preload). A module first imported late runs from disk then; had the student's process
# been able to write that file (red-teaming: root chowned a staged link's target, a module of this
# environment, to the grading user), it would run the student's code in the grader and forge the
# result. tests/test_outside_sandbox.py checks that nothing with a file is imported late.
LATE_IMPORTS = (  # Part A, in either output format (measured: the test lists what came late)
    "numpy.random",
    "email.parser",
    "email.feedparser",
    "threadpoolctl",
    "tinytorch.nn.conv",
    "tinytorch.perf.acceleration",
    "tinytorch.release",
    "tinytorch.extensions.build",
    "tinytorch.extensions.mps",
    "tinytorch.extensions.simd",
    "tinytorch.render.platforms",
    "tinytorch.render.resultfile",
    "tinytorch.render.json_doc",
    "tinytorch.render.terminal",
    "tinytorch.milestone07.scoring",
)
PART_B_IMPORTS = (  # only where Part B follows Part A (triton_kernels alone costs ~0.3 s)
    "tinytorch.bench.tasks",
    "tinytorch.bench.part_b",
    "tinytorch.bench.native",
    "tinytorch.extensions.triton_kernels",
)


def preload(*, part_b: bool = False) -> None:
    """Import LATE_IMPORTS (and PART_B_IMPORTS with `part_b`) now, before any student code runs
    (one that is not installed, e.g. an optional backend, is skipped: it cannot be imported
    later either)."""
    for name in LATE_IMPORTS + (PART_B_IMPORTS if part_b else ()):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def open_sandbox(
    impl: str | None,
    env: dict[str, str] | None = None,
    *,
    grading: bool = False,
    limits: ChildLimits | dict[str, int | None] | None = None,
    memory_limit: int | None = None,
    user: tuple[int, int] | None = None,
    tasks: bool = False,
) -> Sandbox:
    """A Sandbox for a Milestone 07 submission; memory_limit (MB) caps only the address space.
    Everything the milestone process imports later is imported first (preload)."""
    preload()
    if memory_limit is not None:
        limits = dataclasses.replace(ChildLimits(), memory_bytes=int(memory_limit) << 20)
    return Sandbox(impl, env, grading=grading, limits=limits, user=user, tasks=tasks, graded=GRADED)
