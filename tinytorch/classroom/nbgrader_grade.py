"""`SandboxGrade`: nbgrader's autograde step with no student code in the grader's kernel.

nbgrader's own Execute runs every cell of a student's notebook in a kernel on the grader's
machine, as the grader: a cell can read classmates' submissions or rewrite gradebook.db. This
preprocessor takes Execute's place (`c.Autograde.autograde_preprocessors`, written by
`tito nbgrader init`) and runs nothing itself:

1. it stages the module: a copy of the notebook whose solution cells are all marked `#| export`,
   written into a private folder (mode 0700); the milestone grades the `#| export` cells, as
   `tito grade-class --notebook` does for the same file;
2. it grades that copy as grade-class grades a student (runner.grade_submission: its own
   process tree running `tito milestone run 07 --grading`, the student's code in the sandbox);
3. it scores the result with the assignment's points (scoring.score_items: one maximum whatever
   happened) and writes each graded cell's outcome: a report on stdout and the points earned as
   the cell's result, or an error output for a cell that earned nothing, which is how nbgrader's
   SaveAutoGrades reads a code cell's score (nbgrader.utils.determine_grade); the report cell
   gets the whole lesson-first report, then the drawing of each group's first failure (the
   milestone's `--plots`, drawn by the grader from what it observed). generate_feedback shows
   these outputs to the student.

A run the grader itself could not finish (verdict ERROR) raises: nbgrader then records no grade
for that notebook and says so, instead of a zero the student did not earn.
"""

from __future__ import annotations

import copy
import os
import re
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Float, Unicode

from tinytorch.classroom.nbgrader_layout import REPORT_ID, cell_of, graded_cells
from tinytorch.classroom.runner import WALL_TIMEOUT_S, grade_submission
from tinytorch.milestone07.scoring import Item, load_points, score_items, total
from tinytorch.render.platforms import diagnosis_shown, item_text, summary_text
from tinytorch.safe_text import clean

_EXPORT = "#| export"
_LEADING_EXPORT = re.compile(r"#\s*\|\s*export")  # nbdev's, as sandbox/child/exports reads it


def _nbgrader(cell: Any) -> dict[str, Any]:
    return (cell.get("metadata") or {}).get("nbgrader") or {}


def module_notebook(nb: Any) -> Any:
    """A copy of `nb` to grade: outputs dropped, every solution cell marked `#| export` (the
    milestone grades a notebook's exported cells, and a solution cell is the student's code
    whether or not they kept the marker)."""
    staged = copy.deepcopy(nb)
    for cell in staged.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        cell.execution_count = None
        first = next((ln.strip() for ln in cell.source.splitlines() if ln.strip()), "")
        if _nbgrader(cell).get("solution") and not _LEADING_EXPORT.match(first):
            cell.source = f"{_EXPORT}\n{cell.source}"  # an extra marker is harmless
    return staged


def _points(x: float) -> str:
    return f"{x:g}"


def cell_report(title: str, items: list[Item], doc: dict[str, Any]) -> str:
    """What one graded cell shows: its points, then each item that did not pass, with its root
    cause's fix or its own lesson; items the run did not reach, counted once."""
    earned, possible = total(items)
    ran = [i for i in items if i.graded]
    passed = sum(i.passed for i in ran)
    lines = [f"{title}: {_points(earned)}/{_points(possible)} points, {passed}/{len(items)} passed"]
    diag = diagnosis_shown(doc, hidden_details=True)
    for item in ran:
        if item.passed:
            continue
        detail, fix = item_text(item, diag)
        lines.append(f"  {item.status.upper():<10} {item.name}: {detail}")
        lines += [f"             {ln}" for ln in fix.splitlines()]
    unreached = [i for i in items if not i.graded]
    if unreached:
        lines.append(f"  {len(unreached)} not reached by the run: {unreached[0].detail}")
    return clean("\n".join(lines))


def _wrap(text: str, width: int = 100) -> str:
    """Long lines folded under their own indentation (a notebook's output does not wrap)."""
    out = []
    for line in text.splitlines():
        lead = " " * (len(line) - len(line.lstrip()) + 2)
        out += textwrap.wrap(line, width, subsequent_indent=lead, break_on_hyphens=False) or [""]
    return "\n".join(out)


def _stream(text: str) -> dict[str, Any]:
    from nbformat.v4 import new_output

    return new_output("stream", name="stdout", text=_wrap(text) + "\n")


MAX_DRAWINGS, MAX_DRAWING_BYTES = 8, 2 * 2**20  # one per group's first failure, and a bound


def read_drawings(folder: Path) -> list[bytes]:
    """The PNGs the milestone drew in `folder` (the grader's own: the student cannot reach it),
    in name order: regular files only, at most MAX_DRAWINGS of at most MAX_DRAWING_BYTES each."""
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.iterdir())[: 4 * MAX_DRAWINGS]:
        regular = path.is_file() and not path.is_symlink()
        if path.suffix == ".png" and regular and path.stat().st_size <= MAX_DRAWING_BYTES:
            found.append(path.read_bytes())
    return found[:MAX_DRAWINGS]


def _png(data: bytes) -> dict[str, Any]:
    import base64

    from nbformat.v4 import new_output

    return new_output("display_data", data={"image/png": base64.b64encode(data).decode("ascii")})


def outcome(text: str, earned: float, possible: float) -> list[Any]:
    """A graded cell's outputs as SaveAutoGrades scores them: an error output when it earned
    nothing (0 points), else the report and the points earned as the cell's result."""
    from nbformat.v4 import new_output

    if earned <= 0 < possible:
        head = text.splitlines()[0]
        lines = _wrap(text).splitlines()
        return [new_output("error", ename="NotPassed", evalue=head, traceback=lines)]
    result = new_output("execute_result", data={"text/plain": _points(earned)}, execution_count=1)
    return [_stream(text), result]


class SandboxGrade(NbGraderPreprocessor):
    """Grade the notebook's solution cells in the milestone's sandbox, in grading mode; write
    each graded cell's outcome. Configured in Execute's place (module docstring)."""

    points_file = Unicode(
        "", help="the points file the assignment was generated with (TOML or JSON)"
    ).tag(config=True)
    wall_timeout = Float(WALL_TIMEOUT_S, help="seconds for one notebook's whole run").tag(
        config=True
    )
    case_timeout = Float(None, allow_none=True, help="seconds per case (default 5)").tag(
        config=True
    )

    def grade(self, nb: Any, name: str) -> tuple[dict[str, Any], list[bytes]]:
        """The milestone's grading-mode doc for `nb` (staged privately, graded in a process tree
        of its own, the student's code in the sandbox), and the PNG drawings of each group's first
        failure, as the milestone process drew them (`--plots`)."""
        import nbformat

        with tempfile.TemporaryDirectory(prefix="tt-nbgrader-") as tmp:
            os.chmod(tmp, 0o700)
            impl = Path(tmp) / f"{name}.ipynb"
            nbformat.write(module_notebook(nb), impl)
            doc, _run = grade_submission(
                impl,
                Path(tmp) / "work",
                wall_timeout=self.wall_timeout,
                case_timeout=self.case_timeout,
                plots=Path(tmp) / "drawings",
            )
            drawings = read_drawings(Path(tmp) / "drawings")
        return doc, drawings

    def preprocess(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        points = load_points(self.points_file or None)
        info = resources.get("nbgrader") or {}
        name = str(info.get("notebook") or resources.get("unique_key") or "submission")
        who = f"{info.get('student', '?')}/{info.get('assignment', '?')}/{name}.ipynb"
        self.log.info("SandboxGrade: grading %s in the sandbox", who)
        doc, drawings = self.grade(nb, name)
        if doc["verdict"] == "ERROR":
            raise RuntimeError(f"SandboxGrade: the grader failed on {who}: {doc.get('error')}")
        items = score_items(doc, points)
        held = cell_of(items)
        titles = {c.grade_id: c.title for c in graded_cells()}
        earned, possible = total(items)
        for cell in nb.cells:
            gid = _nbgrader(cell).get("grade_id")
            if cell.cell_type != "code" or not _nbgrader(cell).get("locked"):
                continue
            if gid == REPORT_ID:
                head = f"graded: {name}.ipynb (its solution and #| export cells), grading mode"
                report = summary_text(doc, items, hidden_details=True)
                cell.outputs = [_stream(clean(f"{report}\n\n{head}")), *map(_png, drawings)]
            elif _nbgrader(cell).get("grade") and gid in held:
                mine = held[gid]
                cell_max = total(mine)[1]
                listed = float(_nbgrader(cell).get("points", 0))
                if abs(listed - cell_max) > 1e-9:
                    raise ValueError(
                        f"SandboxGrade: cell {gid!r} is worth {listed:g} in the gradebook but "
                        f"{cell_max:g} with points_file {self.points_file!r}: regenerate the "
                        "assignment with the points it is graded with"
                    )
                text = cell_report(titles[gid], mine, doc)
                cell.outputs = outcome(text, total(mine)[0], cell_max)
        self.log.info(
            "SandboxGrade: %s %s, %s/%s points", who, doc["verdict"], _points(earned), possible
        )
        return nb, resources
