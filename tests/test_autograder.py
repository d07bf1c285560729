"""The Gradescope autograder zip run end to end on a temporary /autograder, and the PrairieLearn
results, each validated against a JSON schema written from the platform's documentation."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest

from tinytorch.classroom.autograder import run_zip_locally
from tinytorch.classroom.platform_schemas import validate_gradescope, validate_prairielearn
from tinytorch.cli.main import main
from tinytorch.milestone07.cases import hidden_cases
from tinytorch.milestone07.scoring import Points
from tinytorch.render.platforms import gradescope_results, prairielearn_results

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "tests" / "mutants" / "student_base.py"
BOB = ROOT / "tests" / "classroom" / "bob.py"
CRASH = "import ctypes\n\n\n" + "".join(
    f"def {f}(*args, **kwargs):\n    return ctypes.string_at(0)\n\n\n"
    for f in ("tiled_matmul", "fused_gelu", "im2col", "im2col_conv2d", "col2im")
)


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("zip") / "autograder.zip"
    points = out.parent / "points.toml"
    points.write_text("case = 1\ncheck = 3\n[checks]\n'tiling audit' = 5\n")
    assert main(["autograder", "gradescope", "--out", str(out), "--points", str(points)]) == 0
    return out


def test_the_zip_has_setup_and_run_autograder_at_its_root(autograder_zip: Path) -> None:
    with zipfile.ZipFile(autograder_zip) as zf:
        names = set(zf.namelist())
        assert {"setup.sh", "run_autograder", "config.json"} <= names
        assert "tinytorch-src/pyproject.toml" in names
        assert "tinytorch-src/tinytorch/classroom/autograder.py" in names
        assert "tinytorch-src/extensions/kernels.cpp" in names
        for script in ("setup.sh", "run_autograder"):
            mode = zf.getinfo(script).external_attr >> 16
            assert mode & stat.S_IXUSR, script
        setup = zf.read("setup.sh").decode()
        config = json.loads(zf.read("config.json"))
    assert "g++" in setup and "pip install" in setup
    assert "useradd" not in setup and "chmod -R a+rX /opt/tinytorch" in setup  # see who_grades
    assert config["points"]["check"] == 3 and config["overrides"] == {"tiling audit": 5}


@pytest.mark.slow
def test_the_zips_package_source_builds_and_imports(autograder_zip: Path, tmp_path: Path) -> None:
    """What setup.sh installs (tinytorch-src), built and installed apart from this checkout."""
    with zipfile.ZipFile(autograder_zip) as zf:
        zf.extractall(tmp_path / "source")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels)]
    subprocess.run([*build, str(tmp_path / "source" / "tinytorch-src")], check=True, timeout=300)
    (wheel,) = wheels.glob("tinytorch_m07-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True, timeout=300)  # fmt: skip
    # Every tinytorch module must come from the install: one missing from the wheel would
    # otherwise be found in this checkout (the test venv's editable install).
    code = f"""
import json, pathlib, sys
import tinytorch.classroom.autograder, tinytorch.milestone07, tinytorch.extensions.build as build
mods = {{n: m.__file__ for n, m in sys.modules.items() if n.startswith("tinytorch") and getattr(m, "__file__", None)}}
print(json.dumps({{
    "outside": sorted(n for n, f in mods.items() if not pathlib.Path(f).is_relative_to({str(target)!r})),
    "cpp": (pathlib.Path(build.__file__).parent / "kernels.cpp").is_file(),
    "modules": len(mods),
}}))
"""
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["outside"] == [] and found["modules"] > 10, found  # the installed copy only
    assert found["cpp"]  # the C++ source the kernels are compiled from on first use


def test_the_zip_is_not_built_without_the_files_setup_sh_installs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tinytorch.classroom import autograder

    fake = tmp_path / "site-packages"  # what a non-editable install holds: the package only
    (fake / "tinytorch").mkdir(parents=True)
    (fake / "extensions").mkdir()
    monkeypatch.setattr(autograder, "_REPO", fake)
    out = tmp_path / "autograder.zip"
    assert main(["autograder", "gradescope", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "pyproject.toml, README.md not found" in err and "checkout" in err
    assert not out.exists()


def _autograde(zip_path: Path, root: Path, files: dict[str, str]) -> dict:
    """Lay out a Gradescope tree under `root`, run run_autograder, return results.json."""
    done = run_zip_locally(zip_path, root, files, timeout=300)
    assert done.returncode == 0, done.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    validate_gradescope(results)
    return results


@pytest.mark.slow
def test_a_passing_submission_scores_full_marks(autograder_zip: Path, tmp_path: Path) -> None:
    res = _autograde(autograder_zip, tmp_path, {"acceleration.py": BASE.read_text()})
    # 30 cases x 1 + 6 checks x 3 (backward and grading mode's "own work" among them) + the tiling
    # audit 5 (hidden cases: the default 1 each)
    published = [t for t in res["tests"] if t["visibility"] == "visible"]
    assert sum(t["max_score"] for t in published) == 30 + 6 * 3 + 5
    assert res["score"] == sum(t["max_score"] for t in res["tests"])
    assert all(t["status"] == "passed" for t in res["tests"])
    assert res["output"].startswith("Milestone 07: published cases and checks 53/53 points")
    verdict = next(t for t in res["tests"] if t["name"] == "verdict (hidden cases included)")
    assert verdict["output"].startswith("Milestone 07: PASS")
    assert res["extra_data"]["verdict"] == "PASS"
    # grading mode, end to end: a fresh secret seed, and the hidden cases shown after the due date
    assert res["extra_data"]["grading"] is True and res["extra_data"]["seed"] != 0
    hidden = [t for t in res["tests"] if t["name"].startswith("hidden/")]
    assert len(hidden) == len(hidden_cases(1)) and all(
        t["visibility"] == "after_due_date" for t in hidden
    )
    # Gradescope's default container has 768 MB: the whole tree stays well within it.
    assert 0 < res["extra_data"]["peak_mb"] < 768
    print(f"peak memory of the process tree: {res['extra_data']['peak_mb']} MB")


@pytest.mark.slow
def test_a_failing_submission_in_a_folder_names_the_failures(
    autograder_zip: Path, tmp_path: Path
) -> None:
    res = _autograde(autograder_zip, tmp_path, {"mywork/kernels.py": BOB.read_text()})
    failed = {t["name"] for t in res["tests"] if t["status"] == "failed"}
    assert "tiled_matmul/k1/tile7" in failed and "tiled_matmul/multiple/tile7" not in failed
    k1 = next(t for t in res["tests"] if t["name"] == "tiled_matmul/k1/tile7")
    assert k1["score"] == 0 and k1["max_score"] == 1 and "lesson:" in k1["output"]
    assert res["output"].startswith("Milestone 07: published cases and checks")
    verdict = next(t for t in res["tests"] if t["name"] == "verdict (hidden cases included)")
    assert verdict["status"] == "failed" and verdict["visibility"] == "after_due_date"
    assert verdict["output"].startswith("Milestone 07: NOT PASSED")


@pytest.mark.slow
def test_a_crashing_submission_is_graded_not_fatal(autograder_zip: Path, tmp_path: Path) -> None:
    res = _autograde(autograder_zip, tmp_path, {"acceleration.py": CRASH})
    cases = [t for t in res["tests"] if t.get("tags") == ["case"]]
    assert len(cases) == 30 and all(t["status"] == "failed" for t in cases)
    assert all(t["score"] == 0 for t in cases)
    assert "crash" in cases[0]["output"].lower() or "SIGSEGV" in cases[0]["output"]


# A correct Module 17 whose tiled_matmul then allocates 2 GB, 100 MB at a time, every page touched:
# without a limit on the student's process the tree would pass Gradescope's 768 MB long before
# the allocation fails.
HOG = (
    BASE.read_text()
    + """

_HOG = []


def tiled_matmul(*args, **kwargs):
    for _ in range(20):
        _HOG.append(np.ones(100 << 17))  # 100 MB
    raise AssertionError("2 GB allocated: no memory limit")
"""
)


@pytest.mark.slow
def test_a_memory_bomb_is_a_named_failure_within_the_container(
    autograder_zip: Path, tmp_path: Path
) -> None:
    res = _autograde(autograder_zip, tmp_path, {"acceleration.py": HOG})
    assert res["extra_data"]["verdict"] == "NOT_PASSED"  # graded, not an ERROR of the grader
    matmul = [t for t in res["tests"] if t["name"].startswith("tiled_matmul/")]
    assert matmul and all(t["status"] == "failed" for t in matmul)
    assert "MemoryError" in matmul[0]["output"], matmul[0]["output"]
    gelu = next(t for t in res["tests"] if t["name"].startswith("fused_gelu/"))
    assert gelu["status"] == "passed"  # the other kernels are still graded
    assert 0 < res["extra_data"]["peak_mb"] < 768  # the whole tree, this process included


def test_an_ungradeable_submission_still_gets_results_with_score_0(
    autograder_zip: Path, tmp_path: Path
) -> None:
    res = _autograde(autograder_zip, tmp_path, {"notes.txt": "I ran out of time"})
    assert res["score"] == 0
    assert "no acceleration.py" in res["output"]
    assert res["tests"][0]["status"] == "failed"


@pytest.mark.slow
def test_prairielearn_entry_point_writes_valid_results(tmp_path: Path) -> None:
    (tmp_path / "student").mkdir()
    (tmp_path / "student" / "acceleration.py").write_text(BOB.read_text())
    assert main(["autograder", "run", "prairielearn", "--root", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "results" / "results.json").read_text())
    validate_prairielearn(res)
    assert res["gradable"] is True
    # bob: 15 of 30 cases (1 each), 6 of 7 checks (2 each; backward fails, "own work" holds),
    # hidden cases apart.
    published = [t for t in res["tests"] if t["name"] != "hidden cases"]
    assert sum(t["points"] for t in published) == 15 + 12
    assert sum(t["max_points"] for t in published) == 30 + 14  # cases + 7 checks x 2


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["crash", "no file"])
def test_prairielearn_entry_point_on_a_crash_and_on_no_file(tmp_path: Path, kind: str) -> None:
    files = {"acceleration.py": CRASH} if kind == "crash" else {"notes.txt": "out of time"}
    for name, text in files.items():
        (tmp_path / "student" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "student" / name).write_text(text)
    (tmp_path / "tests").mkdir()  # where PrairieLearn puts the question's tests/ folder
    (tmp_path / "tests" / "points.toml").write_text("case = 2\ncheck = 1\nhidden_case = 0\n")
    argv = ["autograder", "run", "prairielearn", "--root", str(tmp_path),
            "--points", str(tmp_path / "tests" / "points.toml")]  # fmt: skip
    assert main(argv) == 0
    res = json.loads((tmp_path / "results" / "results.json").read_text())
    validate_prairielearn(res)
    if kind == "crash":  # graded: every case fails, worth the points file's 2 each; "own work"
        # holds of a file that does no work, so it earns nothing either (the gradebook contract)
        assert res["gradable"] is True and res["score"] == 0.0
        cases = [t for t in res["tests"] if "/" in t["name"] and t["name"] != "hidden cases"]
        assert len(cases) == 30 and {(t["points"], t["max_points"]) for t in cases} == {(0, 2)}
        assert "crash" in cases[0]["message"].lower() or "SIGSEGV" in cases[0]["message"]
    else:  # nothing to grade: not gradable (no attempt used), and the message says why
        why = res["message"].removeprefix("Not graded: ")
        assert res["gradable"] is False and why.startswith("no acceleration.py")
        assert why.endswith("in the folder") and res["format_errors"] == [why]


def test_milestone_run_format_prairielearn(tmp_path: Path, capsys) -> None:
    out = tmp_path / "pl.json"
    (tmp_path / "points.json").write_text(json.dumps({"case": 2, "check": 0, "hidden_case": 0}))
    argv = ["milestone", "run", "07", "--impl", str(BASE), "--no-part-b", "--json", str(out),
            "--format", "prairielearn", "--points", str(tmp_path / "points.json")]  # fmt: skip
    assert main(argv) == 0
    res = json.loads(out.read_text())
    validate_prairielearn(res)
    assert res["score"] == 1.0 and res["gradable"] is True and len(res["tests"]) == 36
    assert sum(t["max_points"] for t in res["tests"]) == 30 * 2  # the points file's
    assert main([*argv[:-4], "--points", str(tmp_path / "points.json")]) == 2  # not with json
    assert "--points goes with --format prairielearn" in capsys.readouterr().err


def _doc(**extra) -> dict:
    case = {"name": "tiled_matmul/k1/tile7", "status": "pass", "detail": "ok", "lesson": ""}
    hidden = {
        "name": "hidden/tiled_matmul/0/20x30x40/tile7",
        "status": "fail",
        "detail": "off by 2",
        "lesson": "L",
    }
    check = {"name": "tiling audit", "status": "fail", "detail": "one np.matmul", "lesson": "tile"}
    doc = {"verdict": "NOT_PASSED", "cases": [case], "checks": [check], "hidden_cases": [hidden]}
    return {**doc, "missing": [], "warnings": [], **extra}


def test_hidden_cases_are_after_due_date_and_withheld_from_the_summary() -> None:
    res = gradescope_results(_doc(), Points())
    validate_gradescope(res)
    by_name = {t["name"]: t for t in res["tests"]}
    assert by_name["hidden/tiled_matmul/0/20x30x40/tile7"]["visibility"] == "after_due_date"
    assert by_name["tiled_matmul/k1/tile7"]["visibility"] == "visible"
    assert "off by 2" not in res["output"] and "after the due date" in res["output"]
    assert (res["score"], by_name["deeper check: tiling audit"]["max_score"]) == (1, 2)
    # Gradescope hides the score (1 of 4, the hidden case included) before the due date; the
    # summary shown at once gives neither it nor the verdict: the published points only.
    # Every item of the assignment is scored (the gradebook contract): the doc's one case and
    # check among the 30 cases and 7 checks, its one hidden case among the 16.
    first = res["output"].splitlines()[0]
    assert first.startswith("Milestone 07: published cases and checks 1/44 points")
    assert "NOT PASSED" not in res["output"] and "/60" not in res["output"]
    verdict = by_name["verdict (hidden cases included)"]
    assert verdict["visibility"] == "after_due_date" and verdict["max_score"] == 0
    assert verdict["output"].startswith("Milestone 07: NOT PASSED  (1/60 points)")
    assert "off by 2" in verdict["output"]  # the hidden case's details, after the due date


def test_the_leaderboard_is_the_students_gflops_at_1024() -> None:
    row = {"problem": "gemm 1024x1024x1024", "backend": "student", "status": "ok", "gflops": 3.25}
    res = gradescope_results(_doc(part_b={"rows": [row]}), Points())
    validate_gradescope(res)
    assert res["leaderboard"] == [
        {"name": "tiled_matmul GFLOP/s (1024)", "value": 3.25, "order": "desc"}
    ]
    assert "leaderboard" not in gradescope_results(_doc(), Points())


def test_an_error_doc_is_not_gradable_on_prairielearn() -> None:
    res = prairielearn_results({"verdict": "ERROR", "error": "stopped after 480 s"}, Points())
    validate_prairielearn(res)
    assert res["gradable"] is False and "480 s" in res["message"]


@pytest.mark.parametrize(
    "bad",
    [
        {"score": 1, "tests": [{"name": "a", "score": 1, "max_score": 1, "status": "ok"}]},
        {"score": 1, "tests": [{"name": "a", "score": 2, "max_score": 1}]},
        {"score": 1, "tests": [{"name": "a", "score": 1, "visibility": "later"}]},
        {"score": "full"},
        {"tests": [{"name": "no score"}]},
        {"score": 1, "leaderboard": [{"name": "x"}]},
        {"score": 1, "scroe": 2},
    ],
)
def test_the_gradescope_schema_rejects_what_the_docs_do_not_allow(bad: dict) -> None:
    with pytest.raises(jsonschema.ValidationError):
        validate_gradescope(bad)


@pytest.mark.parametrize(
    "bad",
    [
        {"gradable": True},
        {"gradable": True, "score": 1.5},
        {"gradable": True, "score": 1, "tests": [{"name": "a", "points": 2, "max_points": 1}]},
        {"gradable": True, "score": 1, "tests": [{"name": "a"}]},
        {"score": 1},
    ],
)
def test_the_prairielearn_schema_rejects_what_the_docs_do_not_allow(bad: dict) -> None:
    with pytest.raises(jsonschema.ValidationError):
        validate_prairielearn(bad)


def test_a_bad_points_file_stops_the_zip_build(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("case: 1")
    assert main(["autograder", "gradescope", "--out", str(tmp_path / "a.zip"), "--points", str(bad)]) == 2  # fmt: skip
    assert "expected a .toml or .json file" in capsys.readouterr().err


# ---- what the student reads: the root cause first, each lesson once -----------------------------
COLUMN_ORDER = (  # the im2col_column_order mutant of tests/test_milestone_mutants.py
    ("cols = np.empty((N, oh, ow, C, k, k), dtype=np.float32)", "cols = np.empty((N, oh, ow, k, k, C), dtype=np.float32)"),
    ("cols[:, :, :, :, di, dj] = win", "cols[:, :, :, di, dj, :] = win"),
)  # fmt: skip


def _graded_doc(tmp_path: Path, replace: tuple[tuple[str, str], ...]) -> dict:
    from tinytorch.milestone07 import run_part_a
    from tinytorch.render.json_doc import to_json

    src = BASE.read_text()
    for old, new in replace:
        assert src.count(old) == 1
        src = src.replace(old, new)
    path = tmp_path / "student.py"
    path.write_text(src)
    return to_json(run_part_a(str(path), grading=True, seed=11), None)


def test_platform_outputs_say_the_root_cause_first_and_each_lesson_once(tmp_path: Path) -> None:
    doc = _graded_doc(tmp_path, COLUMN_ORDER)
    assert doc["diagnosis"]["root_causes"][0]["check"] == "im2col layout"
    fix = doc["diagnosis"]["root_causes"][0]["lesson"]
    res = gradescope_results(doc, Points())
    validate_gradescope(res)
    out = res["output"]
    assert out.index("root cause first:") < out.index("FAIL")  # the cause before its symptoms
    assert " ".join(out.split()).count(" ".join(fix.split())) == 1  # once, not once per case
    assert "(cause: im2col layout, above)" in out
    assert "hidden/" not in out  # before the due date no hidden case is named
    conv = next(
        t for t in res["tests"] if t["name"].startswith("im2col_conv2d/") and t["score"] == 0
    )
    assert f"cause: im2col layout (deeper check): {fix}" in conv["output"]
    pl = prairielearn_results(doc, Points())
    validate_prairielearn(pl)
    conv = next(
        t for t in pl["tests"] if t["name"].startswith("im2col_conv2d/") and not t["points"]
    )
    assert conv["output"].startswith("cause: im2col layout (deeper check):")
    assert "hidden/" not in pl["output"]


def test_a_lesson_of_many_cases_is_said_once(tmp_path: Path) -> None:
    doc = _graded_doc(tmp_path, (("C[i0:i1, j0:j1] += A", "C[i0:i1, j0:j1] = A"),))
    res = gradescope_results(doc, Points())
    out = res["output"]
    failing = [c for c in doc["cases"] if c["status"] == "fail"]
    assert len(failing) >= 10 and out.count("assigned, not accumulated") == 1
    assert "fix (tiled_matmul/" in out and "hidden/" not in out
    hidden = [c["name"] for c in doc["hidden_cases"] if c["status"] == "fail"]
    verdict = next(t for t in res["tests"] if t["name"] == "verdict (hidden cases included)")
    assert hidden and all(name in verdict["output"] for name in hidden)  # after the due date


LEAKS = """

def fused_gelu(x):
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    found = []
    for name in sorted(os.listdir(here)):
        try:
            found.append(open(os.path.join(here, name)).read()[:80])
        except OSError:
            pass
    raise ValueError(" | ".join(found))
"""


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a root-only file to leak")
def test_a_symlink_beside_the_submission_does_not_bring_a_root_only_file(tmp_path: Path) -> None:
    """Red-teaming: the platform grader copied the submission folder as root, following links,
    so a link beside acceleration.py to a root-only file brought its contents into the child's
    reach and, through an error message, into results.json."""
    from tinytorch.classroom.autograder import grade_platform_submission

    secret = tmp_path / "secret"
    secret.write_text("TOPSECRET-" + "x" * 20)
    secret.chmod(0o600)
    folder = tmp_path / "student"
    folder.mkdir()
    (folder / "acceleration.py").write_text(BASE.read_text() + LEAKS)
    (folder / "helper.py").symlink_to(secret)
    doc, _how = grade_platform_submission(folder)
    text = json.dumps(doc)
    assert doc["verdict"] == "NOT_PASSED" and "A correct Module 17" in text  # its own file: read
    assert "TOPSECRET" not in text


def test_a_symlinked_submission_is_not_graded(tmp_path: Path) -> None:
    from tinytorch.classroom.submissions import discover

    subs = tmp_path / "subs"
    (subs / "bob").mkdir(parents=True)
    (subs / "alice.py").symlink_to(BASE)
    (subs / "bob" / "acceleration.py").symlink_to(BASE)
    (subs / "carol.py").write_text(BASE.read_text())
    got = {s.student: s for s in discover(subs)}
    assert got["alice"].impl is None and "symbolic link" in got["alice"].problem
    assert got["bob"].impl is None and got["carol"].impl == subs / "carol.py"


# --------------------------------------------------------------------------------------------
# The gradebook contract, on every route: CSV (gradebook_row), Gradescope, PrairieLearn and
# nbgrader (the graded cells). One maximum per assignment whatever happened to the student; no
# points for a file that does no work.
# --------------------------------------------------------------------------------------------


def _maxima(doc: dict, points: Points) -> dict[str, float]:
    """The maximum each route gives `doc`."""
    from tinytorch.classroom.nbgrader_layout import cell_of
    from tinytorch.milestone07.scoring import score_items, total
    from tinytorch.render.platforms import gradebook_row

    gs = gradescope_results(doc, points)
    pl = prairielearn_results(doc, points)
    cells = cell_of(score_items(doc, points))
    return {
        "csv": gradebook_row("s", doc, points)["max_score"],
        "gradescope": sum(t["max_score"] for t in gs["tests"]),
        "prairielearn": sum(t["max_points"] for t in pl["tests"]),
        "nbgrader": sum(total(items)[1] for items in cells.values()),
    }


def _scores(doc: dict, points: Points) -> dict[str, float]:
    from tinytorch.render.platforms import gradebook_row

    return {
        "csv": gradebook_row("s", doc, points)["score"],
        "gradescope": gradescope_results(doc, points)["score"],
        "prairielearn": prairielearn_results(doc, points)["score"],
    }


def _contract_doc(**extra) -> dict:
    from tinytorch.classroom.runner import error_doc

    return {**error_doc("acceleration.py", "NOT_PASSED", ""), "error": None, **extra}


def _syntax_error_doc() -> dict:
    """What a file that does not compile gives: its cases fail, no check or hidden case runs."""
    from tinytorch.milestone07.cases import CASES

    cases = [{"name": c.name, "status": "error", "detail": "SyntaxError"} for c in CASES]
    return _contract_doc(cases=cases)


def _untouched_doc() -> dict:
    """The student edition as released: every case and check incomplete, "own work" holds."""
    from tinytorch.milestone07.scoring import MUTATION_CHECK, OWN_WORK_CHECK, assignment_items

    rows = assignment_items(grading=True)
    case = [{"name": n, "status": "incomplete"} for k, n in rows if k == "case"]
    hidden = [{"name": f"{n}/3x4", "status": "incomplete"} for k, n in rows if k == "hidden_case"]
    checks = [{"name": n, "status": "incomplete"} for k, n in rows if k == "check"]
    for check in checks:
        check["status"] = {OWN_WORK_CHECK: "pass", MUTATION_CHECK: "not_run"}.get(
            check["name"], "incomplete"
        )
    return _contract_doc(verdict="INCOMPLETE", cases=case, hidden_cases=hidden, checks=checks)


@pytest.mark.parametrize(
    "what", ["syntax error", "notebook skipped", "grader error", "untouched", "flood"]
)
def test_every_route_gives_one_maximum_whatever_happened(what: str) -> None:
    from tinytorch.classroom.runner import error_doc

    doc = {
        "syntax error": _syntax_error_doc,
        "notebook skipped": lambda: error_doc(
            "a.ipynb", "INCOMPLETE", "a notebook: use --notebook"
        ),
        "grader error": lambda: error_doc("a.py", "ERROR", "the grader was stopped after 300 s"),
        "untouched": _untouched_doc,
        "flood": lambda: error_doc("a.py", "NOT_PASSED", "the submission flooded the output"),
    }[what]()
    assert _maxima(doc, Points()) == dict.fromkeys(("csv", "gradescope", "prairielearn",
                                                    "nbgrader"), 60)  # fmt: skip
    custom = Points(case=2, check=0, hidden_case=0, overrides={"tiling audit": 4})
    assert set(_maxima(doc, custom).values()) == {30 * 2 + 4}
    validate_gradescope(gradescope_results(doc, Points()))
    validate_prairielearn(prairielearn_results(doc, Points()))


def test_an_untouched_file_scores_nothing_on_every_route() -> None:
    scores = _scores(_untouched_doc(), Points())
    assert scores == {"csv": 0, "gradescope": 0, "prairielearn": 0.0}
    gs = gradescope_results(_untouched_doc(), Points())
    own = next(t for t in gs["tests"] if t["name"] == "deeper check: own work")
    assert own["score"] == 0 and "no case passed" in own["output"]


def test_own_work_earns_its_points_once_a_case_passes() -> None:
    doc = _untouched_doc()
    doc["cases"][0]["status"] = "pass"
    assert _scores(doc, Points())["csv"] == 1 + 2  # the case and "own work"


def test_a_run_that_stopped_early_names_what_it_did_not_reach() -> None:
    text = gradescope_results(_syntax_error_doc(), Points())["output"]
    assert "23 items not reached by the run: 0 of their 30 points" in text
    pl = prairielearn_results(_syntax_error_doc(), Points())
    assert pl["gradable"] is True and pl["score"] == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("what", ["empty", "untouched"])
def test_an_empty_or_untouched_file_scores_0_of_60_when_graded(what: str, tmp_path: Path) -> None:
    """Grading mode, for real: the student edition as released (`tito release 17`) and an empty
    file; their check names are the assignment's, so scoring and the milestone agree on them."""
    from tinytorch.classroom.runner import grade_submission
    from tinytorch.milestone07.scoring import assignment_items, load_points
    from tinytorch.render.platforms import gradebook_row

    if what == "untouched":
        assert main(["release", "17", "--out", str(tmp_path)]) == 0
        impl = tmp_path / "acceleration.py"
    else:
        impl = tmp_path / "acceleration.py"
        impl.write_text("")
    doc, _run = grade_submission(impl, tmp_path / "work")
    assert doc["verdict"] == "INCOMPLETE"
    row = gradebook_row("s", doc, load_points(None))
    assert (row["score"], row["max_score"]) == (0, 60)
    checks = [n for k, n in assignment_items(grading=True) if k == "check"]
    assert [c["name"] for c in doc["checks"]] == checks
