"""Fingerprints of the bundled reference's solution code, to find a copy of it in a submission.

Importing `tinytorch.perf.acceleration` is refused while grading, but its source can still be read
and exec'd, or copied into a file at run time. A function's fingerprint is a hash of its bytecode
and the names it uses (nested code objects included), not of its file or its local names, so such a
copy has the reference's fingerprint wherever it was compiled. Only the places that hold solution
code long enough to be a solution are fingerprinted (those the student edition stubs, less the
one-line calls its hints spell out: `tinytorch.milestone07.own_work`): the argument checks it keeps,
and a body the stub's hint describes, are shared by design.

The grader computes the reference's fingerprints; the child, which never imports the reference,
fingerprints the submission's own text before importing it: every file staged with it
(`folder_fingerprints`: a folder submission's helper files as well as its main file), then looks
for the reference's among every function alive after the import whose code that text does not
define (`copies_of`).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import stat
import types

from tinytorch.sandbox.child.exports import code_units, is_notebook_like
from tinytorch.sandbox.child.load import FUTURE_FLAGS

# Bounds of the walk over a stage (it holds only what staging copied: these are a second fence)
MAX_OWN_FILES = 64  # source files fingerprinted
MAX_OWN_BYTES = 8 << 20  # bytes of them read in all
MAX_OWN_DEPTH = 8  # folder levels below the stage
MAX_OWN_ENTRIES = 4096  # folder entries looked at
SOURCE_SUFFIXES = (".py", ".ipynb")


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


def _walk(code: types.CodeType, found: set[str]) -> None:
    found.add(code_fingerprint(code))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _walk(const, found)


def source_fingerprints(path: str) -> set[str]:
    """Fingerprints of every function the submission's own source text defines (child side,
    BEFORE its import runs any of it): what compiling the file, or its exported cells, gives;
    for a .py, what importing it whole gives as well (a helper file is imported whole, its
    coding line honoured). Empty when none of it compiles (the import then reports why)."""
    found: set[str] = set()
    # A file (or a cell) that does not compile, or cannot be read, has no own code.
    if path.endswith(".py"):
        with contextlib.suppress(Exception):
            with open(path, "rb") as fh:
                data = fh.read(MAX_OWN_BYTES + 1)
            if len(data) <= MAX_OWN_BYTES:
                _walk(compile(data, path, "exec", dont_inherit=True), found)
    with contextlib.suppress(Exception):
        if path.endswith(".ipynb") or is_notebook_like(path) or not found:
            flags = 0  # as the import compiles them: a cell's __future__ holds for those after it
            for filename, source in code_units(path):
                code = compile(source, filename, "exec", flags=flags, dont_inherit=True)
                flags |= code.co_flags & FUTURE_FLAGS
                _walk(code, found)
    return found


def folder_fingerprints(folder: str) -> set[str]:
    """source_fingerprints of every .py and .ipynb regular file under `folder` (the child's stage:
    the main file and the helper files staged with it), before any of them runs. Links are not
    followed; the walk stops at MAX_OWN_FILES files, MAX_OWN_BYTES bytes, MAX_OWN_DEPTH levels
    and MAX_OWN_ENTRIES entries."""
    found: set[str] = set()
    files = entries = 0
    total = 0
    todo = [(folder, 0)]
    while todo and files < MAX_OWN_FILES:
        here, depth = todo.pop()
        try:
            listing = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError:
            continue
        for entry in listing:
            entries += 1
            if entries > MAX_OWN_ENTRIES or files >= MAX_OWN_FILES:
                return found
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and depth < MAX_OWN_DEPTH:
                todo.append((entry.path, depth + 1))
            elif stat.S_ISREG(st.st_mode) and entry.name.endswith(SOURCE_SUFFIXES):
                if total + st.st_size > MAX_OWN_BYTES:
                    continue
                files += 1
                total += st.st_size
                found |= source_fingerprints(entry.path)
    return found


def copies_of(prints: dict[str, str], own: set[str]) -> list[str]:
    """The reference places whose code is alive in this process (child side, after the import)
    and is not in the submission's own text (`own`: folder_fingerprints of its stage, taken
    before the import): exec'd, loaded from elsewhere, or compiled at run time under the
    student's file name.

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
