"""What a graded cell of the nbgrader assignment does when a kernel runs it.

Imported by the released notebook's graded cells, in the student's own kernel (or in a grader's
kernel if nbgrader's Execute was left in place): so it imports nothing else of ours.

The cells are graded by `SandboxGrade` (nbgrader_grade.py), which never runs them. Run by
nbgrader's own autograde (NBGRADER_EXECUTION=autograde), a cell raises: no points for a notebook
graded without the sandbox, instead of full marks for a cell that printed nothing.
"""

from __future__ import annotations

import os


def graded_in_sandbox(grade_id: str) -> None:
    """Say how the cell `grade_id` is graded; raise under nbgrader's own autograde."""
    if os.environ.get("NBGRADER_EXECUTION") == "autograde":
        raise RuntimeError(
            f"graded cell {grade_id!r}: this assignment is graded by tinytorch's SandboxGrade, "
            "not by running the notebook: nbgrader_config.py must list SandboxGrade in "
            "c.Autograde.autograde_preprocessors (tito nbgrader init writes it)"
        )
    print(
        f"{grade_id}: graded in the course's sandbox when your notebook is autograded. "
        "To check your kernels now, in a terminal: "
        "tito milestone run 07 --impl 07_custom_kernels.ipynb"
    )
