"""One rule chooses the graded file of a folder, for every route (tinytorch.sandbox.choose):
acceleration.py or .ipynb wins, else the only file that defines the graded names, else a named
error listing the candidates. The choice is made on the bytes read once, and every output names
the file that was graded."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest

from tinytorch.classroom.submissions import discover, find_module
from tinytorch.cli.milestone import folder_impl
from tinytorch.milestone07.cases import GRADED_NAMES
from tinytorch.sandbox import choose, stage

REFERENCE = Path(__file__).resolve().parents[1] / "tinytorch" / "perf" / "acceleration.py"
TEST_MINE = "from acceleration import tiled_matmul\n\ndef test_mine():\n    assert tiled_matmul\n"


def _notebook(source: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("#| export\n" + source)]
    return nbformat.writes(nb)


def _folder(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def _chosen(files: dict[str, str]) -> tuple[str | None, str]:
    staged = stage.Staged(blobs={k: v.encode() for k, v in files.items()})
    return choose.choose(staged, GRADED_NAMES)


def test_the_course_file_wins_over_a_students_test_script() -> None:
    ref = REFERENCE.read_text()
    assert _chosen({"acceleration.ipynb": _notebook(ref), "test_mine.py": TEST_MINE}) == (
        "acceleration.ipynb",
        "",
    )
    assert _chosen({"acceleration.py": ref, "acceleration.ipynb": _notebook(ref)})[0] == (
        "acceleration.py"
    )


def test_a_scratch_notebook_beside_the_course_notebook_is_not_graded() -> None:
    ref = REFERENCE.read_text()
    files = {"acceleration.ipynb": _notebook(ref), "scratch.ipynb": _notebook(ref)}
    assert _chosen(files) == ("acceleration.ipynb", "")


def test_otherwise_the_only_file_that_defines_the_graded_names_is_graded() -> None:
    ref = REFERENCE.read_text()
    assert _chosen({"module17.py": ref, "test_mine.py": TEST_MINE, "notes.py": "x = 1\n"}) == (
        "module17.py",
        "",
    )


def test_otherwise_a_named_error_lists_the_candidates() -> None:
    ref = REFERENCE.read_text()
    chosen, why = _chosen({"a.py": ref, "b.ipynb": _notebook(ref), "c.py": "x = 1\n"})
    assert chosen is None
    assert "a.py" in why and "b.ipynb" in why and "c.py" not in why
    chosen, why = _chosen({"c.py": "x = 1\n"})
    assert chosen is None and "c.py" in why and "tiled_matmul" in why
    chosen, why = _chosen({"x/acceleration.py": ref, "y/acceleration.py": ref})
    assert chosen is None and "x/acceleration.py" in why and "y/acceleration.py" in why


def test_the_shallowest_course_file_wins() -> None:
    ref = REFERENCE.read_text()
    assert _chosen({"old/acceleration.py": ref, "acceleration.py": ref})[0] == "acceleration.py"
    assert _chosen({"src/acceleration.py": ref, "README.py": ""})[0] == "src/acceleration.py"


def test_every_route_makes_the_same_choice(tmp_path: Path) -> None:
    """tito milestone run --impl DIR, the class grader and the platforms (find_module)."""
    ref = REFERENCE.read_text()
    folder = _folder(
        tmp_path / "class" / "alice",
        {"acceleration.ipynb": _notebook(ref), "scratch.ipynb": _notebook(ref), "t.py": TEST_MINE},
    )
    assert folder_impl(str(folder)) == (str(folder / "acceleration.ipynb"), None)
    assert find_module(folder) == (folder / "acceleration.ipynb", "")
    (sub,) = discover(tmp_path / "class")
    assert sub.impl == folder / "acceleration.ipynb" and sub.problem == ""
    assert sub.staged is not None and sub.staged.chosen == "acceleration.ipynb"
    assert "scratch.ipynb" not in sub.staged.blobs  # the graded file and its .py helpers only


def test_a_notebook_entry_is_graded_without_a_flag(tmp_path: Path) -> None:
    _folder(tmp_path, {"bob.ipynb": _notebook(REFERENCE.read_text())})
    (sub,) = discover(tmp_path)
    assert sub.impl == tmp_path / "bob.ipynb" and sub.problem == ""


COURSE = Path(__file__).parent / "course" / "course_module.py"  # an honest Module 17


@pytest.mark.slow
def test_gradescope_grades_the_notebook_not_the_test_script(tmp_path: Path) -> None:
    """Before: graded on test_mine.py, INCOMPLETE 2/60, and results.json never named the file."""
    from tinytorch.classroom.autograder import grade_platform_submission

    folder = _folder(
        tmp_path / "submission",
        {"acceleration.ipynb": _notebook(COURSE.read_text()), "test_mine.py": TEST_MINE},
    )
    doc, _how = grade_platform_submission(folder)
    assert doc["graded_file"] == "acceleration.ipynb"
    assert doc["verdict"] == "PASS", doc.get("error")


def test_every_output_names_the_graded_file() -> None:
    """The gradebook row and the platforms' text say which file was graded."""
    from tinytorch.milestone07.scoring import Points
    from tinytorch.render.platforms import gradebook_row, gradescope_results, prairielearn_results

    doc = {"verdict": "INCOMPLETE", "graded_file": "sub/acceleration.ipynb", "cases": [],
           "checks": [], "hidden_cases": [], "missing": [], "error": ""}  # fmt: skip
    assert gradebook_row("alice", doc, Points())["graded_file"] == "sub/acceleration.ipynb"
    assert "graded file: sub/acceleration.ipynb" in gradescope_results(doc, Points())["output"]
    assert "graded file: sub/acceleration.ipynb" in prairielearn_results(doc, Points())["output"]


def test_a_students_file_never_stops_the_choice() -> None:
    """Red-teaming: a 45-byte notebook (a number as a cell's source) raised TypeError and stopped
    the whole class run; deep nesting raised RecursionError."""
    hostile = {
        "a.ipynb": '{"cells":[{"cell_type":"code","source":[1]}]}',
        "b.ipynb": "[" * 200_000,
        "c.py": "(" * 200_000,
        "d.ipynb": '{"cells": 7}',
    }
    chosen, why = _chosen(hostile)
    assert chosen is None and "a.ipynb" in why


def test_honest_spellings_define_their_names() -> None:
    """A UTF-8 BOM, definitions under a top-level try or if, and tuple assignments."""
    ref = REFERENCE.read_text()
    bom = "\ufeff" + ref
    assert _chosen({"mine.py": bom, "notes.py": "x = 1\n"})[0] == "mine.py"
    guarded = (
        "try:\n    import numba\nexcept ImportError:\n    def tiled_matmul(a, b):\n        pass\n"
    )
    assert "tiled_matmul" in choose.defined_names("g.py", guarded.encode())
    assert {"fused_gelu", "im2col"} <= choose.defined_names("t.py", b"fused_gelu, im2col = f, g\n")


def test_a_scratch_notebooks_unexported_cells_define_nothing() -> None:
    """Only #| export cells run, so only they can make a notebook a candidate."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("def fused_gelu(x):\n    return x")]
    files = {"kernels.py": REFERENCE.read_text(), "scratch.ipynb": nbformat.writes(nb)}
    assert _chosen(files) == ("kernels.py", "")


def test_a_refused_course_file_is_never_replaced_by_an_older_one(tmp_path: Path) -> None:
    """Red-teaming: a 5 MB acceleration.py was skipped and old/acceleration.py graded instead."""
    folder = _folder(tmp_path / "erin", {"old/acceleration.py": REFERENCE.read_text()})
    (folder / "acceleration.py").write_bytes(b"#" * (stage.MAX_FILE_BYTES + 1))
    (sub,) = discover(tmp_path)
    assert isinstance(sub.staged, str) and "too large" in sub.staged
    assert folder_impl(str(folder))[1] and "too large" in folder_impl(str(folder))[1]


def test_a_file_chosen_by_its_definitions_brings_its_helpers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red-teaming: kernels.py (the only file defining the functions) lost the helper module it
    imports: every route staged helpers only beside a file named acceleration.*."""
    from tinytorch.sandbox import spawn

    folder = _folder(
        tmp_path / "bob",
        {
            "kernels.py": "from bob_helpers import X\n" + COURSE.read_text(),
            "bob_helpers.py": "X = 1\n",
        },
    )
    monkeypatch.setenv(spawn.SUBMISSION_DIR_VAR, str(folder))  # as the grader says it
    _root, work, copied = spawn.private_dir(str(folder / "kernels.py"), None)
    try:
        assert copied and sorted(os.listdir(work)) == ["bob_helpers.py", "kernels.py"]
    finally:
        shutil.rmtree(_root, ignore_errors=True)
    # a folder nobody said holds one submission: each file comes alone (a shared folder)
    _folder(tmp_path / "flat", {"alice.py": COURSE.read_text(), "notes.py": "x = 1\n"})
    _root, work, _ = spawn.private_dir(str(tmp_path / "flat" / "alice.py"), None)
    try:
        assert os.listdir(work) == ["alice.py"]
    finally:
        shutil.rmtree(_root, ignore_errors=True)


@pytest.mark.slow
def test_a_class_entry_graded_on_a_file_chosen_by_its_definitions_imports_its_helper(
    tmp_path: Path,
) -> None:
    from tinytorch.classroom.classgrade import grade_class

    subs = tmp_path / "subs"
    _folder(
        subs / "bob",
        {
            "kernels.py": "from bob_helpers import X\n" + COURSE.read_text(),
            "bob_helpers.py": "X = 1\n",
        },
    )
    run = grade_class(subs, tmp_path / "out", jobs=1)
    doc = run.docs["bob"]
    assert doc["verdict"] == "PASS" and doc["graded_file"] == "kernels.py", doc.get("error")
