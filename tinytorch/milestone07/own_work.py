"""Grading mode's "own work" facts about the bundled reference, computed on the grader's side.

The reference's modules (refused to a grading child, their files hidden from it) and the
fingerprints of its solution code (sent to the child, which looks for them among the functions
alive after the student's import that the submission's own staged files do not define:
`tinytorch.sandbox.child.fingerprint`).

The length rule: a place counts as the reference's only when its solution region (what the
student edition stubs) holds at least MIN_SOLUTION_STATEMENTS simple statements. A one-line call
of a library or a helper (`with no_grad(): return Im2colConv2dFunction.apply(...)`, one
`np.matmul`) is what the stub's hint spells out: a student following the hint writes the same
bytecode, so such a place is never fingerprinted.
"""

from __future__ import annotations

import ast
import functools
from typing import Any

from tinytorch.milestone07.cases import FUNCTIONS
from tinytorch.milestone07.results import CheckResult
from tinytorch.sandbox.child.exports import stub_places
from tinytorch.sandbox.child.fingerprint import code_fingerprint

REFERENCE_MODULES = ("tinytorch.perf.acceleration", "tinytorch.milestone07.references")
BLOCKED = ("tinytorch.perf.acceleration", "tinytorch.milestone07")  # refused while grading
# Simple statements (compound headers not counted) a solution region needs to be fingerprinted:
# the reference's shortest real solutions hold 6; its one-line calls, 1.
MIN_SOLUTION_STATEMENTS = 3
_COMPOUND = (
    ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Match,
)  # fmt: skip


def reference_fingerprints() -> dict[str, str]:
    """{fingerprint: place} of the bundled reference's solution code (parent side), computed once
    per grader process: every grading child start (a restart after each hang or crash) sends it."""
    return dict(_reference_fingerprints())


def solution_sizes(source: str | None = None) -> dict[str, int]:
    """{place ("im2col", "Im2colConv2dFunction.backward"): the simple statements inside its
    `### BEGIN SOLUTION` ... `### END SOLUTION` region} of `source` (default: the Module 17
    reference). Statements nested in a loop, a `with` or an `if` count; the headers do not, nor
    comments or lines a statement spans."""
    from tinytorch.release import BEGIN, END, reference_path

    if source is None:
        source = reference_path(17).read_text(encoding="utf-8")
    regions, begin = [], 0
    for number, line in enumerate(source.splitlines(), start=1):
        if line.strip() == BEGIN:
            begin = number
        elif line.strip() == END and begin:
            regions.append((begin, number))
            begin = 0
    sizes: dict[str, int] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside = [
                    sub
                    for stmt in node.body
                    for sub in ast.walk(stmt)
                    if isinstance(sub, ast.stmt)
                    and not isinstance(sub, _COMPOUND)
                    and any(b < sub.lineno < e for b, e in regions)
                ]
                if inside:
                    sizes[prefix + node.name] = len(inside)

    visit(ast.parse(source).body, "")
    return sizes


@functools.cache
def _reference_fingerprints() -> dict[str, str]:
    from tinytorch.perf import acceleration as ref
    from tinytorch.release import make_student_source, reference_path

    # The places that hold solution code: those the student edition turns into stubs, whose
    # solution is long enough to be one (the length rule, above).
    source = reference_path(17).read_text(encoding="utf-8")
    sizes = solution_sizes(source)
    places = [
        place
        for place in stub_places(make_student_source(source))
        if sizes.get(place, 0) >= MIN_SOLUTION_STATEMENTS
    ]
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
