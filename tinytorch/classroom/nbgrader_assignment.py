"""Milestone 07 as an nbgrader assignment: the course directory, its config, the source notebook.

    COURSE/nbgrader_config.py            root "assignments", course_id "tinytorch", and our
                                         SandboxGrade in Execute's place (nbgrader_grade.py)
    COURSE/assignments/source/07_custom_kernels/07_custom_kernels.ipynb
                                         the reference Module 17 cut into cells: a solution cell
                                         per graded function and for Im2colConv2dFunction, the
                                         rest locked; then the report cell and the graded cells
    COURSE/assignments/tinytorch_points.json
                                         the points the cells were generated with (autograde
                                         scores with the same; never released to students)

Every module cell is marked `#| export`, as the course's notebooks are, so `tito grade-class
--notebook` and `tito milestone run 07 --impl NOTEBOOK` grade the same code nbgrader does. The
graded cells name no hidden case: those are drawn from a secret seed when the notebook is graded.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

from tinytorch.classroom.nbgrader_layout import ASSIGNMENT, REPORT_ID, cell_points, graded_cells
from tinytorch.milestone07.scoring import DEFAULT_POINTS, Points

COURSE_ID = "tinytorch"
ROOT = "assignments"  # the course directory, relative to the folder holding nbgrader_config.py
POINTS_FILE = "tinytorch_points.json"  # in the course directory, beside source/
EXECUTE_TIMEOUT_S = 120  # the course's; only nbgrader's validate runs cells now
# The functions whose bodies the student writes (each a solution cell); every other solution
# region of the reference (vectorized_matmul, unfused_gelu: not graded) keeps its body, locked.
SOLUTION_DEFS = (
    "tiled_matmul",
    "fused_gelu",
    "im2col",
    "col2im",
    "Im2colConv2dFunction",
    "im2col_conv2d",
)
_BEGIN, _END = "### BEGIN SOLUTION", "### END SOLUTION"
_HINT = re.compile(r"^\s*#\s*HINT:")
_MENTION = re.compile(r"\b(BEGIN|END) SOLUTION\b")

CONFIG = f'''"""nbgrader configuration of the TinyTorch course (written by `tito nbgrader init`).

Autograde runs no student code in this process or in a kernel of the grader's: SandboxGrade takes
the place of nbgrader's Execute and grades each notebook's solution cells in the milestone's
sandbox (grading mode), then writes each graded cell's outcome for SaveAutoGrades.
"""

import os

from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    IgnorePattern,
    LimitOutput,
    SaveAutoGrades,
)

from tinytorch.classroom.nbgrader_grade import SandboxGrade

HERE = os.path.dirname(os.path.abspath(__file__))  # the course folder
c = get_config()  # noqa: F821 (traitlets defines it, and __file__)
c.CourseDirectory.root = os.path.join(HERE, "{ROOT}")  # absolute, as nbgrader wants it
c.CourseDirectory.course_id = "{COURSE_ID}"
c.Execute.timeout = {EXECUTE_TIMEOUT_S}
c.Autograde.autograde_preprocessors = [
    SandboxGrade,  # in Execute's place
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
# absolute: nbgrader runs preprocessors from the notebook's folder
c.SandboxGrade.points_file = os.path.join(HERE, "{ROOT}", "{POINTS_FILE}")
'''


def init_course(folder: str | Path) -> Path:
    """Write FOLDER/nbgrader_config.py and FOLDER/assignments/source/; returns the config path.
    An existing config is kept only when it is ours, unchanged (raises FileExistsError)."""
    folder = Path(folder)
    (folder / ROOT / "source").mkdir(parents=True, exist_ok=True)
    config = folder / "nbgrader_config.py"
    if config.exists() and config.read_text(encoding="utf-8") != CONFIG:
        raise FileExistsError(f"{config} exists and is not tito's: move it away first")
    config.write_text(CONFIG, encoding="utf-8")
    return config


def _metadata(**nbgrader: Any) -> dict[str, Any]:
    base = {"grade": False, "solution": False, "locked": False, "schema_version": 3}
    return {"nbgrader": {**base, **nbgrader}}


def _strip_regions(text: str) -> str:
    """A locked chunk: the reference's solution markers dropped, the body kept."""
    return "".join(ln for ln in text.splitlines(keepends=True) if ln.strip() not in (_BEGIN, _END))


def _hints_outside(text: str) -> str:
    """A solution chunk: the `# HINT:` comment lines that open a region moved above its BEGIN
    marker, so they stay in the released notebook (nbgrader clears the whole region)."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != _BEGIN:
            out.append(lines[i])
            i += 1
            continue
        j = i + 1
        if j < len(lines) and _HINT.match(lines[j]):
            while j < len(lines) and lines[j].lstrip().startswith("#"):
                j += 1
        out += [*lines[i + 1 : j], lines[i]]  # the hint, then BEGIN
        i = j
    return "".join(out)


def module_chunks(source: str) -> list[tuple[str, str]]:
    """The reference cut at its top-level statements into (name, text) cells: the name of a
    solution def (SOLUTION_DEFS), or "" for locked code, consecutive locked code joined."""
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    starts: list[tuple[int, str]] = []
    for node in tree.body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        name = getattr(node, "name", "")
        starts.append((first - 1, name if name in SOLUTION_DEFS else ""))
    # a comment block right above a statement belongs to it
    bounds = []
    for start, name in starts:
        while start > 0 and lines[start - 1].lstrip().startswith("#"):
            start -= 1
        bounds.append((start, name))
    bounds[0] = (0, bounds[0][1])
    chunks: list[tuple[str, str]] = []
    for (start, name), (end, _) in zip(bounds, [*bounds[1:], (len(lines), "")], strict=True):
        text = "".join(lines[start:end])
        if not name and chunks and not chunks[-1][0]:
            chunks[-1] = ("", chunks[-1][1] + text)
        else:
            chunks.append((name, text))
    return [
        (n, _unmention((_hints_outside(t) if n else _strip_regions(t)).strip("\n")) + "\n")
        for n, t in chunks
    ]


def _unmention(text: str) -> str:
    """Text that mentions a marker without being one (the reference's docstring does) made
    harmless: nbgrader takes any line holding "BEGIN SOLUTION" for a region's start."""
    return "\n".join(
        ln if ln.strip() in (_BEGIN, _END) else _MENTION.sub(r"\1-SOLUTION", ln)
        for ln in text.split("\n")
    )


def _code(text: str, **nbgrader: Any) -> dict[str, Any]:
    from nbformat.v4 import new_code_cell

    return new_code_cell(text, metadata=_metadata(**nbgrader))  # with its cell id


def _markdown(text: str) -> dict[str, Any]:
    from nbformat.v4 import new_markdown_cell

    return new_markdown_cell(text)


INTRO = """# Milestone 07: custom kernels

Write the bodies of the Module 17 kernels below, where each cell says `# YOUR CODE HERE`: tiled
matmul, fused GELU, im2col, col2im, the convolution's autograd node and the convolution itself.
The other code cells are locked: they hold the imports, the argument checks and the helpers your
kernels use.

To check your kernels while you work, in a terminal:
`tito milestone run 07 --impl 07_custom_kernels.ipynb` (it grades the `#| export` cells).

When the notebook is graded, your code runs in the course's sandbox, never in the grader's
kernel: on the 30 published cases, the deeper checks, and hidden cases drawn from a secret seed.
The graded cells at the end show what each part is worth; after grading, they hold your results,
with the root cause of each failure and how to fix it."""

_CELL_TEXT = """# {title}: {points:g} points. {what}
# Graded in the course's sandbox when the notebook is autograded: your code never runs in the
# grader's kernel, and this cell only says so.
from tinytorch.classroom.nbgrader_cell import graded_in_sandbox

graded_in_sandbox({grade_id!r})
"""


def _cell_what(kind: str, n: int) -> str:
    if kind == "hidden_case":
        return f"{n} cases drawn from a secret seed at grading time."
    if kind == "case":
        return f"{n} published cases, as `tito milestone run 07` lists them."
    return "One deeper check, as `tito milestone run 07` reports it."


def source_notebook(reference: str, points: Points) -> dict[str, Any]:
    """The source assignment's notebook (nbformat 4, as a dict) from the reference's text."""
    from tinytorch.classroom.nbgrader_layout import cell_of
    from tinytorch.milestone07.scoring import Item, assignment_items

    cells = [_markdown(INTRO)]
    for i, (name, text) in enumerate(module_chunks(reference)):
        marker = "#| default_exp perf.acceleration\n#| export\n" if i == 0 else "#| export\n"
        if name:
            cells.append(_markdown(f"## `{name}`"))
            cells.append(_code(marker + text, solution=True, grade_id=f"solution_{name}"))
        else:
            cells.append(_code(marker + text, locked=True, grade_id=f"module_{i}"))
    cells.append(_markdown("## Your results\n\nFilled in when your notebook is graded."))
    report = (
        "# The lesson-first report of your graded run: the verdict, the root causes and their\n"
        "# fixes, then each failing case. Filled in when the notebook is autograded.\n"
    )
    cells.append(_code(report, locked=True, grade_id=REPORT_ID))
    worth = cell_points(points)
    template = [Item(k, n, "", 0.0, 0.0, "", "") for k, n in assignment_items(grading=True)]
    held = cell_of(template)
    for cell in graded_cells():
        text = _CELL_TEXT.format(
            title=cell.title,
            points=worth[cell.grade_id],
            what=_cell_what(cell.kind, len(held[cell.grade_id])),
            grade_id=cell.grade_id,
        )
        cells.append(
            _code(
                text, grade=True, locked=True, grade_id=cell.grade_id, points=worth[cell.grade_id]
            )
        )
    from nbformat.v4 import new_notebook

    return new_notebook(
        cells=cells,
        metadata={
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
    )


def points_doc(points: Points) -> dict[str, Any]:
    """`points` as the points file `scoring.load_points` reads (JSON)."""
    doc: dict[str, Any] = {k: getattr(points, k) for k in DEFAULT_POINTS}
    if points.overrides:
        doc["cases"] = dict(points.overrides)  # load_points reads [cases] and [checks] alike
    return doc


def write_source(course: str | Path, points: Points) -> Path:
    """Stage the source assignment in COURSE (made by init_course); returns the notebook."""
    import nbformat

    from tinytorch.perf import acceleration

    course = Path(course)
    root = course / ROOT
    if not (course / "nbgrader_config.py").is_file() or not (root / "source").is_dir():
        raise FileNotFoundError(
            f"{course}: no course directory here: run `tito nbgrader init` first"
        )
    reference = Path(acceleration.__file__).read_text(encoding="utf-8")
    nb = nbformat.from_dict(source_notebook(reference, points))
    nbformat.validate(nb)
    folder = root / "source" / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{ASSIGNMENT}.ipynb"
    nbformat.write(nb, path)
    (root / POINTS_FILE).write_text(json.dumps(points_doc(points), indent=2) + "\n")
    return path
