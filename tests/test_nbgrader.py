"""Milestone 07 as an nbgrader assignment, with the real nbgrader: course directory, release,
three submissions (correct, one bug, hostile), autograde in the sandbox, feedback, export; the
exported scores equal grade-class's for the same notebooks, and the hostile one changed nothing
outside its sandbox. The fast tests pin the layout, the cells and the fail-closed cell."""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tinytorch.classroom.nbgrader_assignment import module_chunks, source_notebook
from tinytorch.classroom.nbgrader_cell import graded_in_sandbox
from tinytorch.classroom.nbgrader_layout import ASSIGNMENT, cell_of, cell_points, graded_cells
from tinytorch.milestone07.scoring import Item, Points, assignment_items, load_points

nbformat = pytest.importorskip("nbformat")
ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
REFERENCE = (ROOT / "tinytorch" / "perf" / "acceleration.py").read_text(encoding="utf-8")
SECRET = "alice-secret-7f3a"  # in alice's notebook only
GELU_BUG = ("_SQRT_2_OVER_PI * _GELU_C)", "_SQRT_2_OVER_PI * 0.04)")  # bob's wrong constant


# --------------------------------------------------------------------------------------------
# fast: the layout and the notebook
# --------------------------------------------------------------------------------------------


def test_every_item_of_the_assignment_is_in_one_graded_cell_and_the_points_add_up():
    template = [Item(k, n, "", 0.0, 1.0, "", "") for k, n in assignment_items(grading=True)]
    held = cell_of(template)
    assert sum(len(v) for v in held.values()) == len(template) == 30 + 7 + 16
    assert sum(cell_points(Points()).values()) == 60
    assert [c.grade_id for c in graded_cells()] == list(held)


def test_the_points_file_sets_each_cells_points(tmp_path):
    path = tmp_path / "points.toml"
    path.write_text('case = 2\nhidden_case = 0\n[checks]\n"tiling audit" = 5\n')
    worth = cell_points(load_points(path))
    assert worth["cases_tiled_matmul"] == 36 and worth["hidden_cases"] == 0
    assert worth["check_tiling_audit"] == 5 and worth["check_backward"] == 2


def test_feedback_drawings_are_the_graders_own_pngs_bounded(tmp_path):
    from tinytorch.classroom import nbgrader_grade as g

    assert g.read_drawings(tmp_path / "none") == []
    (tmp_path / "a.png").write_bytes(b"\x89PNG a")
    (tmp_path / "b.txt").write_bytes(b"not a drawing")
    (tmp_path / "c.png").symlink_to(tmp_path / "a.png")  # a link is never followed
    (tmp_path / "d.png").write_bytes(b"x" * (g.MAX_DRAWING_BYTES + 1))
    assert g.read_drawings(tmp_path) == [b"\x89PNG a"]
    for i in range(2 * g.MAX_DRAWINGS):
        (tmp_path / f"e{i:02}.png").write_bytes(b"png")
    assert len(g.read_drawings(tmp_path)) == g.MAX_DRAWINGS


def test_the_source_notebook_is_valid_nbformat_4_5_with_an_id_on_every_cell():
    """`tito nbgrader generate` printed nbformat's MissingIDFieldWarning: cells had no id."""
    import warnings

    import nbformat

    nb = source_notebook(REFERENCE, Points())
    assert (nb["nbformat"], nb["nbformat_minor"]) >= (4, 5)
    ids = [c.get("id") for c in nb["cells"]]
    assert all(ids) and len(set(ids)) == len(ids), ids
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing id (or any other lapse) raises here
        nbformat.validate(nbformat.from_dict(nb))


def test_the_source_notebook_has_a_solution_cell_per_graded_function_and_names_no_hidden_case():
    nb = source_notebook(REFERENCE, Points())
    meta = [c["metadata"].get("nbgrader", {}) for c in nb["cells"]]
    solutions = [m["grade_id"] for m in meta if m.get("solution")]
    assert solutions == [
        f"solution_{n}"
        for n in ("tiled_matmul", "fused_gelu", "im2col", "col2im", "Im2colConv2dFunction",
                  "im2col_conv2d")
    ]  # fmt: skip
    graded = {m["grade_id"]: m["points"] for m in meta if m.get("grade")}
    assert graded == cell_points(Points()) and all(m.get("locked") for m in meta if m.get("grade"))
    text = "\n".join(c["source"] for c in nb["cells"])
    assert "hidden/" not in text  # no hidden case is named before grading
    # the module cells are the reference, whole: grade-class reads the same `#| export` cells
    code = [c["source"] for c in nb["cells"] if c["source"].startswith("#| ")]
    assert all("#| export\n" in s for s in code)
    assert sum(len(t) for _n, t in module_chunks(REFERENCE)) > 0.95 * len(REFERENCE)


def test_a_graded_cell_run_by_nbgraders_own_autograde_raises(monkeypatch, capsys):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    graded_in_sandbox("cases_tiled_matmul")  # the student's kernel: says how it is graded
    assert "graded in the course's sandbox" in capsys.readouterr().out
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(RuntimeError, match="SandboxGrade"):
        graded_in_sandbox("cases_tiled_matmul")


def test_the_staged_module_marks_every_solution_cell_exported():
    from tinytorch.classroom.nbgrader_grade import module_notebook

    nb = nbformat.from_dict(source_notebook(REFERENCE, Points()))
    sol = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    sol.source = "def tiled_matmul(a, b, tile_size=64):\n    return a @ b\n"  # marker deleted
    sol.outputs = [nbformat.v4.new_output("stream", name="stdout", text="old")]
    staged = module_notebook(nb)
    twin = staged.cells[nb.cells.index(sol)]
    assert twin.source.startswith("#| export\n") and twin.outputs == []
    assert sol.source.startswith("def ")  # the graded notebook itself is not changed


@pytest.mark.parametrize("earned", [0.0, 3.0, 8.0])
def test_nbgrader_reads_each_outcome_as_the_points_earned(earned):
    """What SandboxGrade writes into a graded cell is what nbgrader's SaveAutoGrades scores."""
    pytest.importorskip("nbgrader", reason="the nbgrader extra: pip install -e '.[nbgrader]'")
    from nbgrader.utils import determine_grade

    from tinytorch.classroom.nbgrader_grade import outcome

    cell = nbformat.v4.new_code_cell("graded_in_sandbox('x')")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "points": 8, "grade_id": "x"}
    cell.outputs = outcome(f"x: {earned:g}/8 points\n  FAIL  a case: " + "long " * 40, earned, 8)
    assert determine_grade(cell) == (earned, 8.0)
    kinds = [o.output_type for o in cell.outputs]
    assert kinds == (["error"] if earned == 0 else ["stream", "execute_result"])
    text = "\n".join(cell.outputs[0].get("traceback") or [cell.outputs[0].get("text", "")])
    assert max(len(ln) for ln in text.splitlines()) <= 100  # folded: outputs do not wrap


def test_usage_errors_name_the_argument(tmp_path, capsys):
    from tinytorch.cli.main import main

    assert main(["nbgrader", "autograde", "--course", str(tmp_path)]) == 2
    assert f"--course {tmp_path}: no nbgrader_config.py" in capsys.readouterr().err
    assert main(["nbgrader", "init", "--course", str(tmp_path)]) == 0
    assert main(["nbgrader", "init", "--course", str(tmp_path)]) == 0  # ours, unchanged: kept
    (tmp_path / "points.toml").write_text("case = -1\n")
    argv = ["nbgrader", "generate", "--course", str(tmp_path), "--points"]
    assert main([*argv, str(tmp_path / "points.toml")]) == 2
    assert "--points" in capsys.readouterr().err
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")  # an instructor's own
    assert main(["nbgrader", "init", "--course", str(tmp_path)]) == 2
    assert "is not tito's" in capsys.readouterr().err
    assert (tmp_path / "nbgrader_config.py").read_text() == "c = get_config()\n"


# --------------------------------------------------------------------------------------------
# slow: the whole course, with the real nbgrader
# --------------------------------------------------------------------------------------------


def _tito(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(BIN / "tito"), *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, (
        f"tito {' '.join(argv)}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    )
    return done


def _payload(course: Path, alice: Path, marker: str) -> str:
    """Module-level code that, run as the grader, writes a marker into the course folder, copies
    alice's notebook out, and gives everyone 999 points in gradebook.db."""
    gradebook = course / "assignments" / "gradebook.db"
    return f"""
import os as _os, sqlite3 as _sq
def _attack():
    for _try in (
        lambda: open({str(course / marker)!r}, "w").write("written by mallory"),
        lambda: open({str(course / (marker + "_stolen"))!r}, "w").write(open({str(alice)!r}).read()),
        lambda: (lambda c: (c.execute("UPDATE grade SET manual_score = 999"), c.commit()))(
            _sq.connect({str(gradebook)!r})),
    ):
        try:
            _try()
        except Exception as exc:
            print("mallory:", type(exc).__name__, exc)
_attack()
"""


def _submit(course: Path, student: str, edit, extra: str | None = None) -> Path:
    """The released notebook with its solution cells filled in from the source's (edited)."""
    a = course / "assignments"
    src = nbformat.read(a / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", 4)
    nb = nbformat.read(a / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", 4)
    ref = {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in src.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in ref:
            cell.source = edit(gid, ref[gid])
    if extra is not None:  # a cell of the student's own, outside every nbgrader region
        nb.cells.insert(3, nbformat.v4.new_code_cell(extra))
    path = a / "submitted" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)
    return path


def _solution_lines(source: str) -> set[str]:
    """The code lines that only the solution regions of the source's solution cells hold."""
    inside, outside = set(), set()
    for name, text in module_chunks(source):
        where = False
        for line in text.splitlines():
            t = line.strip()
            if t in ("### BEGIN SOLUTION", "### END SOLUTION"):
                where = t.startswith("### BEGIN")
            elif t and not t.startswith("#"):
                (inside if where and name else outside).add(t)
    return inside - outside


def _digests(folder: Path, skip: tuple[str, ...]) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not str(p.relative_to(folder)).startswith(skip)
    }


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> dict:
    pytest.importorskip("nbgrader", reason="the nbgrader extra: pip install -e '.[nbgrader]'")
    course = tmp_path_factory.mktemp("course")
    _tito("nbgrader", "init", cwd=course)
    generated = _tito("nbgrader", "generate", cwd=course)
    assert "warning" not in generated.stderr.lower(), generated.stderr  # nbformat, nbgrader
    alice = _submit(
        course, "alice", lambda g, s: s + f"\n# {SECRET}\n" if g == "solution_tiled_matmul" else s
    )
    bob = _submit(
        course, "bob", lambda g, s: s.replace(*GELU_BUG) if g == "solution_fused_gelu" else s
    )
    mallory = _submit(
        course,
        "mallory",
        lambda g, s: (
            s.replace("#| export\n", "#| export\n" + _payload(course, alice, "M_SOL"), 1)
            if g == "solution_tiled_matmul"
            else s
        ),
        extra=_payload(course, alice, "M_CELL"),
    )
    # what autograde may write: autograded/, feedback/ and gradebook.db (checked apart)
    before = _digests(course, ("assignments/autograded", "assignments/feedback",
                               "assignments/gradebook.db"))  # fmt: skip
    graded = _tito("nbgrader", "autograde", cwd=course)
    _tito("nbgrader", "feedback", cwd=course)
    _tito("nbgrader", "export", "--to", "grades.csv", cwd=course)
    with open(course / "grades.csv", newline="") as fh:
        exported = {r["student_id"]: r for r in csv.DictReader(fh)}
    return {
        "root": course,
        "subs": {"alice": alice, "bob": bob, "mallory": mallory},
        "before": before,
        "log": graded.stdout + graded.stderr,
        "exported": exported,
    }


@pytest.mark.slow
def test_the_released_notebook_holds_stubs_and_no_solution_or_hidden_case(course):
    released = course["root"] / "assignments" / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    nb = nbformat.read(released, 4)
    text = "\n".join(c.source for c in nb.cells)
    assert "hidden/" not in text and "BEGIN SOLUTION" not in text
    body = _solution_lines(REFERENCE)
    assert len(body) > 50 and not body & {ln.strip() for ln in text.splitlines()}
    sols = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert len(sols) == 6 and all("raise NotImplementedError()" in c.source for c in sols)
    assert all("# HINT:" in c.source for c in sols)  # the hints stay


@pytest.mark.slow
def test_autograde_ran_our_preprocessor_and_every_student_is_scored_out_of_60(course):
    assert course["log"].count("SandboxGrade: grading") == 3
    rows = course["exported"]
    assert set(rows) == {"alice", "bob", "mallory"}
    assert {float(r["max_score"]) for r in rows.values()} == {60.0}
    assert float(rows["alice"]["score"]) == 60.0
    assert float(rows["bob"]["score"]) < 60.0


@pytest.mark.slow
def test_the_exported_scores_equal_grade_class_for_the_same_notebooks(course, tmp_path):
    cls = tmp_path / "class"
    cls.mkdir()
    for student, path in course["subs"].items():
        shutil.copy(path, cls / f"{student}.ipynb")
    _tito("grade-class", str(cls), "--out", str(tmp_path / "grades"), "--notebook",
          "--jobs", "1", cwd=tmp_path)  # fmt: skip
    with open(tmp_path / "grades" / "gradebook.csv", newline="") as fh:
        ours = {r["student"]: r for r in csv.DictReader(fh)}
    exported = course["exported"]
    for student in course["subs"]:
        assert float(exported[student]["score"]) == float(ours[student]["score"]), student
        assert float(exported[student]["max_score"]) == float(ours[student]["max_score"]), student


@pytest.mark.slow
def test_the_hostile_notebook_changed_nothing_outside_its_sandbox(course):
    root = course["root"]
    assert not list(root.glob("M_*")), "mallory's code wrote into the course folder"
    # nothing autograde does not own changed: source, release, submitted, config, points
    after = _digests(root, ("assignments/autograded", "assignments/feedback",
                            "assignments/gradebook.db", "grades.csv"))  # fmt: skip
    assert after == course["before"]
    with sqlite3.connect(root / "assignments" / "gradebook.db") as db:
        manual = db.execute("SELECT count(*) FROM grade WHERE manual_score IS NOT NULL").fetchone()
    assert manual == (0,)
    for folder in ("autograded", "feedback"):
        for path in (root / "assignments" / folder / "mallory").rglob("*"):
            if path.is_file():
                assert SECRET not in path.read_text(errors="replace"), path
    # mallory's kernels are the reference's: the attack cost her nothing and gained her nothing
    assert float(course["exported"]["mallory"]["score"]) == 60.0


@pytest.mark.slow
def test_the_hostile_payload_works_when_run_as_the_grader(course, tmp_path):
    """The control: the same payload, run as nbgrader's own Execute would run it (as the grader,
    in the course folder), writes the marker, steals alice's file and rewrites the gradebook."""
    twin = tmp_path / "twin"
    shutil.copytree(course["root"], twin)
    alice = twin / "assignments" / "submitted" / "alice" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    code = _payload(twin, alice, "M_CONTROL")
    subprocess.run([sys.executable, "-c", code], cwd=twin, check=True, timeout=60)
    assert (twin / "M_CONTROL").is_file() and SECRET in (twin / "M_CONTROL_stolen").read_text()
    with sqlite3.connect(twin / "assignments" / "gradebook.db") as db:
        assert db.execute("SELECT count(*) FROM grade WHERE manual_score = 999").fetchone()[0] > 0


@pytest.mark.slow
def test_feedback_is_the_lesson_first_report(course):
    html = (
        course["root"] / "assignments" / "feedback" / "bob" / ASSIGNMENT / f"{ASSIGNMENT}.html"
    ).read_text(encoding="utf-8")
    assert "Milestone 07: NOT PASSED" in html  # the verdict, then the failures and lessons
    assert "fused_gelu/normal_1d" in html and "lesson:" in html
    assert html.index("Milestone 07: NOT PASSED") < html.index("fused_gelu: the published cases")
    report = html[html.index("Milestone 07: NOT PASSED") :]
    assert report.index("fix (") < report.index("FAIL"), "each fix comes before its cases"
    assert "0.044715 is 0.040000 here" in report  # bob's bug, named as the CLI names it
    assert "data:image/png;base64," in report  # the drawing of his first failing GELU case
    assert "NotPassed" not in html or "0/" in html  # an error output only for a 0-point cell
    alice = (
        course["root"] / "assignments" / "feedback" / "alice" / ASSIGNMENT / f"{ASSIGNMENT}.html"
    ).read_text(encoding="utf-8")
    assert "Milestone 07: PASS" in alice and "60/60 points" in alice
    assert "data:image/png" not in alice  # nothing failed: nothing drawn


@pytest.mark.slow
def test_a_notebook_graded_without_the_sandbox_earns_nothing(course, tmp_path):
    """nbgrader's own Execute left in place (the stock config): each graded cell raises, so a
    notebook graded without our sandbox gets 0, not full marks for cells that print nothing."""
    twin = tmp_path / "stock"
    shutil.copytree(course["root"], twin, ignore=shutil.ignore_patterns("autograded", "feedback"))
    config = twin / "nbgrader_config.py"
    text = config.read_text().split("c.Autograde.autograde_preprocessors")[0]
    config.write_text(text)
    for student in ("alice", "mallory"):
        shutil.rmtree(twin / "assignments" / "submitted" / student)
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    subprocess.run(
        [sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--force"],
        cwd=twin, env=env, check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    nb = nbformat.read(
        twin / "assignments" / "autograded" / "bob" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", 4
    )
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert graded and all(any(o.output_type == "error" for o in c.outputs) for c in graded), (
        "a graded cell ran without raising under nbgrader's own Execute"
    )


def _section_blocks(page: Path, heading: str) -> list[str]:
    """The bash blocks of one `## heading` section of a docs page, in order."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt().parse(page.read_text(encoding="utf-8"))
    blocks, inside = [], False
    for i, t in enumerate(tokens):
        if t.type == "heading_open" and t.tag == "h2":
            inside = tokens[i + 1].content == heading
        elif inside and t.type == "fence" and t.info.strip() == "bash":
            blocks.append(t.content)
    return blocks


@pytest.mark.slow
def test_the_docs_nbgrader_section_runs_as_written(tmp_path):
    """docs/instructors.md's nbgrader blocks, in a scratch folder as a grader's (the pip line is
    what made this environment: checked, not rerun), with the prose's step that submits the
    instructor's notebook as alice; the export gives alice 60 of 60."""
    pytest.importorskip("nbgrader", reason="the nbgrader extra: pip install -e '.[nbgrader]'")
    blocks = _section_blocks(ROOT / "docs" / "instructors.md", "nbgrader")
    lines = [
        " ".join(ln.split("#", 1)[0].split())
        for block in blocks
        for ln in block.replace("\\\n", " ").splitlines()
        if ln.strip() and not ln.strip().startswith("#")
    ]
    assert lines[0] == ".venv/bin/pip install -e '.[nbgrader]'" and len(lines) == 6
    course = tmp_path / "grades" / "nbgrader"
    for line in lines[1:]:
        if "autograde" in line:  # the prose's step: the instructor's notebook, as alice's
            sub = course / "assignments" / "submitted" / "alice" / ASSIGNMENT
            sub.mkdir(parents=True)
            src = course / "assignments" / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
            shutil.copy(src, sub)
        cmd = line.replace(".venv/bin/", f"{BIN}/")
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", cmd],
            cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"{line!r}: {done.stderr[-3000:]}"
    with open(tmp_path / "grades" / "nbgrader.csv", newline="") as fh:
        (row,) = list(csv.DictReader(fh))
    assert (row["student_id"], float(row["score"]), float(row["max_score"])) == ("alice", 60, 60)
    feedback = course / "assignments" / "feedback" / "alice" / ASSIGNMENT / f"{ASSIGNMENT}.html"
    assert "Milestone 07: PASS" in feedback.read_text(encoding="utf-8")
