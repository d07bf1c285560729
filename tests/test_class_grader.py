"""`tito grade-class` end to end on a small class: exact gradebook rows, similarity flags, the
report's figures, resuming, and a hostile submission that cannot change another student's row."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tinytorch.classroom.classgrade import Tally, grade_class
from tinytorch.classroom.runner import run_tree
from tinytorch.classroom.similarity import REFERENCE, similarity_flags
from tinytorch.cli.main import main
from tinytorch.milestone07.cases import hidden_cases
from tinytorch.milestone07.scoring import load_points
from tinytorch.release import make_student_source, reference_path

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "tests" / "mutants" / "student_base.py"  # a correct Module 17
BOB = ROOT / "tests" / "classroom" / "bob.py"  # independent code, the ragged K tile dropped
REF = reference_path(17)
FUNCS = ("tiled_matmul", "fused_gelu", "im2col", "im2col_conv2d", "col2im")

CRASH = "import ctypes\n\n\n" + "".join(
    f"def {f}(*args, **kwargs):\n    return ctypes.string_at(0)\n\n\n" for f in FUNCS
)
# The graded Function class too (a module without it is INCOMPLETE), crashing or hanging alike.
CRASH += "class Im2colConv2dFunction:\n    apply = staticmethod(im2col_conv2d)\n"
STUBS = "".join(f"def {f}(*args):\n    raise NotImplementedError\n\n\n" for f in FUNCS)
HANG = "".join(f"def {f}(*args, **kwargs):\n    while True:\n        pass\n\n\n" for f in FUNCS)
HANG += "class Im2colConv2dFunction:\n    apply = staticmethod(im2col_conv2d)\n"
# Hidden cases are worth nothing here so the rows do not depend on how many there are.
POINTS_TOML = "case = 1\ncheck = 2\nhidden_case = 0\n"
HIDDEN_CASES = len(hidden_cases(1))  # hidden cases per grading run (README "Grading safely")


def _near_copy_of_bob() -> str:
    """bob.py with other names, other comments and one extra line: still bob's work."""
    text = BOB.read_text()
    for old, new in [("left", "lhs"), ("right", "rhs"), ("result", "out"), ("acc", "block"),
                     ("canvas", "grid"), ("_data", "_as_array"), ("_out_size", "_osz")]:  # fmt: skip
        text = re.sub(rf"\b{old}\b", new, text)
    text = text.replace("# the bug: the ragged K tile is never added", "# step through K")
    return text.replace("    rows, inner = lhs.shape\n", "    assert tile_size > 0\n    rows, inner = lhs.shape\n")  # fmt: skip


def _near_copy_of_reference() -> str:
    """The reference solution with its comments stripped and blank lines doubled."""
    lines = [re.sub(r"\s+#.*$", "", line) for line in REF.read_text().splitlines()]
    return "\n".join(line if line.strip() else "\n" for line in lines) + "\n"


@pytest.fixture(scope="module")
def klass(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The class folder, graded once through the CLI; tests read its outputs."""
    top = tmp_path_factory.mktemp("class")
    subs, out = top / "submissions", top / "out"
    subs.mkdir()
    (subs / "alice.py").write_text(BASE.read_text())
    (subs / "bob.py").write_text(BOB.read_text())
    (subs / "carol.py").write_text(CRASH)
    (subs / "dave.py").write_text(HANG)
    assert main(["release", "17", "--out", str(subs / "erin")]) == 0  # all stubs, in a folder
    (subs / "frank.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))  # fmt: skip
    (subs / "grace.py").write_text(_near_copy_of_bob())
    (subs / "heidi.py").write_text(_near_copy_of_reference())
    (subs / "liam.py").write_text("def tiled_matmul(:\n    pass\n")
    (subs / "mia").mkdir()  # a folder with nothing to grade
    (subs / "mia" / "notes.txt").write_text("forgot the code")
    (subs / "README.txt").write_text("not a submission")
    (top / "points.toml").write_text(POINTS_TOML)
    argv = ["grade-class", str(subs), "--out", str(out), "--jobs", "2", "--timeout", "0.5",
            "--points", str(top / "points.toml")]  # fmt: skip
    assert main(argv) == 0
    return {"top": top, "subs": subs, "out": out, "argv": argv}


def _rows(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "gradebook.csv", newline="") as fh:
        return {r["student"]: r for r in csv.DictReader(fh)}


# One maximum per assignment, whatever happened: an empty notebook (frank), a folder with nothing
# to grade (mia) and a syntax error (liam) are scored out of every item, and score 0.
FRANK = ""
MIA = "no acceleration.py, acceleration.ipynb or other .py or .ipynb file in the folder"
# Every column but seconds, for every student (derived by hand: bob drops every case whose K is
# not a multiple of the tile: 15 of the 18 matmul cases, and all 6 hidden matmul cases, whose K
# never is (the other hidden cases, im2col's 2 included, pass); 1 point per case, 2 per check, 0 per hidden case). Grading mode has 6 deeper checks
# + "own work". Where every call crashes, hangs or is a stub, the one check that passes is
# "inputs not mutated", vacuously (the milestone's business: a "not_run" status is planned).
EXPECTED = {
    "alice": ("PASS", 30, 30, 7, 7, HIDDEN_CASES, HIDDEN_CASES, 44, 44, ""),
    "bob": (
        "NOT_PASSED",
        15,
        30,
        6,
        7,
        HIDDEN_CASES - 6,
        HIDDEN_CASES,
        27,
        44,
        "",
    ),  # plain NumPy conv: backward fails
    "carol": ("NOT_PASSED", 0, 30, 1, 7, 0, HIDDEN_CASES, 0, 44, ""),
    "dave": ("NOT_PASSED", 0, 30, 1, 7, 0, HIDDEN_CASES, 0, 44, ""),
    "erin": ("INCOMPLETE", 0, 30, 1, 7, 0, HIDDEN_CASES, 0, 44, ""),
    "frank": ("NOT_PASSED", 0, 30, 0, 7, 0, HIDDEN_CASES, 0, 44, FRANK),
    "grace": ("NOT_PASSED", 15, 30, 6, 7, HIDDEN_CASES - 6, HIDDEN_CASES, 27, 44, ""),
    "heidi": ("PASS", 30, 30, 7, 7, HIDDEN_CASES, HIDDEN_CASES, 44, 44, ""),
    "liam": ("NOT_PASSED", 0, 30, 0, 7, 0, HIDDEN_CASES, 0, 44, ""),  # a syntax error
    "mia": ("INCOMPLETE", 0, 30, 0, 7, 0, HIDDEN_CASES, 0, 44, MIA),
}
_COLS = ("verdict", "cases_passed", "cases_total", "checks_passed", "checks_total",
         "hidden_passed", "hidden_total", "score", "max_score", "error")  # fmt: skip


@pytest.mark.slow
def test_gradebook_rows_are_exact(klass: dict[str, Path]) -> None:
    rows = _rows(klass["out"])
    assert set(rows) == set(EXPECTED)  # README.txt is not a student
    for student, want in EXPECTED.items():
        assert tuple(rows[student][c] for c in _COLS) == tuple(map(str, want)), student
    assert float(rows["alice"]["seconds"]) > 0


def test_every_student_has_a_milestone_json(klass: dict[str, Path]) -> None:
    from tinytorch.render.json_doc import validate

    graded: list[int] = []
    for student in EXPECTED:
        doc = json.loads((klass["out"] / "results" / f"{student}.json").read_text())
        if doc.get("cases"):  # graded by the milestone (mia had nothing to grade)
            validate(doc)  # the milestone's own schema
            assert doc["grader"]["returncode"] in (0, 1) and doc["grader"]["killed"] == ""
            # grading mode, end to end: a fresh secret seed and the hidden cases graded too
            assert doc["grading"] is True and doc["seed"] != 0, student
            # a syntax error, a notebook with no #| export cell: nothing to run hidden cases on
            unloadable = student in ("liam", "frank")
            assert len(doc["hidden_cases"]) == (0 if unloadable else HIDDEN_CASES), student
            graded.append(doc["seed"])
    assert len(graded) == 9 and len(set(graded)) == len(graded)  # a fresh seed per student
    crash = json.loads((klass["out"] / "results" / "carol.json").read_text())
    assert {c["status"] for c in crash["cases"]} == {"crash"}
    hang = json.loads((klass["out"] / "results" / "dave.json").read_text())
    assert "timeout" in {c["status"] for c in hang["cases"]}


def test_similarity_flags_the_two_near_copies_only(klass: dict[str, Path]) -> None:
    page = (klass["out"] / "class_report.html").read_text()
    assert "bob ~ grace" in page and f"heidi ~ {REFERENCE}" in page
    subs = klass["subs"]
    sources = {p.stem: p.read_text() for p in subs.glob("*.py")}
    ref = REF.read_text()
    flags = similarity_flags(sources, ref, make_student_source(ref))
    assert {(f.a, f.b) for f in flags} == {("bob", "grace"), ("heidi", REFERENCE)}
    by_pair = {(f.a, f.b): f for f in flags}
    assert 0.9 <= by_pair[("bob", "grace")].score < 1.0  # one extra line
    assert by_pair[("bob", "grace")].a_lines  # matching regions are marked
    assert "<mark>" in page


def test_report_figures_exist_and_are_not_empty(klass: dict[str, Path]) -> None:
    figs = klass["out"] / "figures"
    for name in ("pass_rate", "case_failures", "function_verdicts"):
        png = (figs / f"{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 5000, name
    page = (klass["out"] / "class_report.html").read_text()
    assert page.count("data:image/png;base64,") == 3  # self-contained
    assert "Most common lessons" in page and "The result leaves out the ragged last k-tile" in page


def test_the_report_shows_the_best_flags_side_by_side_and_says_how_many() -> None:
    from tinytorch.classroom.class_report import SIDE_BY_SIDE_MAX, similarity_html
    from tinytorch.classroom.similarity import Flag

    assert SIDE_BY_SIDE_MAX == 20
    flags = [Flag(f"s{i:02d}", f"t{i:02d}", 1.0 - i / 1000) for i in range(SIDE_BY_SIDE_MAX + 5)]
    page = similarity_html(flags, {f.a: "x = 1\n" for f in flags}, "y = 2\n")
    assert page.count('class="sbs"') == SIDE_BY_SIDE_MAX and page.count("<tr>") == 1 + len(flags)
    assert f"the {SIDE_BY_SIDE_MAX} best-scoring are shown side by side" in page
    assert "5 more flags are listed above only" in page
    readme = " ".join((ROOT / "docs" / "instructors.md").read_text().split())
    assert f"the {SIDE_BY_SIDE_MAX} best-scoring flags with the two files side by side" in readme


def test_resume_skips_what_is_done_and_regrades_a_resubmission(klass: dict[str, Path]) -> None:
    started: list[tuple[int, int, int]] = []
    graded: list[tuple[str, int, int]] = []  # (student, done, passes) as the bar shows them

    def on_start(t: Tally) -> None:
        started.append((t.total, t.done, t.passes))

    def progress(student: str, doc: dict, t: Tally) -> None:
        graded.append((student, t.done, t.passes))

    # the fixture's options (its --timeout 0.5 too): another timeout would regrade every student
    kwargs = {"jobs": 2, "case_timeout": 0.5, "on_start": on_start, "progress": progress}
    grade_class(klass["subs"], klass["out"], **kwargs)
    assert started == [(10, 10, 2)] and graded == []  # alice's and heidi's resumed PASSes count
    (klass["subs"] / "bob.py").write_text(BOB.read_text() + "\n# resubmitted\n")
    run = grade_class(klass["subs"], klass["out"], **kwargs)
    assert started[1] == (10, 9, 2) and graded == [("bob", 10, 2)]
    assert run.docs["bob"]["verdict"] == "NOT_PASSED"


@pytest.mark.slow
def test_resume_regrades_when_an_option_that_changes_the_result_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import nbformat

    from tinytorch.classroom.classgrade import _load_done, run_options
    from tinytorch.classroom.submissions import discover

    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("#| export\n" + BASE.read_text())]
    nbformat.write(nb, str(subs / "frank.ipynb"))
    graded: list[str] = []

    def grade(**kwargs) -> str:
        run = grade_class(subs, out, jobs=1, progress=lambda s, d, t: graded.append(s), **kwargs)
        return run.docs["frank"]["verdict"]

    assert grade(case_timeout=1.0) == "PASS"  # a notebook is graded without --notebook
    assert grade(case_timeout=1.0) == "PASS" and len(graded) == 1  # resumed
    assert grade(case_timeout=2.0) == "PASS" and len(graded) == 2  # new --timeout
    options = run_options(notebook=True, part_b=False, case_timeout=2.0, wall_timeout=300.0)
    doc = json.loads((out / "results" / "frank.json").read_text())
    assert doc["grader"]["options"] == options
    (sub,) = discover(subs)
    path = out / "results" / "frank.json"
    assert _load_done(path, sub, options) is not None
    assert _load_done(path, sub, {**options, "part_b": True}) is None  # --part-b regrades
    assert _load_done(path, sub, {**options, "wall_timeout": 60.0}) is None
    # Points change no result: the resumed doc is scored with the new points file.
    (tmp_path / "points.toml").write_text("case = 3\ncheck = 0\nhidden_case = 0\n")
    argv = ["grade-class", str(subs), "--out", str(out), "--notebook", "--timeout", "2",
            "--jobs", "1", "--points", str(tmp_path / "points.toml")]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "grading 0 of 1 submissions" in printed
    assert re.search(r"seconds: grading \d+\.\d, similarity \d+\.\d, report \d+\.\d", printed)
    assert (_rows(out)["frank"]["score"], _rows(out)["frank"]["max_score"]) == ("90", "90")


@pytest.mark.slow
def test_a_hostile_submission_does_not_change_another_students_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    (subs / "alice.py").write_text(BASE.read_text())
    (subs / "bob.py").write_text(BOB.read_text())
    # bart is graded after alice and before bob (one job, student order) and, on import, rewrites
    # every other submission and every result file it finds.
    hostile = (
        f"""import pathlib
for p in pathlib.Path({str(subs)!r}).glob("*.py"):
    if p.name != "bart.py":
        p.write_text("raise SystemExit('overwritten by bart')\\n")
for p in pathlib.Path({str(out)!r}).rglob("*.json"):
    p.write_text("{{}}")
"""
        + STUBS
    )
    (subs / "bart.py").write_text(hostile)
    (tmp_path / "points.toml").write_text(POINTS_TOML)
    argv = ["grade-class", str(subs), "--out", str(out), "--jobs", "1", "--timeout", "1",
            "--points", str(tmp_path / "points.toml")]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    if "overwritten by bart" in (subs / "bob.py").read_text():  # no uid drop here: it did happen
        assert "results/alice.json was changed during the run; restored" in printed
    else:  # the sandbox's unprivileged uid could not write another student's files
        assert (subs / "bob.py").read_text() == BOB.read_text()
    rows = _rows(out)
    for student in ("alice", "bob"):
        assert tuple(rows[student][c] for c in _COLS) == tuple(str(v) for v in EXPECTED[student])
        doc = json.loads((out / "results" / f"{student}.json").read_text())
        assert doc["verdict"] == EXPECTED[student][0]


@pytest.mark.slow
@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="needs root: only a root grader gives each concurrent student its own uid; as a normal "
    "user every student's process runs as that user (README: Grading a class)",
)
def test_concurrent_students_cannot_rewrite_each_others_work_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    # The sandboxes' folders go to a temporary folder of this test's own (readable by all, as
    # /tmp is), so that the hostile student below reaches no one else's grading on this machine.
    tmp = Path(tempfile.mkdtemp(prefix="tt-concurrent-"))
    tmp.chmod(0o755)
    monkeypatch.setenv("TMPDIR", str(tmp))
    # mallory is graded first, beside each victim in turn (--jobs 2): on every import its thread
    # rewrites every other student's files it can reach: the copies in the sandboxes' workdirs
    # (what a victim's process imports moments later) and the grader's copies under DIR/.work.
    # Its functions hang, so it keeps doing that until its wall timeout (15 s: the three victims
    # beside it take about 5).
    hostile = f"""import pathlib, threading, time
_MINE = pathlib.Path.cwd()


def _rewrite():
    while True:
        for spot in (pathlib.Path({str(tmp)!r}).glob("tt-sandbox-*/work/*.py"),
                     pathlib.Path({str(out / ".work")!r}).glob("*/*.py")):
            for p in spot:
                try:
                    if p.parent != _MINE:
                        p.write_text("raise SystemExit('rewritten by mallory')\\n")
                except OSError:
                    pass
        time.sleep(0.002)


threading.Thread(target=_rewrite, daemon=True).start()
""" + "".join(f"def {f}(*args, **kwargs):\n    time.sleep(60)\n\n\n" for f in FUNCS)
    hostile += "class Im2colConv2dFunction:\n    apply = staticmethod(im2col_conv2d)\n"
    (subs / "a_mallory.py").write_text(hostile)
    victims = ("v1", "v2", "v3")
    for v in victims:
        (subs / f"{v}.py").write_text(BASE.read_text())
    (tmp_path / "points.toml").write_text(POINTS_TOML)
    argv = ["grade-class", str(subs), "--out", str(out), "--jobs", "2", "--timeout", "1",
            "--wall-timeout", "15", "--points", str(tmp_path / "points.toml")]  # fmt: skip
    try:
        assert main(argv) == 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = _rows(out)
    for v in victims:
        assert tuple(rows[v][c] for c in _COLS) == tuple(str(x) for x in EXPECTED["alice"]), v
    mallory = json.loads((out / "results" / "a_mallory.json").read_text())
    assert mallory["cases"][0]["status"] == "timeout"  # it loaded, and ran its thread
    # mallory timed out beside the victims, so it was regraded alone afterwards: its uid in the
    # side-by-side round is the one that matters here.
    beside = mallory["grader"]["regraded_alone"]["side_by_side"]
    assert beside["verdict"] == "NOT_PASSED"
    uid = {
        s: json.loads((out / "results" / f"{s}.json").read_text())["isolation"]["uid"]["why"]
        for s in victims
    } | {"a_mallory": beside["isolation"]["uid"]["why"]}
    assert all(why.startswith("uid ") for why in uid.values()), uid  # each dropped its uid
    assert all(uid[v] != uid["a_mallory"] for v in victims), uid  # and not to mallory's


def test_the_slot_uid_pool_refuses_a_uid_that_is_someones(monkeypatch: pytest.MonkeyPatch) -> None:
    from tinytorch.sandbox import uids

    base, _gid = uids.slot_ids(0)
    assert uids.slot_ids(3) == (base + 3, base + 3) and base > 65535
    monkeypatch.setenv(uids.SLOT_UID_BASE_VAR, "0")  # uid 0 is root's
    assert uids.slot_pool_problem(2) == "uid 0 of the slot pool is the user 'root'"
    assert "only 1024 uids" in uids.slot_pool_problem(uids.SLOT_UIDS + 1)


@pytest.mark.slow
def test_a_run_past_its_wall_timeout_is_killed_with_its_tree(tmp_path: Path) -> None:
    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"  # fmt: skip
    run = run_tree([sys.executable, "-c", code], tmp_path / "log", wall_timeout=1.5)
    assert run.killed == "timeout" and run.returncode is None and run.seconds < 10
    assert run.peak_mb > 0


def test_an_output_flood_is_stopped(tmp_path: Path) -> None:
    code = "import sys\nwhile True: sys.stdout.write('x' * 65536)"
    run = run_tree([sys.executable, "-c", code], tmp_path / "log", max_log_bytes=1 << 20)
    assert run.killed == "flood"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("case = 'one'\n", "case must be a number >= 0"),
        ("cases = 3\n", "[cases] must be a table"),
        ("bonus = 1\n", "unknown keys ['bonus']"),
        ("case = \n", "not valid TOML"),
    ],
)
def test_a_bad_points_file_is_a_usage_error_naming_it(
    tmp_path: Path, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "points.toml"
    bad.write_text(text)
    assert main(["grade-class", str(tmp_path), "--out", str(tmp_path / "o"), "--points", str(bad)]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert message in err and str(bad) in err


def test_points_overrides_by_name(tmp_path: Path) -> None:
    cfg = tmp_path / "points.json"
    cfg.write_text(json.dumps({"check": 3, "checks": {"tiling audit": 10}}))
    points = load_points(cfg)
    assert (points.of("check", "tiling audit"), points.of("check", "im2col layout")) == (10, 3)
    assert points.of("case", "tiled_matmul/k1/tile7") == 1  # the documented default


def test_a_missing_class_folder_is_a_usage_error(tmp_path: Path, capsys) -> None:
    assert main(["grade-class", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_the_cli_is_registered() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tinytorch.cli.main", "grade-class", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--jobs" in done.stdout and "--points" in done.stdout


@pytest.mark.slow
def test_notebook_and_percent_submissions_with_notebook(tmp_path: Path) -> None:
    import nbformat

    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Module 17"),
        nbformat.v4.new_code_cell("#| export\n" + BASE.read_text()),
        nbformat.v4.new_code_cell("raise SystemExit('scratch work: never exported, never run')"),
    ]
    nbformat.write(nb, str(subs / "nina.ipynb"))
    percent = "# %%\n#| default_exp perf.acceleration\n\n# %%\n#| export\n" + BOB.read_text()
    (subs / "olga.py").write_text(percent + "\n# %%\nprint(tiled_matmul)  # not exported\n")
    (tmp_path / "points.toml").write_text(POINTS_TOML)
    argv = ["grade-class", str(subs), "--out", str(out), "--notebook", "--timeout", "1",
            "--points", str(tmp_path / "points.toml")]  # fmt: skip
    assert main(argv) == 0
    rows = _rows(out)
    want = {"nina": EXPECTED["alice"], "olga": EXPECTED["bob"]}
    for student, expected in want.items():
        assert tuple(rows[student][c] for c in _COLS) == tuple(str(v) for v in expected), student
    page = (out / "class_report.html").read_text()
    assert "No flags." in page  # alice's code and bob's code are not alike


@pytest.mark.slow
def test_a_run_killed_at_the_wall_timeout_is_a_named_error_row(tmp_path: Path) -> None:
    from tinytorch.classroom.runner import grade_submission
    from tinytorch.render.platforms import gradebook_row

    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import time\n\ntime.sleep(120)\n")
    doc, run = grade_submission(sleeper, tmp_path / "work", wall_timeout=1.5)
    assert run.killed == "timeout" and doc["verdict"] == "ERROR"
    row = gradebook_row("sleeper", doc, load_points(None))
    assert row["error"] == "the grader was stopped after 2 s (the whole run, not one case)"
    assert (row["score"], row["max_score"]) == (0, 60)  # one maximum per assignment


def test_the_gflops_figure_with_part_b(tmp_path: Path) -> None:
    from tinytorch.classroom.class_report import figures

    def doc(gflops: float) -> dict:
        row = {"problem": "gemm 1024x1024x1024", "backend": "student", "status": "ok", "gflops": gflops}  # fmt: skip
        return {"verdict": "PASS", "cases": [], "checks": [], "part_b": {"rows": [row]}}

    figs = figures({f"s{i}": doc(1.0 + i) for i in range(8)}, tmp_path, part_b=True)
    png = figs["gflops"].read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000
    assert "gflops" not in figures({"s": doc(1.0)}, tmp_path / "b", part_b=False)


def test_the_platform_run_says_who_runs_the_students_code() -> None:
    import os

    from tinytorch.classroom.autograder import who_grades

    how = who_grades()
    if os.geteuid() == 0:  # the milestone stays root so its sandbox can give the student a uid
        assert how.startswith("as root") and "a uid of its own" in how
    else:
        assert how.startswith(f"as uid {os.geteuid()}") and "shares it" in how


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_keeps_what_is_done(tmp_path: Path) -> None:
    import signal
    import time

    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    (subs / "alice.py").write_text(BASE.read_text())
    # 60 s per case: still running when Ctrl-C comes, however loaded the machine is (with 5 s, a
    # slow start of alice's run once let dave's few strikes finish first, and the run ended 0)
    (subs / "dave.py").write_text(HANG)
    cmd = [sys.executable, "-m", "tinytorch.cli.main", "grade-class", str(subs), "--out", str(out),
           "--jobs", "2", "--timeout", "60"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 120
    while not (out / "results" / "alice.json").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (out / "results" / "alice.json").exists()
    proc.send_signal(signal.SIGINT)
    stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "interrupted" in stdout
    assert set(_rows(out)) == {"alice"} and not (out / "results" / "dave.json").exists()
    import psutil

    left = [p for p in psutil.process_iter(["cmdline"]) if str(out) in " ".join(p.info["cmdline"] or [])]  # fmt: skip
    assert left == []  # dave's milestone run was killed, not left behind


def test_ctrl_c_sets_the_stop_event_and_a_second_ctrl_c_raises() -> None:
    """A KeyboardInterrupt raised wherever the main thread is can land inside
    concurrent.futures.wait while it holds a future's lock, and the pool's shutdown then waits
    forever (a class run once hung on Ctrl-C under load): the first Ctrl-C only sets `stop`."""
    import signal
    import threading
    import time

    from tinytorch.classroom.classgrade import ctrl_c_sets

    before = signal.getsignal(signal.SIGINT)
    stop = threading.Event()
    with ctrl_c_sets(stop):
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.monotonic() + 5
        while not stop.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)  # a KeyboardInterrupt here fails the test
        assert stop.is_set()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
    assert signal.getsignal(signal.SIGINT) is before


def test_a_stopped_drain_cancels_what_has_not_started_and_raises_between_polls() -> None:
    import threading

    from tinytorch.classroom.classgrade import _drain
    from tinytorch.classroom.runner import error_doc
    from tinytorch.classroom.submissions import Submission

    stop = threading.Event()
    started: list[str] = []
    done: list[str] = []

    def one(sub, blob):
        started.append(sub.student)
        stop.set()  # as Ctrl-C does while this student is graded
        return error_doc(str(sub.entry), "PASS", "")

    subs = [Submission(s, Path(s), None) for s in ("ann", "ben", "cat")]
    with pytest.raises(KeyboardInterrupt):
        _drain(1, [(s, "blob") for s in subs], one, lambda sub, doc: done.append(sub.student), stop)
    assert started == ["ann"]  # ben and cat were cancelled, never started
    assert done == ["ann"]  # what finished is kept
    with pytest.raises(KeyboardInterrupt):  # a stopped run starts nothing more
        _drain(1, [(subs[1], "blob")], one, lambda sub, doc: done.append(sub.student), stop)
    assert started == ["ann"]


@pytest.mark.parametrize("jobs", [1, 2])
def test_side_by_side_gradings_get_one_blas_thread_each(tmp_path, monkeypatch, jobs) -> None:
    """With --jobs above 1 every grading runs with one BLAS/OpenMP thread (runner.ONE_THREAD):
    OpenBLAS's spinning idle threads otherwise take turns from the student graded beside them.
    With --jobs 1 the environment is the caller's."""
    from tinytorch.classroom import classgrade
    from tinytorch.classroom.runner import ONE_THREAD, error_doc

    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("ann", "ben"):
        (subs / f"{name}.py").write_text("x = 1\n")
    seen: list[dict[str, str]] = []

    def fake_grade(copy, private, *, env=None, **kwargs):
        seen.append(dict(env or os.environ))
        return error_doc(str(copy), "NOT_PASSED", "fake"), None

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.setattr(classgrade, "grade_submission", fake_grade)
    classgrade.grade_class(subs, tmp_path / "out", jobs=jobs)
    assert len(seen) == 2
    for env in seen:
        if jobs > 1:
            assert {k: env.get(k) for k in ONE_THREAD} == ONE_THREAD
        else:
            assert "OPENBLAS_NUM_THREADS" not in env


@pytest.mark.slow
def test_a_slow_but_legal_submission_ends_on_its_budget_not_the_wall_timeout(
    tmp_path: Path,
) -> None:
    """Red-teaming: Part A's default budget (300 s) was the class grader's wall timeout, so a
    submission sleeping just under the case timeout on every call was stopped by the wall:
    ERROR, not a grade. The run now gets a budget that ends before the wall timeout."""
    from tinytorch.classroom.runner import grade_submission

    slow = tmp_path / "slow.py"
    slow.write_text(BASE.read_text() + "\nimport time as _t\n_tm = tiled_matmul\n"
                    "def tiled_matmul(a, b, tile_size=64):\n    _t.sleep(0.9)\n"
                    "    return _tm(a, b, tile_size)\n")  # fmt: skip
    doc, run = grade_submission(slow, tmp_path / "work", case_timeout=1.0, wall_timeout=14.0)
    assert run.killed == "" and doc["verdict"] == "NOT_PASSED", (run, doc.get("error"))
    assert any(w.startswith("budget:") for w in doc["warnings"]), doc["warnings"]
    assert run.seconds < 14.0


def test_a_memory_flood_is_a_graded_failure_not_an_error(tmp_path: Path) -> None:
    """Red-teaming: a submission that forks memory hogs was stopped as a memory flood and
    recorded as ERROR, which PrairieLearn does not count: a way to void any attempt. It is the
    submission's doing, so it is NOT PASSED with no points, and gradable."""
    from tinytorch.classroom.runner import grade_submission
    from tinytorch.render.platforms import prairielearn_results

    hog = tmp_path / "hog.py"
    hog.write_text("import time\n_hog = bytearray(400 << 20)\n_hog[::4096] = b'x' * len(_hog[::4096])\ntime.sleep(60)\n")  # fmt: skip
    doc, run = grade_submission(hog, tmp_path / "work", max_tree_mb=250.0, wall_timeout=50.0)
    assert run.killed == "memory" and doc["verdict"] == "NOT_PASSED", (run, doc.get("error"))
    assert "memory" in doc["error"]
    pl = prairielearn_results(doc, load_points(None))
    assert pl["gradable"] is True and pl["score"] == 0.0


def test_a_student_the_grader_cannot_stage_is_one_error_row(tmp_path: Path, monkeypatch) -> None:
    """Red-teaming: with the temp folder full, writing the next student's copy raised OSError
    out of the class run, which died with a traceback and no gradebook."""
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "amy.py").write_text(BASE.read_text())
    (subs / "ben.py").write_text(BASE.read_text())
    from tinytorch.sandbox import stage

    write = stage.write  # the one place a copy is written (tinytorch/sandbox/stage.py)

    def full_disk(staged: stage.Staged, dest: Path, **kwargs: object) -> list[str]:
        if "amy.py" in staged.blobs:
            raise OSError(28, "No space left on device")
        return write(staged, dest, **kwargs)

    monkeypatch.setattr(stage, "write", full_disk)
    run = grade_class(subs, tmp_path / "out", jobs=1)
    assert run.docs["amy"]["verdict"] == "ERROR" and "No space left" in run.docs["amy"]["error"]
    assert run.docs["ben"]["verdict"] == "PASS"


@pytest.mark.slow
def test_an_unusable_file_name_is_left_out_and_the_class_is_graded(tmp_path: Path) -> None:
    """Red-teaming: one submission named 'John Smith [v2].py' stopped the whole class run before
    anyone was graded. It is left out, with a warning saying why, and the others are graded."""
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "John Smith [v2].py").write_text(BASE.read_text())
    (subs / "carl.py").write_text(BASE.read_text())
    assert main(["grade-class", str(subs), "--out", str(tmp_path / "out"), "--jobs", "1"]) == 0
    rows = list(csv.DictReader((tmp_path / "out" / "gradebook.csv").open()))
    assert [(r["student"], r["verdict"]) for r in rows] == [("carl", "PASS")]
    page = (tmp_path / "out" / "class_report.html").read_text()
    assert "is not a usable student id" in page and "John Smith [v2].py" in page
