"""Grading mode's "own work" facts about the bundled reference, computed on the grader's side.

The reference's modules (refused to a grading child, their files hidden from it) and the
fingerprints of its solution code (sent to the child, which looks for them among the functions
alive after the student's import: `tinytorch.sandbox.child.fingerprint`).
"""

from __future__ import annotations

import functools
from typing import Any

from tinytorch.milestone07.cases import FUNCTIONS
from tinytorch.milestone07.results import CheckResult
from tinytorch.sandbox.child.exports import stub_places
from tinytorch.sandbox.child.fingerprint import code_fingerprint

REFERENCE_MODULES = ("tinytorch.perf.acceleration", "tinytorch.milestone07.references")
BLOCKED = ("tinytorch.perf.acceleration", "tinytorch.milestone07")  # refused while grading


def reference_fingerprints() -> dict[str, str]:
    """{fingerprint: place} of the bundled reference's solution code (parent side), computed once
    per grader process: every grading child start (a restart after each hang or crash) sends it."""
    return dict(_reference_fingerprints())


@functools.cache
def _reference_fingerprints() -> dict[str, str]:
    from tinytorch.perf import acceleration as ref
    from tinytorch.release import make_student_source, reference_path

    # The places that hold solution code: exactly those the student edition turns into stubs.
    places = stub_places(make_student_source(reference_path(17).read_text()))
    out = {}
    for place in places:
        obj: Any = ref
        for part in place.split("."):
            obj = getattr(obj, part)
        out[code_fingerprint(obj.__code__)] = place
    return out


REFERENCE_USE = "uses the bundled reference solution"


def reference_use(info: dict[str, Any]) -> str | None:
    """Why the loaded module is the bundled reference (the sandbox's load info), or None: its own work.

    Missing "origins"/"imports_reference" keys (a sandbox that does not report them) count as
    the student's own.
    """
    origins = info.get("origins") or {}
    borrowed = sorted(f for f in FUNCTIONS if origins.get(f) == "reference")
    why = []
    if borrowed:
        why.append(f"{', '.join(borrowed)} {'is' if len(borrowed) == 1 else 'are'} its own objects")
    if info.get("imports_reference"):
        why.append(f"the module imports {' or '.join(REFERENCE_MODULES)}")
    if info.get("copies_reference"):
        why.append(f"it runs a copy of the reference's {', '.join(info['copies_reference'])}")
    return f"{REFERENCE_USE}: {'; '.join(why)}" if why else None


def own_work_check(info: dict[str, Any]) -> CheckResult:
    """Grading mode's check that the graded functions are not the bundled reference's."""
    why = reference_use(info)
    if why:
        lesson = "Grade your own Module 17: write the five functions in your file."
        return CheckResult("own work", "fail", why, lesson, [])
    if "origins" not in info:
        return CheckResult("own work", "pass", "origins not reported by this sandbox", "", [])
    return CheckResult("own work", "pass", "no graded function is the bundled reference's", "", [])
