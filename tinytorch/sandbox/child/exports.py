"""A submission in the course's formats, turned into the Python source that is graded.

    acceleration.py            a plain module: graded as it is
    acceleration.ipynb         a Jupyter notebook (read with nbformat)
    acceleration.py + markers  a jupytext percent file (`# %%` cells, read here in one pass) that
                               marks its cells the nbdev way: `#| default_exp perf.acceleration`
                               once, `#| export` on every cell that belongs to the module

For a notebook or a marked file, the module is the exported code cells only, in order; every
other cell (scratch work, tests, timings) is left out and never runs. Reading is data only: no
cell is executed here. A notebook without an exported cell is a SubmissionError (an ImportError)
whose message says how to mark one.

Error locations point at the student's own file: a percent file's exported cells keep the lines
they have in the file (the cells left out become blank lines), and each exported cell of a
notebook is compiled on its own under the name `acceleration.ipynb[cell k]` (k counts every cell
of the notebook from 1, markdown cells included), so an error reads `acceleration.ipynb[cell 5]:3`.
"""

from __future__ import annotations

import ast
import os
import re
import types
from pathlib import Path
from typing import Any

EXPORT_DIRECTIVES = ("export", "exports", "exporti")  # nbdev's names for "this cell is code"
# An nbdev directive line: `#| export`, `#|export`, `# | export`, with an optional argument.
_DIRECTIVE = re.compile(r"^#\s*\|\s*(?P<name>[\w-]+)(?P<arg>.*)$")


class SubmissionError(ImportError):
    """The submission cannot become a module (no exported cell, unreadable notebook)."""


def _directives(source: str) -> list[str]:
    """The nbdev directive names at the top of one cell's source (comment lines before code)."""
    names = []
    for line in source.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        match = _DIRECTIVE.match(stripped)
        if match is None:
            break  # directives come first in a cell
        names.append(match.group("name"))
    return names


def is_exported_cell(source: str) -> bool:
    """Whether one notebook cell is part of the module (`#| export` at its top)."""
    return any(name in EXPORT_DIRECTIVES for name in _directives(source))


def has_nbdev_markers(text: str) -> bool:
    """True when a .py file marks cells the nbdev way (`#| default_exp` or `#| export`)."""
    for line in text.splitlines():
        match = _DIRECTIVE.match(line.strip())
        if match and match.group("name") in ("default_exp", *EXPORT_DIRECTIVES):
            return True
    return False


def is_notebook_like(path: str | Path) -> bool:
    """A .ipynb, or a .py with nbdev markers: a file whose exported cells are the module."""
    path = Path(path)
    if path.suffix == ".ipynb":
        return True
    if path.suffix != ".py" or not path.is_file():
        return False
    return has_nbdev_markers(path.read_text(encoding="utf-8", errors="replace"))


def _read_notebook(path: Path) -> Any:
    """The notebook (an nbformat NotebookNode). nbformat is imported here, when a notebook is
    actually graded."""
    import nbformat

    try:
        return nbformat.read(path, as_version=4)
    except Exception as exc:  # noqa: BLE001 (nbformat raises several kinds)
        raise SubmissionError(f"{path.name}: could not be read as a notebook: {exc}") from None


# A percent file's cell marker (jupytext's `# %%`, also `#%%`), with an optional title and
# `[markdown]` / `[md]` / `[raw]` kind. `# %%%` is not one.
_MARKER = re.compile(r"^#\s*%%(?!%)(?P<rest>.*)$")
_NOT_CODE = re.compile(r"\[\s*(markdown|md|raw)\s*\]")
_LINES = re.compile(r"\r\n|\r|\n")  # Python's own line ends, and only those


def _percent_cells(lines: list[str]) -> list[tuple[int, int]]:
    """(first line, end line) of each exported code cell of a percent file, in one pass: a cell
    runs from the line after its marker to the next marker (the lines before the first marker
    are a cell too)."""
    out: list[tuple[int, int]] = []
    start, code = 0, True

    def close(end: int) -> None:
        if code and set(_directives_of(lines, start, end)) & set(EXPORT_DIRECTIVES):
            out.append((start, end))

    for i, line in enumerate(lines):
        match = _MARKER.match(line)
        if match:
            close(i)
            start, code = i + 1, not _NOT_CODE.search(match.group("rest"))
    close(len(lines))
    return out


def _directives_of(lines: list[str], start: int, end: int) -> list[str]:
    """The nbdev directive names at the top of lines[start:end] (comment lines before code);
    reads only up to the first line that is not one."""
    names = []
    for i in range(start, end):
        stripped = lines[i].strip()
        if not stripped:
            continue
        match = _DIRECTIVE.match(stripped)
        if match is None:
            break
        names.append(match.group("name"))
    return names


def cell_name(path: str | Path, index: int) -> str:
    """The file name a notebook's cell is compiled under: `<path>[cell <index>]`."""
    return f"{path}[cell {index}]"


_CELL = re.compile(r"^(?P<path>.*\.ipynb)\[cell \d+\]$")  # only a notebook has cells


def source_path(filename: str) -> str:
    """The file a code object was compiled from: a notebook cell's name gives the notebook."""
    match = _CELL.match(filename)
    return match.group("path") if match else filename


def compiled_in(code: types.CodeType, file: str) -> bool:
    """Whether `code` was compiled from `file` (a real path), or from one of its cells."""
    return os.path.realpath(source_path(code.co_filename)) == file


_NO_CELL = (
    "has no exported cell: mark each code cell that belongs to the module with a first line "
    "`#| export` (nbdev style); only exported cells are graded"
)


def _cell_source(path: Path, index: int, cell: Any) -> str:
    """A notebook cell's source as text; a SubmissionError naming the cell when it is not text
    (a hand-edited notebook: an integer, a list of numbers)."""
    source = cell.get("source", "") if isinstance(cell, dict) else None
    if isinstance(source, list) and all(isinstance(part, str) for part in source):
        source = "".join(source)
    if not isinstance(source, str):
        raise SubmissionError(
            f"{path.name}: cell {index} has a source that is not text "
            f"({type(source).__name__}): not a valid notebook"
        )
    return source


def _exported_cells(path: Path) -> list[tuple[int, str]]:
    """(index from 1 among all the notebook's cells, source) of each exported code cell."""
    nb = _read_notebook(path)
    cells = []
    for index, cell in enumerate(nb.get("cells") or [], start=1):
        source = _cell_source(path, index, cell)
        kind = cell.get("cell_type")
        if kind == "code" and set(_directives(source)) & set(EXPORT_DIRECTIVES):
            cells.append((index, source))
    if not cells:
        raise SubmissionError(f"{path.name} {_NO_CELL}")
    return cells


def _at_their_lines(path: Path, text: str) -> str:
    """A percent file's exported cells, each on the lines it has in the file, every other line
    blank: line N of the module is line N of the file. One pass over the lines (a file of many
    thousand cells took minutes when each cell was searched for in the file)."""
    lines = _LINES.split(text)
    cells = _percent_cells(lines)
    if not cells:
        raise SubmissionError(f"{path.name} {_NO_CELL}")
    out = [""] * len(lines)
    for start, end in cells:
        out[start:end] = lines[start:end]
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n"


def code_units(path: str | Path) -> list[tuple[str, str]]:
    """(file name, source) pairs that make the module, compiled and run in order: the file itself;
    a percent file's exported cells at their own lines; a notebook's exported cells, one each,
    named by `cell_name`. Raises SubmissionError when a notebook or marked file has none."""
    path = Path(path)
    if path.suffix == ".ipynb":
        return [(cell_name(path, index), source) for index, source in _exported_cells(path)]
    return [(str(path), exported_source(path))]


def exported_source(path: str | Path) -> str:
    """The module source of a submission: the file itself, a percent file's exported cells at
    their own lines, or a notebook's exported cells joined.

    Raises SubmissionError when a notebook or marked file has no `#| export` cell.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8", errors="replace") if path.suffix != ".ipynb" else ""
    if path.suffix != ".ipynb" and not has_nbdev_markers(text):
        return text
    if path.suffix != ".ipynb":
        return _at_their_lines(path, text)
    cells = [source for _index, source in _exported_cells(path)]
    return "\n\n".join(source.rstrip() + "\n" for source in cells)


def _raises_not_implemented(node: ast.stmt) -> bool:
    if not isinstance(node, ast.Raise) or node.exc is None:
        return False
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def stub_places(source: str) -> list[str]:
    """Qualnames ("im2col", "Im2colConv2dFunction.backward") of the functions and methods in
    `source` whose body raises NotImplementedError unconditionally: the stubs still to write.

    Only a `raise NotImplementedError(...)` directly in the body counts (after argument checks,
    as `make_student_source` leaves it), not one inside an `if`. Unparsable source has none.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    places: list[str] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _raises_not_implemented(stmt) for stmt in node.body
            ):
                places.append(prefix + node.name)

    visit(tree.body, "")
    return places
