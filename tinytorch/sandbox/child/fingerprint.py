"""Fingerprints of the bundled reference's solution code, to find a copy of it in a submission.

Importing `tinytorch.perf.acceleration` is refused while grading, but its source can still be read
and exec'd, or copied into a file at run time. A function's fingerprint is a hash of its bytecode
and the names it uses (nested code objects included), not of its file or its local names, so such a
copy has the reference's fingerprint wherever it was compiled. Only the places that hold solution
code (those the student edition stubs) are fingerprinted: the argument checks it keeps are shared
by design.

The grader computes the reference's fingerprints (`tinytorch.milestone07.own_work`); the child,
which never imports the reference, fingerprints the submission's own text before importing it
(`source_fingerprints`), then looks for the reference's among every function alive after the
import whose code that text does not define (`copies_of`).
"""

from __future__ import annotations

import gc
import hashlib
import types

from tinytorch.sandbox.child.exports import code_units


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


def source_fingerprints(path: str) -> set[str]:
    """Fingerprints of every function the submission's own source text defines (child side,
    BEFORE its import runs any of it): what compiling the file, or its exported cells, gives.
    Empty when it does not compile (the import then reports why)."""
    found: set[str] = set()

    def walk(code: types.CodeType) -> None:
        found.add(code_fingerprint(code))
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                walk(const)

    try:
        units = code_units(path)
        for filename, source in units:
            walk(compile(source, filename, "exec", dont_inherit=True))
    except Exception:  # noqa: BLE001 (a submission that does not compile has no own code)
        return set()
    return found


def copies_of(prints: dict[str, str], own: set[str]) -> list[str]:
    """The reference places whose code is alive in this process (child side, after the import)
    and is not in the submission's own text (`own`: source_fingerprints, taken before the import):
    exec'd, loaded from elsewhere, or compiled at run time under the student's file name.

    Reference code written into the submission itself is a similarity question (the class
    grader's flags), not a disguised import, so it is not counted here. The test is the text,
    not the code's file name: exec(compile(reference_source, __file__, "exec")) gave code "from"
    the student's file, and passed (found by red-teaming).
    """
    found = set()
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType):
            fingerprint = code_fingerprint(obj.__code__)
            place = prints.get(fingerprint)
            if place is not None and fingerprint not in own:
                found.add(place)
    return sorted(found)
