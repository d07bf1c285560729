"""Choosing the graded file of a folder submission: one rule for every route (the sandbox is told
the graded names, as it is told everything of the milestone: milestone07.cases.GRADED_NAMES).

`tito milestone run --impl DIR`, `tito grade-class`, Gradescope and PrairieLearn all choose with
`choose`, from bytes already read (a `stage.Staged`: the submission is read once, and the choice
is made on the same bytes that are graded):

1. `acceleration.py`, else `acceleration.ipynb` (the course's Module 17 file) wins, the shallowest
   one; two at the same depth is the error of rule 3;
2. otherwise the only `.py` or `.ipynb` file whose top level defines a graded name (a `def`, a
   `class` or an assignment of `tiled_matmul`, ...; an import is not a definition): a student's
   own `test_mine.py` that imports and calls them is not a candidate;
3. otherwise no file is graded, and the reason lists the candidates.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Collection

from tinytorch.sandbox import stage
from tinytorch.sandbox.child.exports import is_exported_cell

PREFERRED = ("acceleration.py", "acceleration.ipynb")  # in this order, at the same depth
SUFFIXES = (".py", ".ipynb")
MAX_LISTED = 6  # candidates named in an error; the rest are counted


def _depth(rel: str) -> int:
    return rel.count("/")


def _code_of(rel: str, blob: bytes) -> list[str]:
    """The Python sources that run of a file: a .py whole (a UTF-8 BOM dropped, as import does),
    or a notebook's exported code cells (only those run); [] for what cannot be read as either."""
    text = blob.decode("utf-8-sig", errors="replace")
    if not rel.endswith(".ipynb"):
        return [text]
    try:  # any malformed or hostile JSON (a number as a cell's source, deep nesting) is none
        cells = json.loads(text).get("cells", [])
        out = []
        for cell in cells if isinstance(cells, list) else []:
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            src = cell.get("source", "")
            src = "".join(p for p in src if isinstance(p, str)) if isinstance(src, list) else src
            if isinstance(src, str) and is_exported_cell(src):
                out.append(src)
        return out
    except Exception:  # noqa: BLE001 - a student's file never stops the choice
        return []


def _bound(target: ast.expr) -> list[str]:
    """The names an assignment target binds (`a`, `a, b = ...`, `[a, *b] = ...`)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for t in target.elts for n in _bound(t)]
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    return []


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The module's statements, those inside a top-level if / try / with / for included (a
    `try: import numba ... except: def tiled_matmul...` still defines it)."""
    out, todo = [], list(body)
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, (ast.If, ast.For, ast.While, ast.With, ast.AsyncWith, ast.AsyncFor)):
            todo += [*node.body, *node.orelse] if hasattr(node, "orelse") else node.body
        elif isinstance(node, ast.Try):
            todo += [*node.body, *node.orelse, *node.finalbody]
            todo += [s for h in node.handlers for s in h.body]
    return out


def defined_names(rel: str, blob: bytes) -> set[str]:
    """The names the top level of a .py (or of a notebook's exported cells) defines: def, class,
    assignment, inside a top-level if / try / with too; an import is not a definition. A cell or
    file that does not parse defines nothing."""
    names: set[str] = set()
    for source in _code_of(rel, blob):
        try:
            tree = ast.parse(source)
        except Exception:  # noqa: BLE001, S112 - SyntaxError, ValueError, RecursionError: none
            continue
        for node in _top_level(tree.body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(n for t in node.targets for n in _bound(t))
            elif isinstance(node, ast.AnnAssign):
                names.update(_bound(node.target))
    return names


def _listed(rels: list[str]) -> str:
    shown = ", ".join(rels[:MAX_LISTED])
    return shown + (f" and {len(rels) - MAX_LISTED} more" if len(rels) > MAX_LISTED else "")


def choose(staged: stage.Staged, names: Collection[str]) -> tuple[str | None, str]:
    """(the graded file's path relative to the submission, "") or (None, why, candidates named)."""
    files = sorted(r for r in staged.blobs if r.endswith(SUFFIXES))
    for preferred in PREFERRED:
        found = [r for r in files if r.rsplit("/", 1)[-1] == preferred]
        if found:
            top = min(_depth(r) for r in found)
            found = [r for r in found if _depth(r) == top]
            if len(found) == 1:
                return found[0], ""
            return None, (
                f"{len(found)} files named {preferred} ({_listed(found)}): keep one, "
                "or leave only one folder"
            )
    wanted = set(names)
    defining = [r for r in files if defined_names(r, staged.blobs[r]) & wanted]
    if len(defining) == 1:
        return defining[0], ""
    graded = ", ".join(sorted(wanted))
    if defining:
        return None, (
            f"{len(defining)} files define the graded functions ({_listed(defining)}) and none "
            f"is named {PREFERRED[0]} or {PREFERRED[1]}: rename the one to grade"
        )
    if files:
        return None, (
            f"no {PREFERRED[0]} or {PREFERRED[1]}, and none of {_listed(files)} defines any of "
            f"{graded}"
        )
    return None, f"no {PREFERRED[0]}, {PREFERRED[1]} or other .py or .ipynb file in the folder"


REFUSED = "not graded: "  # the start of submission()'s answer when the rule's file was refused


def _refused_course_file(staged: stage.Staged, chosen: str | None) -> str | None:
    """Why an acceleration.py or .ipynb that the rule would prefer to `chosen` was not staged
    (it sits no deeper: a 5 MB acceleration.py beside old/acceleration.py), else None."""
    for why in staged.skipped:
        rel = why.split(": ", 1)[0]
        if rel.rsplit("/", 1)[-1] not in PREFERRED:
            continue
        if chosen is None or _depth(rel) <= _depth(chosen):
            return why
    return None


def keep_candidates(entry: stage.Entry) -> bool:
    """What a folder submission stages: its .py and .ipynb files, at any depth within the caps."""
    return entry.name.endswith(SUFFIXES)


def submission(staged: stage.Staged, names: Collection[str]) -> stage.Staged | str:
    """The chosen file's part of a staged folder, re-rooted at the chosen file's folder: the file
    and the `.py` files beside it (its helpers, which it may import); a str says why none."""
    chosen, why = choose(staged, names)
    refused = _refused_course_file(staged, chosen)
    if refused:  # the rule's own file, refused (too large, a FIFO): never an older file instead
        return f"{REFUSED}{refused}"
    if chosen is None:
        return why
    folder, _, name = chosen.rpartition("/")
    prefix = f"{folder}/" if folder else ""
    blobs = {
        rel.removeprefix(prefix): blob
        for rel, blob in staged.blobs.items()
        if rel.startswith(prefix)
        and "/" not in rel.removeprefix(prefix)
        and (rel == chosen or rel.endswith(".py"))
    }
    return stage.Staged(
        files=sorted(blobs), skipped=list(staged.skipped), blobs=blobs, main=name, chosen=chosen
    )
