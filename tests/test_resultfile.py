"""Result files nobody else can write (issue 9 item 5): removed first, renamed into place last,
the exit code always the file's verdict, and a grader bug still a result (verdict ERROR)."""

from __future__ import annotations

import importlib
import inspect
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tinytorch.cli.main import main
from tinytorch.milestone07.boundary import open_sandbox as Sandbox
from tinytorch.render.json_doc import validate
from tinytorch.render.resultfile import ResultFile, ResultFileError, claim_all
from tinytorch.sandbox.child import protocol as wire

BASE = Path(__file__).parent / "mutants" / "student_base.py"
ROOT = Path(__file__).resolve().parents[1]
STALE_PASS = '{"verdict": "PASS", "forged": true}\n'
# K1's Sandbox (B1) kills the child's whole process tree and, as root, drops it to another uid.
K1_SANDBOX = "grading" in inspect.signature(Sandbox).parameters
NEEDS_K1 = "needs K1's contained Sandbox (issue 9, child side): this Sandbox leaves orphans alive"


def _run(*argv: str) -> int:
    return main(["milestone", "run", "07", "--no-part-b", *argv])


# ---- the mechanism ----------------------------------------------------------------------------
def test_claim_removes_an_old_file_and_publish_renames_a_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "r.json"
    path.parent.mkdir()
    path.write_text(STALE_PASS)
    target = ResultFile(path, what="--json").claim()
    assert not path.exists()
    target.publish_json({"verdict": "NOT_PASSED"})
    assert json.loads(path.read_text()) == {"verdict": "NOT_PASSED"}
    assert sorted(p.name for p in path.parent.iterdir()) == ["r.json"]  # no temp file left
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_publish_replaces_whatever_was_written_at_the_path_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    target = ResultFile(path).claim()
    path.write_text(STALE_PASS)  # what a student process could do during the run
    os.symlink(tmp_path / "elsewhere", tmp_path / "link.json")
    target.publish("genuine\n")
    assert path.read_text() == "genuine\n"
    link = ResultFile(tmp_path / "link.json").claim()  # a symlink is removed, never followed
    link.publish("x")
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / "link.json").is_symlink()


def test_a_folder_or_empty_path_is_refused_with_its_name(tmp_path: Path) -> None:
    with pytest.raises(ResultFileError, match="is a folder"):
        ResultFile(tmp_path, what="--report").claim()
    with pytest.raises(ResultFileError, match="empty"):
        ResultFile("", what="--json")
    assert set(claim_all({"--report": tmp_path / "a.json", "--executed": None})) == {"--report"}


def test_an_unwritable_json_folder_is_a_usage_error_before_anything_runs(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root: every folder is writable, so this cannot be provoked")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        assert _run("--impl", str(BASE), "--json", str(folder / "r.json")) == 2
    finally:
        folder.chmod(0o700)


# ---- the CLI: the file and the exit code agree ------------------------------------------------
@pytest.mark.slow
def test_a_stale_pass_is_replaced_by_the_runs_own_verdict(tmp_path: Path) -> None:
    bug = tmp_path / "bug.py"
    bug.write_text(BASE.read_text().replace("] += A[", "] = A[", 1))
    path = tmp_path / "r.json"
    path.write_text(STALE_PASS)
    assert _run("--impl", str(bug), "--json", str(path)) == 1
    doc = json.loads(path.read_text())
    validate(doc)
    assert doc["verdict"] == "NOT_PASSED" and "forged" not in doc


def test_a_child_writing_pass_into_the_json_path_is_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    cheat = tmp_path / "cheat.py"
    cheat.write_text(  # K1's child cannot write there at all: then the attempt is all it is
        f"try:\n    open({str(path)!r}, 'w').write({STALE_PASS!r})\nexcept OSError:\n    pass\n"
        "def tiled_matmul(a, b, tile_size=64):\n"
        "    raise NotImplementedError\n"
    )
    code = _run("--impl", str(cheat), "--json", str(path))
    doc = json.loads(path.read_text())
    assert doc["verdict"] == "INCOMPLETE" and code == 1 and "forged" not in doc


def test_a_grader_bug_inside_part_a_is_verdict_error_exit_3_with_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tinytorch.milestone07 import part_a

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("status")

    monkeypatch.setattr(part_a, "grade_case", broken)
    path = tmp_path / "r.json"
    path.write_text(STALE_PASS)
    assert _run("--impl", str(BASE), "--json", str(path)) == 3
    doc = json.loads(path.read_text())
    validate(doc)
    assert doc["verdict"] == "ERROR" and "internal grader error: KeyError" in doc["error"]
    assert {c["status"] for c in doc["cases"]} == {"error"}
    assert all(c["blame"] == [] for c in doc["cases"])  # the student is not blamed for our bug
    out = capsys.readouterr()
    assert "ERROR: the grader itself failed" in out.out and "Traceback" not in out.out + out.err


def test_a_grader_bug_outside_part_a_still_writes_an_error_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tinytorch.render.terminal as m07  # the terminal renderer, where the CLI takes it

    def broken(*args: object, **kwargs: object) -> str:
        raise RuntimeError("renderer broke")

    monkeypatch.setattr(m07, "render_part_a", broken)
    path = tmp_path / "r.json"
    assert _run("--impl", str(BASE), "--json", str(path)) == 3
    doc = json.loads(path.read_text())
    validate(doc)
    assert doc["verdict"] == "ERROR" and "renderer broke" in doc["error"]
    assert "renderer broke" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize(
    "forged",
    [{"garbage": 1}, {"status": []}, {"status": "ok"}, {"status": "timeout", "error": "x"}],
    ids=["no_status", "list_status", "ok_without_output", "parents_status"],
)
def test_a_malformed_reply_ends_in_a_result_file(
    forged: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = wire.read_frame

    def malformed(read_exact, limits, validate=None):  # every call reply replaced by `forged`
        msg_id, reply = real(read_exact, limits, validate)
        if msg_id == 0:  # the load info
            return msg_id, reply
        frame = io.BytesIO(wire.encode(msg_id, forged))
        return real(frame.read, limits, validate)

    monkeypatch.setattr(wire, "read_frame", malformed)
    path = tmp_path / "r.json"
    code = _run("--impl", str(BASE), "--json", str(path), "--timeout", "2")
    doc = json.loads(path.read_text())
    assert (code, doc["verdict"]) == (1, "NOT_PASSED")  # a named failure, never a grader ERROR
    assert {c["status"] for c in doc["cases"]} == {"protocol"}
    assert all("malformed reply" in c["detail"] or "not run" in c["detail"] for c in doc["cases"])


def test_tito_grade_internal_error_is_exit_6_with_a_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nbformat

    grade = importlib.import_module("tinytorch.grading.grade")  # the package exports grade()

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("nbclient broke")

    monkeypatch.setattr(grade, "execute", broken)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("GRADING = False", metadata={"tags": ["parameters"]})]
    path, report = tmp_path / "n.ipynb", tmp_path / "out" / "report.json"
    nbformat.write(nb, path)
    report.parent.mkdir()
    report.write_text(STALE_PASS)
    assert main(["grade", str(path), "--report", str(report)]) == 6
    doc = json.loads(report.read_text())
    assert doc["verdict"] == "ERROR" and doc["exit_code"] == 6 and doc["grading"] is True
    assert doc["error"]["evalue"] == "nbclient broke"


# ---- processes the student leaves behind (K1's containment does the killing) ----------------
def _tito_subprocess(*argv: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "tinytorch.cli.main", "milestone", "run", "07", "--no-part-b"]
    run = [*cmd, *argv]
    return subprocess.run(run, check=False, capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.mark.slow
@pytest.mark.skipif(not K1_SANDBOX, reason=NEEDS_K1)
def test_a_leftover_process_cannot_rewrite_the_file_after_exit(tmp_path: Path) -> None:
    path, pidfile = tmp_path / "r.json", tmp_path / "orphan.pid"
    cheat = tmp_path / "orphan.py"
    cheat.write_text(  # waits for the grader's own file, then rewrites it after tito is gone
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.closerange(3, 65536)\n"  # a daemon's manners: the grader's pipes let go
        f"        open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
        "        for _ in range(600):\n"
        "            time.sleep(0.1)\n"
        f"            if os.path.exists({str(path)!r}):\n"
        "                time.sleep(1.5)\n"
        f"                open({str(path)!r}, 'w').write({STALE_PASS!r})\n"
        "                break\n"
        "    os._exit(0)\n"
        "def tiled_matmul(a, b, tile_size=64):\n"
        "    raise NotImplementedError\n"
    )
    try:
        done = _tito_subprocess("--impl", str(cheat), "--json", str(path))
        time.sleep(4)  # past the orphan's wait: had it survived, it has rewritten the file by now
        doc = json.loads(path.read_text())
        assert doc["verdict"] == "INCOMPLETE" and done.returncode == 1
    finally:
        if pidfile.exists():
            pid = int(pidfile.read_text() or 0)
            try:
                os.kill(pid, signal.SIGKILL)  # only our own orphan, by its id
                alive = True
            except (ProcessLookupError, PermissionError):
                alive = False
            assert not alive, "the student's orphan outlived the grader"


@pytest.mark.skipif(
    not (K1_SANDBOX and os.geteuid() == 0),
    reason="needs root and K1's Sandbox: only a uid switch stops a child signalling its parent",
)
def test_a_child_that_kills_the_grader_leaves_no_forged_pass(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    cheat = tmp_path / "killer.py"
    cheat.write_text(
        "import os, signal\n"
        f"try:\n    open({str(path)!r}, 'w').write({STALE_PASS!r})\nexcept OSError:\n    pass\n"
        "try:\n    os.kill(os.getppid(), signal.SIGKILL)\nexcept OSError:\n    pass\n"
        "def tiled_matmul(a, b, tile_size=64):\n"
        "    raise NotImplementedError\n"
    )
    done = _tito_subprocess("--impl", str(cheat), "--json", str(path))
    doc = json.loads(path.read_text()) if path.exists() else None
    assert doc is not None and "forged" not in doc
    assert doc["verdict"] == "INCOMPLETE" and done.returncode == 1
