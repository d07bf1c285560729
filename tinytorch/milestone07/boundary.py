"""What Milestone 07 tells the sandbox, and the one way the milestone opens one.

The sandbox knows nothing of milestones: it is told the graded names (the five functions and
the Function class the backward check calls), the bundled reference to keep out of a grading
child, how to fingerprint the reference's code, and the registry of our own Part B tasks.
"""

from __future__ import annotations

import dataclasses

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
    """A Sandbox for a Milestone 07 submission; memory_limit (MB) caps only the address space."""
    if memory_limit is not None:
        limits = dataclasses.replace(ChildLimits(), memory_bytes=int(memory_limit) << 20)
    return Sandbox(impl, env, grading=grading, limits=limits, user=user, tasks=tasks, graded=GRADED)
