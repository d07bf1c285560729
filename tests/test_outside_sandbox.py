"""What runs outside the sandbox (issue 28): staging, class discovery, the grader's own parsing
and similarity, and what is printed. Each test is one red-team finding, held."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from tinytorch.sandbox import stage

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "tests" / "mutants" / "student_base.py"
ZERO = "".join(
    f"def {f}(*args, **kwargs):\n    return 0\n\n\n"
    for f in ("tiled_matmul", "fused_gelu", "im2col", "im2col_conv2d", "col2im")
)
AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: chown to another uid")


# ---- staging: the forged PASS through a link that root chowned ---------------------------------


@AS_ROOT
def test_staging_for_another_user_never_touches_a_links_target(tmp_path: Path) -> None:
    """Red-teaming: run_autograder, as root, chowned the staged copy to the grading user, and so
    the target of a link in it (a module of the grader's own environment); the student's child
    then appended to that module, which the milestone imported late: a forged PASS."""
    target = tmp_path / "grader_module.py"
    target.write_text("x = 1\n")
    before = target.stat()
    sub = tmp_path / "student"
    sub.mkdir()
    (sub / "acceleration.py").write_text(ZERO)
    (sub / "evil.py").symlink_to(target)
    (sub / "hard.py").hardlink_to(target)
    (sub / "pipe.py").parent.mkdir(exist_ok=True)
    os.mkfifo(sub / "pipe.py")
    staged = stage.collect(sub, main="acceleration.py")
    dest = tmp_path / "dest"
    dest.mkdir()
    stage.write(staged, dest, owner=(54321, 54321))
    after = target.stat()
    assert (after.st_uid, after.st_gid, after.st_mode) == (
        before.st_uid,
        before.st_gid,
        before.st_mode,
    )
    assert sorted(os.listdir(dest)) == ["acceleration.py"]
    assert (dest / "acceleration.py").stat().st_uid == 54321 and dest.stat().st_uid == 54321
    said = " ".join(staged.skipped)
    assert "evil.py: a symbolic link" in said and "hard.py: a hard link" in said
    assert "pipe.py: a FIFO" in said


@AS_ROOT
def test_the_platform_entry_hands_over_only_what_it_staged(tmp_path: Path, monkeypatch) -> None:
    """The platform entry point (Gradescope, PrairieLearn) stages through stage.py: the link's
    target keeps its owner, and the correct file beside junk (a dangling link, a FIFO) is graded."""
    from tinytorch.classroom import autograder

    target = tmp_path / "site_module.py"
    target.write_text("x = 1\n")
    sub = tmp_path / "submission"
    sub.mkdir()
    (sub / "acceleration.py").write_text(BASE.read_text())
    (sub / "helpers.py").symlink_to(target)
    (sub / "dangling.py").symlink_to(tmp_path / "nowhere")
    os.mkfifo(sub / "fifo.py")
    seen: dict[str, object] = {}

    def fake_grade(copy: Path, private: Path, **kwargs: object) -> tuple[dict, None]:
        seen["files"] = sorted(os.listdir(copy.parent))
        seen["owner"] = copy.stat().st_uid
        seen["text"] = copy.read_text()
        return {"verdict": "PASS", "warnings": []}, None

    drop = {"user": 54321, "group": 54321, "extra_groups": []}
    monkeypatch.setattr(autograder, "unprivileged", lambda: (drop, "as test"))
    monkeypatch.setattr(autograder, "grade_submission", fake_grade)
    doc, _how = autograder.grade_platform_submission(sub)
    assert target.stat().st_uid == 0
    assert seen["files"] == ["acceleration.py"] and seen["owner"] == 54321
    assert seen["text"] == BASE.read_text()
    assert any(
        "helpers.py: a symbolic link" in w and "fifo.py: a FIFO" in w for w in doc["warnings"]
    )


def test_the_milestone_process_imports_nothing_after_student_code_starts(monkeypatch) -> None:
    """The rule behind the attack: every module the milestone process imports is imported before
    the student's code runs (boundary.preload), so a file the student could reach is never run
    by the grader. Checked on the PrairieLearn format too, which imports its renderer last."""
    from tinytorch.cli.milestone import run_milestone
    from tinytorch.sandbox import parent

    before: dict[str, None] = {}
    start = parent.Sandbox.start

    def spy(self: parent.Sandbox, *args: object, **kwargs: object) -> dict:
        if not before:
            before.update(dict.fromkeys(sys.modules))
        return start(self, *args, **kwargs)

    monkeypatch.setattr(parent.Sandbox, "start", spy)
    for fmt in ("json", "prairielearn"):
        before.clear()
        code = run_milestone(str(BASE), grading=True, part_b=False, out=io.StringIO(), fmt=fmt)
        assert code == 0
        late = [
            m for m in sys.modules if m not in before and getattr(sys.modules[m], "__file__", None)
        ]
        assert late == [], f"imported after the student's code started ({fmt}): {late}"


def test_the_script_route_refuses_a_link_in_grading_mode(tmp_path: Path, capsys) -> None:
    """`tito milestone run 07 --impl mallory/acceleration.py --grading`, where that file links to
    a classmate's file, graded the classmate's work (PASS); grade-class refuses the same link."""
    from tinytorch.cli.main import main

    (tmp_path / "carol").mkdir()
    (tmp_path / "mallory").mkdir()
    (tmp_path / "carol" / "acceleration.py").write_text(BASE.read_text())
    link = tmp_path / "mallory" / "acceleration.py"
    link.symlink_to(tmp_path / "carol" / "acceleration.py")
    out = tmp_path / "r.json"
    argv = ["milestone", "run", "07", "--impl", str(link), "--grading", "--no-part-b"]
    assert main([*argv, "--json", str(out)]) == 2
    assert "symbolic link" in capsys.readouterr().err and not out.exists()


def test_the_script_route_refuses_a_fifo_and_a_file_too_large(tmp_path: Path, capsys) -> None:
    from tinytorch.cli.main import main

    os.mkfifo(tmp_path / "mallory.py")
    big = tmp_path / "big.py"
    big.write_text("x = 1\n" + "#" * (stage.MAX_FILE_BYTES + 10) + "\n")
    for path, why in ((tmp_path / "mallory.py", "a FIFO"), (big, "file too large")):
        assert main(["milestone", "run", "07", "--impl", str(path), "--no-part-b"]) == 2
        assert why in capsys.readouterr().err


def test_deep_folders_are_walked_without_recursion(tmp_path: Path) -> None:
    """A folder nested thousands of levels deep: RecursionError in class discovery (traceback,
    exit 1), ERROR on Gradescope. The scan is iterative and stops at MAX_DEPTH, named."""
    from tinytorch.classroom.submissions import discover, find_module

    sub = tmp_path / "subs" / "deep"
    sub.mkdir(parents=True)
    (sub / "acceleration.py").write_text(BASE.read_text())
    fd = os.open(sub, os.O_RDONLY)
    for _ in range(3000):  # past PATH_MAX: made relative to each folder's descriptor
        os.mkdir("d", dir_fd=fd)
        new = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = new
    os.close(fd)
    impl, why = find_module(sub, notebook=True)
    assert impl == sub / "acceleration.py", why
    found = stage.scan(sub)
    assert any("deeper than" in s for s in found.skipped)
    (got,) = discover(tmp_path / "subs")
    assert got.impl == sub / "acceleration.py"
    assert got.mtime() > 0


def test_two_entries_for_one_id_grade_one_and_name_the_clash(tmp_path: Path) -> None:
    from tinytorch.classroom.submissions import discover

    subs = tmp_path / "subs"
    (subs / "mallory").mkdir(parents=True)
    (subs / "mallory" / "acceleration.py").write_text(ZERO)
    (subs / "mallory.py").write_text(ZERO)
    (subs / "alice.py").write_text(ZERO)
    skipped: list[str] = []
    got = discover(subs, skipped=skipped)
    assert [s.student for s in got] == ["alice", "mallory"]
    assert got[1].entry == subs / "mallory"
    assert any("mallory.py" in s and "keep one" in s for s in skipped)


def test_a_fifo_in_a_class_is_refused_without_opening_it(tmp_path: Path) -> None:
    from tinytorch.classroom.submissions import discover

    subs = tmp_path / "subs"
    subs.mkdir()
    os.mkfifo(subs / "mallory.py")
    (got,) = discover(subs)
    assert got.impl is None and "a FIFO" in got.problem
