"""What runs outside the sandbox (issue 28): staging, class discovery, the grader's own parsing
and similarity, and what is printed. Each test is one red-team finding, held."""

from __future__ import annotations

import io
import json
import os
import sys
import time
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
    stage.write(staged, dest)
    stage.hand_over(dest, (54321, 54321))  # as the sandbox gives its copy to the child's uid
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
        seen["popen_kwargs"] = kwargs.get("popen_kwargs")
        return {"verdict": "PASS", "warnings": []}, None

    monkeypatch.setattr(autograder, "grade_submission", fake_grade)
    doc, how = autograder.grade_platform_submission(sub)
    assert target.stat().st_uid == 0
    assert seen["files"] == ["acceleration.py"] and seen["owner"] == os.geteuid()
    # the milestone keeps the grader's uid (root): its sandbox gives the student's code another
    assert not seen["popen_kwargs"] and how == autograder.who_grades()
    assert seen["text"] == BASE.read_text()
    assert any(
        "helpers.py: a symbolic link" in w and "fifo.py: a FIFO" in w for w in doc["warnings"]
    )


# ---- a result file is trusted only from a milestone that exited as its verdict says ----------

FORGE = """
import json, os, signal, sys
path, verdict, end = sys.argv[1:4]
with open(path, "w") as fh:
    json.dump({"verdict": verdict, "cases": [], "checks": []}, fh)
if end == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit(int(end))
"""


@pytest.mark.parametrize(
    ("verdict", "end", "trusted"),
    [("PASS", "kill", False), ("PASS", "1", False), ("PASS", "3", False),
     ("PASS", "0", True), ("NOT_PASSED", "1", True), ("INCOMPLETE", "1", True)],
)  # fmt: skip
def test_a_result_file_is_trusted_only_when_the_exit_status_agrees(
    tmp_path: Path, monkeypatch, verdict: str, end: str, trusted: bool
) -> None:
    """Red-teaming: on a host without namespaces, a student's process that shared the milestone's
    uid wrote a PASS into the milestone's result file and SIGKILLed it: Gradescope 60/60."""
    from tinytorch.classroom import runner

    def forged(impl: object, json_path: object, **kwargs: object) -> list[str]:
        return [sys.executable, "-c", FORGE, str(json_path), verdict, end]

    monkeypatch.setattr(runner, "milestone_command", forged)
    doc, _run = runner.grade_submission(tmp_path / "alice.py", tmp_path / "work")
    if trusted:
        assert doc["verdict"] == verdict
    else:
        assert doc["verdict"] == "ERROR" and "not trusted" in doc["error"], doc
        assert ("signal 9" if end == "kill" else f"exited {end}") in doc["error"]


FORGER = """
def _forge():  # find the milestone's --json among the ancestors, write a PASS, kill it
    import json, os, signal
    pid = os.getppid()
    for _ in range(8):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        except OSError:
            return
        if b"--json" in argv:
            path = argv[argv.index(b"--json") + 1].decode()
            try:
                with open(path, "w") as fh:
                    json.dump({"verdict": "PASS", "cases": [], "checks": []}, fh)
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            return
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])


_forge()
"""


@AS_ROOT
@pytest.mark.slow
def test_the_platform_entry_keeps_the_students_code_off_the_milestones_uid(
    tmp_path: Path, monkeypatch
) -> None:
    """The same attack, end to end on the platform entry as root with namespaces off (as in a
    container without CAP_SYS_ADMIN): the student's code runs under a uid of its own, which can
    neither write the milestone's result nor signal it; at worst the forgery is not trusted."""
    from tinytorch.classroom import autograder
    from tinytorch.sandbox import spawn
    from tinytorch.sandbox.child import confine

    monkeypatch.setenv(spawn.NAMESPACES_VAR, "0")
    sub = tmp_path / "submission"
    sub.mkdir()
    (sub / "acceleration.py").write_text(ZERO + FORGER)
    doc, _how = autograder.grade_platform_submission(sub)
    assert doc["verdict"] != "PASS", doc
    # Where Python lives under a folder other uids cannot enter (/root/.pyenv), the sandbox would
    # keep root's uid without a mount namespace: grading refuses to start (fails closed), and the
    # student's code never runs.
    package = str(ROOT / "tinytorch")
    if confine.blocked_dirs(spawn.needed_paths(package)):
        assert doc["verdict"] == "ERROR" and "isolation (uid)" in doc["error"], doc
    else:
        assert doc["verdict"] == "INCOMPLETE", doc.get("error")  # no Im2colConv2dFunction: unforged


RUNS = [("json", False), ("prairielearn", False)]


@pytest.mark.parametrize(
    "runs", [RUNS, pytest.param([("json", True)], marks=pytest.mark.slow, id="part_b")]
)
def test_the_milestone_process_imports_nothing_after_student_code_starts(
    monkeypatch, runs: list[tuple[str, bool]]
) -> None:
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
    for fmt, part_b in runs:
        before.clear()
        code = run_milestone(str(BASE), grading=True, part_b=part_b, out=io.StringIO(), fmt=fmt)
        assert code == 0
        late = [
            m for m in sys.modules if m not in before and getattr(sys.modules[m], "__file__", None)
        ]
        assert late == [], f"imported after the student's code started ({fmt}, {part_b}): {late}"


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


def test_a_refused_file_name_reaches_the_terminal_without_its_escape_sequences(
    tmp_path: Path, capsys
) -> None:
    """Red-teaming: a FIFO (or a file over the cap) named with OSC and CSI sequences set the
    terminal's title and cleared the screen through the usage line on stderr."""
    from tinytorch.cli.main import main

    name = "\x1b]0;PWNED\x07\x1b[2J\x1b[31mx.py"
    os.mkfifo(tmp_path / name)
    assert main(["milestone", "run", "07", "--impl", str(tmp_path / name), "--no-part-b"]) == 2
    err = capsys.readouterr().err
    assert "x.py: a FIFO" in err  # still named: the sequences are gone, OSC title and all
    assert "\x1b" not in err and "\x07" not in err


def _remove_deep(top: Path) -> None:
    """Remove a chain of nested folders of any depth without recursion (shutil.rmtree, and so
    pytest's own tmp cleanup, would hit RecursionError)."""
    fds, names = [os.open(top, os.O_RDONLY)], []
    while True:
        entries = list(os.scandir(fds[-1]))
        for e in entries:
            if not e.is_dir(follow_symlinks=False):
                os.unlink(e.name, dir_fd=fds[-1])
        dirs = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        if dirs:
            names.append(dirs[0])
            fds.append(os.open(dirs[0], os.O_RDONLY, dir_fd=fds[-1]))
        elif names:
            os.close(fds.pop())
            os.rmdir(names.pop(), dir_fd=fds[-1])
        else:
            os.close(fds.pop())
            return


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
    try:
        impl, why = find_module(sub, notebook=True)
        assert impl == sub / "acceleration.py", why
        found = stage.scan(sub)
        assert any("deeper than" in s for s in found.skipped)
        (got,) = discover(tmp_path / "subs")
        assert got.impl == sub / "acceleration.py"
        assert got.mtime() > 0
    finally:
        _remove_deep(sub / "d")
        os.rmdir(sub / "d")


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


@pytest.mark.slow
def test_a_hard_link_to_a_classmates_file_does_not_zero_the_classmate(tmp_path: Path) -> None:
    """Red-teaming: mallory's archive, extracted into the class folder, hard-linked her
    acceleration.py to alice.py; every file with two links was refused, so alice was NOT PASSED,
    "not graded: a hard link". A link whose every name is in the class folder is graded now, and
    named; one to a file outside the folder is still refused."""
    from tinytorch.classroom.classgrade import grade_class

    subs, outside = tmp_path / "subs", tmp_path / "outside.py"
    (subs / "mallory").mkdir(parents=True)
    (subs / "alice.py").write_text(BASE.read_text())
    os.link(subs / "alice.py", subs / "mallory" / "acceleration.py")
    outside.write_text(BASE.read_text())
    os.link(outside, subs / "carol.py")
    run = grade_class(subs, tmp_path / "out", jobs=1)
    verdicts = {s: d["verdict"] for s, d in run.docs.items()}
    assert verdicts == {"alice": "PASS", "mallory": "PASS", "carol": "NOT_PASSED"}
    assert "hard link" in run.docs["carol"]["error"] or "hard link" in str(run.docs["carol"])
    said = "alice.py, mallory/acceleration.py are one file"
    assert any(said in w for w in run.warnings)
    assert any(said in w for w in run.docs["alice"]["warnings"])
    assert any(said in w for w in run.docs["mallory"]["warnings"])


@pytest.mark.slow
def test_a_resubmission_with_old_file_times_is_regraded(tmp_path: Path) -> None:
    """Red-teaming: resuming trusted file times, which an archive sets: a resubmission dated
    before its first result kept that result. What is graded is now compared by its digest."""
    from tinytorch.classroom.classgrade import grade_class

    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    (subs / "alice.py").write_text(BASE.read_text())
    (subs / "bob.py").write_text(BASE.read_text())
    first = grade_class(subs, out, jobs=1)
    assert {s: d["verdict"] for s, d in first.docs.items()} == {"alice": "PASS", "bob": "PASS"}
    (subs / "alice.py").write_text(ZERO)
    os.utime(subs / "alice.py", (1_000_000_000, 1_000_000_000))  # 2001, as an archive may say
    again = grade_class(subs, out, jobs=1)
    assert again.resumed == ["bob"]
    assert again.docs["alice"]["verdict"] == "INCOMPLETE"  # ZERO: regraded, not the old PASS


# ---- the grader's own parsing and comparing stay bounded -----------------------------------------


def _percent_file(cells: int) -> str:
    parts = ["#| default_exp perf.acceleration\n"]
    for i in range(cells // 2):
        parts.append(f"# %%\n#| export\ndef f{i}(x):\n    return x + {i}  # {'pad ' * 20}\n\n")
        parts.append(f"# %%\nprint(f{i}(1))\n\n")
    return "".join(parts)


def test_export_parsing_is_linear(tmp_path: Path) -> None:
    """A 1.5 MB percent file: 4,000 cells took 8 s, 8,000 cells 33 s in the grader's own export
    parsing (each cell searched for in the file again)."""
    from tinytorch.sandbox.child.exports import exported_source

    path = tmp_path / "acceleration.py"
    path.write_text(_percent_file(8000))
    start = time.perf_counter()
    text = exported_source(path)
    assert time.perf_counter() - start < 1.0
    lines = text.splitlines()
    assert lines[3] == "def f0(x):" and "print(f0(1))" not in text  # line N is line N
    assert text.count("def f") == 4000


def test_a_notebook_cell_whose_source_is_not_text_is_the_students_problem(tmp_path: Path) -> None:
    """A cell `source` that is an integer: AttributeError in the grader's own process, and the
    class run died with a traceback."""
    from tinytorch.classroom.submissions import source_text
    from tinytorch.sandbox.child.exports import SubmissionError, exported_source

    nb = {
        "cells": [{"id": "c1", "cell_type": "code", "source": 7, "metadata": {}, "outputs": [],
                   "execution_count": None}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }  # fmt: skip
    path = tmp_path / "mallory.ipynb"
    path.write_text(json.dumps(nb))
    with pytest.raises(SubmissionError, match="cell 1 has a source that is not text"):
        exported_source(path)
    assert isinstance(source_text(path), str)


@pytest.mark.timing
def test_similarity_is_near_linear_on_large_files() -> None:
    """Two identical 1 MB files: matching regions were quadratic (4,000 lines 7.2 s). Timed in
    this process's CPU time (it runs in this process, one thread), so a busy machine does not
    fail it: 12 hogs on 2 cores took it from 3.5 s of wall time past the old 10 s limit. Doubling
    the files must not much more than double the time: quadratic would quadruple it."""
    from tinytorch.classroom.similarity import similarity_flags

    def cpu_seconds(n: int) -> tuple[float, set[tuple[str, str]], bool]:
        big = "".join(
            f"def f{i}(a, b):\n    return a[{i}] * b + {i} - a // {i + 1}\n" for i in range(n)
        )
        start = time.process_time()
        flags = similarity_flags({"a": big, "b": big, "c": big + "x = 1\n"}, "y = 2\n", "")
        took = time.process_time() - start
        return took, {(f.a, f.b) for f in flags}, all(f.a_lines for f in flags)

    half, pairs_half, _lines = cpu_seconds(10000)
    whole, pairs, lines = cpu_seconds(20000)
    assert whole < 10.0, whole  # CPU seconds: alone on a quiet machine, about 3.5
    assert whole < 3.0 * half + 0.5, (half, whole)  # near linear, measured in the same run
    assert pairs == pairs_half == {("a", "b"), ("a", "c"), ("b", "c")}
    assert lines


def test_cr_line_ends_do_not_hide_a_copy_of_the_reference() -> None:
    """The reference saved with CR line ends graded PASS with no flag; with LF it scored 1.000."""
    from tinytorch.classroom.similarity import REFERENCE, similarity_flags
    from tinytorch.release import make_student_source, reference_path

    ref = reference_path(17).read_text(encoding="utf-8")
    starter = make_student_source(ref)
    sources = {"cr": ref.replace("\n", "\r"), "crlf": ref.replace("\n", "\r\n"), "lf": ref}
    flags = similarity_flags(sources, ref, starter)
    assert {f.a for f in flags if f.b == REFERENCE} == {"cr", "crlf", "lf"}


def test_padding_around_a_copy_does_not_hide_it_from_similarity() -> None:
    """Red-teaming: the reference graded PASS 60/60 with no flag when 25,000 zeros came before it
    (the token cap was spent on them) or 30 unused helpers came after it (the shared share fell
    below 0.90); so did a classmate's file with the helpers."""
    from tinytorch.classroom.similarity import REFERENCE, similarity_flags
    from tinytorch.release import make_student_source, reference_path

    ref = reference_path(17).read_text(encoding="utf-8")
    starter = make_student_source(ref)
    head, tail = ref.split("from __future__ import annotations\n", 1)
    helpers = "".join(
        f"\n\ndef helper_{i}(x, y):\n    z = x * {i} + y\n    return [z, x - y, {i}]\n"
        for i in range(30)
    )
    sources = {
        "zeros": f"{head}from __future__ import annotations\n_PAD = [{'0, ' * 25_000}]\n{tail}",
        "ones": f"{head}from __future__ import annotations\n" + "x = 1\n" * 25_000 + tail,
        "helpers": ref + helpers,
        "alice": BASE.read_text(),
        "mallory": BASE.read_text() + helpers,
    }
    # 239 statements of different shapes, 50,000 tokens in all, spent the cap the same way
    varied = "".join("_p = " + " + ".join(["0"] * k) + "\n" for k in range(1, 240))
    sources["varied"] = f"{head}from __future__ import annotations\n{varied}{tail}"
    flags = similarity_flags(sources, ref, starter)
    assert {f.a for f in flags if f.b == REFERENCE} == {"zeros", "ones", "helpers", "varied"}
    (pair,) = [f for f in flags if f.b != REFERENCE and {f.a, f.b} == {"alice", "mallory"}]
    assert pair.contained and pair.score >= 0.9
    assert any(f.contained for f in flags if f.a == "helpers" and f.b == REFERENCE)


def test_a_large_file_of_other_code_does_not_get_an_honest_classmate_flagged() -> None:
    """Red-teaming: containment over 4-token shingles flagged honest bob (0.904) against a file of
    the reference, the base solution and 50,000 tokens of public code picked to hold bob's
    shingles. Containment counts runs of 8 tokens now: here every 4-token shingle of an honest
    stream is in the other file, and no 8-token run is."""
    from tinytorch.classroom.similarity import PAIR_THRESHOLD, Tokens, _ratio

    honest = [f"t{i}" for i in range(300)]
    covering = [t for i in range(len(honest) - 3) for t in (*honest[i : i + 4], "SEP")]
    bob, mallory = Tokens(honest, [1] * len(honest)), Tokens(covering, [1] * len(covering))
    assert set(bob.grams()) <= set(mallory.grams())
    assert _ratio(bob, mallory, PAIR_THRESHOLD, {}) is None
    copy = Tokens(covering + honest, [1] * (len(covering) + len(honest)))  # a real copy inside
    assert _ratio(bob, copy, PAIR_THRESHOLD, {}) == (1.0, True)


# ---- everything printed is safe ------------------------------------------------------------------

NASTY = "\x1b[2J\x1b[H\x1b[32mPASS 30/30\x1b[0m\x1b]52;c;ZXZpbA==\x07\x07\r\x9b31m\u202e"


def test_escape_sequences_never_reach_the_terminal_or_the_json(tmp_path: Path) -> None:
    """330 raw ESC and 55 BEL bytes of a student's exception messages reached the terminal: they
    cleared the screen, drew a fake green PASS and wrote the clipboard (OSC 52)."""
    from tinytorch.cli.milestone import run_milestone
    from tinytorch.safe_text import clean

    assert clean(NASTY + "ok\tend\n") == "PASS 30/30ok\tend\n"
    path = tmp_path / "acceleration.py"
    path.write_text(
        "".join(
            f"def {f}(*args, **kwargs):\n    raise ValueError({NASTY!r})\n\n\n"
            for f in ("tiled_matmul", "fused_gelu", "im2col", "im2col_conv2d", "col2im")
        )
    )
    out, json_path = io.StringIO(), tmp_path / "r.json"
    for fmt in ("json", "prairielearn"):
        code = run_milestone(str(path), part_b=False, out=out, json_path=str(json_path), fmt=fmt)
        assert code == 1
        text = out.getvalue() + json_path.read_text()
        assert "PASS 30/30" in text  # the message is shown, its escapes are not
        assert not any(c in text for c in "\x1b\x07\r\x9b\u202e")
        assert "\\u001b" not in text and "\\u0007" not in text


def test_gradebook_and_class_report_text_is_clean() -> None:
    from tinytorch.classroom.class_report import _esc
    from tinytorch.milestone07.scoring import Points
    from tinytorch.render.platforms import gradebook_row

    row = gradebook_row("mallory", {"verdict": "ERROR", "error": NASTY, "cases": []}, Points())
    assert "\x1b" not in row["error"] and "\x07" not in row["error"]
    assert "\x1b" not in _esc(NASTY) and "&lt;" in _esc("<b>")


# ---- the grader's own processes import nothing from the folder they start in ---------------------

SHADOW_NUMPY = """
import os, sys
try:
    with open({marker!r}, "a") as fh:
        fh.write(" ".join(sys.argv) + "\\n")
except OSError:
    pass
here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
del sys.modules["numpy"]
import numpy
sys.modules["numpy"] = numpy
"""


@pytest.mark.slow
def test_a_class_run_started_inside_the_class_folder_imports_no_students_file(
    tmp_path: Path,
) -> None:
    """Red-teaming: `tito grade-class .` from inside the class folder started each milestone run
    with `python -m`, which puts the working folder first on sys.path: a student's numpy.py ran
    as root in every student's grading, rewrote their results and forged its own PASS."""
    import csv
    import subprocess

    subs, marker = tmp_path / "subs", tmp_path / "imported-by"
    subs.mkdir()
    (subs / "alice.py").write_text(BASE.read_text())
    (subs / "numpy.py").write_text(SHADOW_NUMPY.format(marker=str(marker)))
    tito = Path(sys.executable).parent / "tito"
    proc = subprocess.run(
        [str(tito), "grade-class", ".", "--out", str(tmp_path / "out"), "--jobs", "1"],
        cwd=subs, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = marker.read_text() if marker.exists() else ""
    assert "--impl" not in seen  # no milestone run (the grader's process) imported it
    with open(tmp_path / "out" / "gradebook.csv", newline="") as fh:
        rows = {r["student"]: r["verdict"] for r in csv.DictReader(fh)}
    assert rows["alice"] == "PASS"


# ---- one odd file name or character never stops a class run or misleads a reader -----------------


def test_a_file_name_too_long_for_a_result_file_is_named_not_graded(tmp_path: Path) -> None:
    """Red-teaming: a 250-character `<id>.py` stopped the class run (its results/.<id>.json.tmp
    went past the 255-byte file name limit) with a traceback and no gradebook."""
    from tinytorch.classroom.submissions import MAX_ID, discover

    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / ("a" * 250 + ".py")).write_text(ZERO)
    (subs / ("b" * MAX_ID + ".py")).write_text(ZERO)
    (subs / "alice.side-by-side.py").write_text(ZERO)  # would overwrite alice's side-by-side log
    skipped: list[str] = []
    got = discover(subs, skipped=skipped)
    assert [s.student for s in got] == ["b" * MAX_ID]
    assert len(skipped) == 2 and all(f"at most {MAX_ID}" in why for why in skipped)
    assert any("alice.side-by-side.py" in why for why in skipped)


INVISIBLE = "\u2028\u2029\u061c\u200b\u200d\u2060\ufeff\u00ad\ud800\udfff"


def test_invisible_characters_and_lone_surrogates_never_reach_a_person() -> None:
    """Red-teaming: U+2028, U+061C, zero widths, BOM and soft hyphens passed the sanitiser; a lone
    surrogate in a notebook's source made class_report.html unwritable (exit 2, report empty)."""
    from tinytorch.classroom.class_report import _side
    from tinytorch.safe_text import clean

    assert clean(f"P{INVISIBLE}ASS é 中\t\n") == "PASS é 中\t\n"
    page = _side(f"x = '{INVISIBLE}'\n", {1})
    page.encode("utf-8")  # raises UnicodeEncodeError on a surrogate
    assert "x = &#x27;&#x27;" in page


def test_the_side_by_side_view_numbers_lines_as_similarity_does() -> None:
    """Red-teaming: line separators that str.splitlines honours (form feed, U+2028, \\x1c) but
    tokenize does not shifted every highlighted row of the class report."""
    from tinytorch.classroom.class_report import _side

    source = "a = 1  # notes" + "\u2028\x0c\x1c" * 10 + "\nb = 2\r\nc = 3\n"
    rows = _side(source, {2}).removeprefix("<pre>").removesuffix("</pre>").split("\n")
    assert len(rows) == 3
    assert rows[1] == "<mark>   2  b = 2</mark>" and rows[2] == "   3  c = 3"


def test_a_coding_line_does_not_hide_a_file_from_similarity() -> None:
    """Red-teaming: with `# -*- coding: utf-7 -*-` a whole file read as one comment to similarity,
    which decoded it as UTF-8, while Python ran it: a classmate's copy went unflagged."""
    from tinytorch.classroom.classgrade import _source
    from tinytorch.classroom.similarity import similarity_flags
    from tinytorch.classroom.submissions import Submission

    code = BASE.read_text()
    hidden = code.encode("utf-7").replace(b"\n", b"+AAo-")  # newlines a UTF-8 reader never sees
    blob = b"# -*- coding: utf-7 -*-\n#+AAo-" + hidden
    assert blob.count(b"\n") == 1
    text = _source(Submission("dave", Path("dave.py"), Path("dave.py")), blob)
    flags = similarity_flags({"alice": code, "dave": text}, reference="", starter="")
    assert [(f.a, f.b) for f in flags] == [("alice", "dave")]
    eve = Submission("eve", Path("eve.py"), Path("eve.py"))
    for coding in (b"punycode", b"rot13", b"no-such-codec"):  # punycode stopped a class run
        assert "x=1" in _source(eve, b"# coding: " + coding + b"\nx=1-zzzz\n")  # read as UTF-8
    assert isinstance(_source(eve, b"# coding: utf-16\nx=1\n"), str)  # decodes, to junk


# ---- red-teaming round 5: the class grader's own process ------------------------------------


def test_a_slow_codec_is_not_decoded_at_length_in_the_graders_process() -> None:
    """A 4 MB `# coding: punycode` file stalled a class run for over half an hour before anyone
    was graded (punycode decodes in time that grows with the square of the input)."""
    from tinytorch.classroom.classgrade import SLOW_CODEC_MAX, _source
    from tinytorch.classroom.submissions import Submission

    blob = b"# coding: punycode\n-" + b"a" * 400_000  # 9 s to decode; 4 MB: over 30 minutes
    assert len(blob) > SLOW_CODEC_MAX
    start = time.perf_counter()
    text = _source(Submission("mallory", Path("mallory.py"), Path("mallory.py")), blob)
    assert time.perf_counter() - start < 1.0 and text.startswith("# coding: punycode")


def test_a_lone_surrogate_in_a_students_code_does_not_stop_similarity() -> None:
    """`# coding: utf-7` and `+2AA-` decode to a lone surrogate outside any string: hashing the
    token stream raised UnicodeEncodeError, and the class run ended with no gradebook."""
    from tinytorch.classroom.classgrade import _source
    from tinytorch.classroom.similarity import similarity_flags
    from tinytorch.classroom.submissions import Submission

    body = "".join(f"v{i} = w{i} * {i}\n" for i in range(30))
    blob = ("# coding: utf-7\n" + body + "z = +2AA-\n").encode()
    text = _source(Submission("mallory", Path("mallory.py"), Path("mallory.py")), blob)
    assert "\ud800" in text  # as Python reads it
    flags = similarity_flags({"mallory": text, "trent": body}, reference="", starter="")
    assert [(f.a, f.b) for f in flags] == [("mallory", "trent")]


def test_a_failing_similarity_pass_still_writes_the_gradebook_and_report(
    tmp_path: Path, monkeypatch
) -> None:
    """Whatever similarity meets, the grades are written first and the report says it failed."""
    from tinytorch.classroom import classgrade, similarity
    from tinytorch.milestone07.scoring import Points

    def broken(*args: object, **kwargs: object) -> list:
        raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    monkeypatch.setattr(similarity, "similarity_flags", broken)
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "alice.py").write_text("def tiled_matmul(a, b, tile_size=64):\n    return 0\n")
    report = classgrade.grade_and_report(subs, tmp_path / "out", points=Points(), jobs=1)
    rows = (tmp_path / "out" / "gradebook.csv").read_text().splitlines()
    assert sum(row.startswith("alice,") for row in rows) == 1
    assert any("similarity failed" in n for n in report.notes) and report.report.exists()


def test_similarity_reads_a_marked_file_as_the_child_does(tmp_path: Path) -> None:
    """`#  | export` (two spaces) made the child read the file as a marked percent file, in
    UTF-8, while similarity looked for `#|` only and decoded by the coding line (cp037): the
    reference, verbatim, PASSED 60/60 unflagged."""
    from tinytorch.classroom.classgrade import _source
    from tinytorch.classroom.similarity import REFERENCE, similarity_flags
    from tinytorch.classroom.submissions import Submission
    from tinytorch.release import make_student_source, reference_path

    ref = reference_path(17).read_text()
    path = tmp_path / "mallory.py"
    path.write_text("#  | export\n# coding: cp037\n" + ref)
    text = _source(Submission("mallory", path, path), path.read_bytes())
    flags = similarity_flags({"mallory": text}, ref, make_student_source(ref))
    assert [(f.a, f.b) for f in flags] == [("mallory", REFERENCE)]


def test_a_folder_submissions_helpers_are_compared_too() -> None:
    """A near-copy of the reference in kernels.py, which acceleration.py only imports, was
    never compared: PASS 60/60, no flag."""
    from tinytorch.classroom.classgrade import _source
    from tinytorch.classroom.similarity import REFERENCE, similarity_flags
    from tinytorch.classroom.submissions import Submission
    from tinytorch.release import make_student_source, reference_path

    ref = reference_path(17).read_text()
    sub = Submission("mallory", Path("mallory"), Path("mallory/acceleration.py"))
    main = b"from kernels import *  # noqa: F403\n"
    text = _source(sub, main, {"kernels.py": ref.encode(), "notes.txt": b"x"})
    assert "# ---- kernels.py" in text and "notes.txt" not in text
    flags = similarity_flags({"mallory": text}, ref, make_student_source(ref))
    assert [(f.a, f.b) for f in flags] == [("mallory", REFERENCE)]


@pytest.mark.parametrize("where", ["deep", "wide", "git"])
def test_a_hard_link_hidden_past_a_submissions_bounds_is_still_found(
    tmp_path: Path, where: str
) -> None:
    """A link to alice.py 12 folders down, behind 4,100 files, or in .git got alice's own file
    refused ("a hard link"): the class-wide scan must see every name of it."""
    klass = tmp_path / "class"
    mallory = klass / "mallory"
    mallory.mkdir(parents=True)
    (klass / "alice.py").write_text("x = 1\n")
    if where == "deep":
        spot = mallory.joinpath(*["d"] * 12)
    elif where == "git":
        spot = mallory / ".git" / "objects"
    else:
        spot = mallory / "zz"
        for i in range(4100):
            (mallory / f"a{i:05d}.txt").write_text("")
    spot.mkdir(parents=True, exist_ok=True)
    os.link(klass / "alice.py", spot / "copy.py")
    inside, cut = stage.internal_links(klass)
    assert not cut and [min(one.names) for one in inside.values()] == ["alice.py"]


def test_a_link_past_the_class_scans_bounds_leaves_the_classmates_file_graded(
    tmp_path: Path, monkeypatch
) -> None:
    """Red-teaming round 6: a link below CLASS_MAX_DEPTH (or past CLASS_MAX_SCAN) got alice's own
    file refused again. A cut scan cannot prove a name outside the class: the file is read, and
    the class warnings say why. Many names of one file keep only SHOWN_NAMES of them (200,000
    names of 250 KB each filled the grader's memory)."""
    klass = tmp_path / "class"
    mallory = klass / "mallory"
    (mallory / "zz").mkdir(parents=True)
    (klass / "alice.py").write_text("x = 1\n")
    for i in range(50):
        os.link(klass / "alice.py", mallory / f"l{i:02d}.py")
    monkeypatch.setattr(stage, "CLASS_MAX_DEPTH", 1)
    deep = mallory / "zz" / "deeper"
    deep.mkdir()
    os.link(klass / "alice.py", deep / "hidden.py")
    inside, cut = stage.internal_links(klass)
    assert cut and len(inside) == 1
    (one,) = inside.values()
    assert one.seen == 51 and len(one.names) == stage.SHOWN_NAMES
    assert one.entries == {"alice.py", "mallory"}
    monkeypatch.setattr(stage, "CLASS_MAX_DEPTH", 1024)  # the whole class seen: all 52 names
    inside, cut = stage.internal_links(klass)
    assert not cut and [one.seen for one in inside.values()] == [52]
    outside = tmp_path / "elsewhere.py"
    os.link(klass / "alice.py", outside)  # a name outside the class, and the scan saw all: refused
    inside, cut = stage.internal_links(klass)
    assert not cut and inside == {}


def test_a_helper_that_does_not_tokenize_hides_no_other_file() -> None:
    """Red-teaming round 6: a helper holding only an unterminated string emptied the whole token
    stream (normalise gave up), so a verbatim reference copy beside it went unflagged."""
    from tinytorch.classroom.classgrade import _source
    from tinytorch.classroom.similarity import REFERENCE, similarity_flags
    from tinytorch.classroom.submissions import Submission
    from tinytorch.release import make_student_source, reference_path

    ref = reference_path(17).read_text()
    sub = Submission("cheat", Path("cheat"), Path("cheat/acceleration.py"))
    for main, helpers in (
        (ref.encode(), {"zz_notes.py": b'"""\n'}),
        (b"from kernels import *  # noqa: F403\n", {"a.py": b'"""\n', "kernels.py": ref.encode()}),
    ):
        text = _source(sub, main, helpers)
        flags = similarity_flags({"cheat": text}, ref, make_student_source(ref))
        assert [(f.a, f.b) for f in flags] == [("cheat", REFERENCE)]
