"""Fingerprints of the bundled reference's solution code, to find a copy of it in a submission.

Importing `tinytorch.perf.acceleration` is refused while grading, but its source can still be read
and exec'd, or copied into a file at run time. A function's fingerprint is a hash of its bytecode
and the names it uses (nested code objects included), not of its file or its local names, so such a
copy has the reference's fingerprint wherever it was compiled. Only the places that hold solution
code (those the student edition stubs) are fingerprinted: the argument checks it keeps are shared
by design.

The parent computes the reference's fingerprints (`reference_fingerprints`); the child, which never
imports the reference, looks for them among every function alive after the student's import that
did not come from the student's own file (`copies_of`). The child's side imports nothing of the grader's.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import types
from typing import Any

from tinytorch.milestone07.submission import compiled_in


def code_fingerprint(code: types.CodeType) -> str:
    """sha256 of the bytecode and referenced names of `code` and every code object nested in it."""
    h = hashlib.sha256()

    def feed(c: types.CodeType) -> None:
        h.update(c.co_code)
        h.update("\0".join(c.co_names).encode())
        for const in c.co_consts:
            if isinstance(const, types.CodeType):
                feed(const)

    feed(code)
    return h.hexdigest()


def reference_fingerprints() -> dict[str, str]:
    """{fingerprint: place} of the bundled reference's solution code (parent side), computed once
    per grader process: every grading child start (a restart after each hang or crash) sends it."""
    return dict(_reference_fingerprints())


@functools.cache
def _reference_fingerprints() -> dict[str, str]:
    from tinytorch.perf import acceleration as ref
    from tinytorch.release import make_student_source, reference_path, stub_places

    # The places that hold solution code: exactly those the student edition turns into stubs.
    places = stub_places(make_student_source(reference_path(17).read_text()))
    out = {}
    for place in places:
        obj: Any = ref
        for part in place.split("."):
            obj = getattr(obj, part)
        out[code_fingerprint(obj.__code__)] = place
    return out


def copies_of(prints: dict[str, str], student_file: str) -> list[str]:
    """The reference places whose code is alive in this process but was not compiled from the
    student's own file (child side, after the import): exec'd, or loaded from elsewhere.

    Reference code written into the submission itself is a similarity question (the class
    grader's flags), not a disguised import, so it is not counted here.
    """
    found = set()
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType):
            place = prints.get(code_fingerprint(obj.__code__))
            if place is not None and not compiled_in(obj.__code__, student_file):
                found.add(place)
    return sorted(found)
