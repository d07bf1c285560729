"""Each submission is read once, into the staged copy: grading, similarity, the report and the
gradebook read those bytes and never open the student's path again. No link is followed, and no
student floods the grader's own output."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import nbformat
import pytest

from tinytorch.classroom.classgrade import grade_and_report, grade_class
from tinytorch.classroom.submissions import discover
from tinytorch.milestone07.scoring import Points

COURSE = Path(__file__).parent / "course" / "course_module.py"  # an honest Module 17


def _notebook(source: str, extra_cells: int = 0) -> dict:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("#| export\n" + source)]
    nb.cells += [nbformat.v4.new_markdown_cell("notes") for _ in range(extra_cells)]
    return json.loads(nbformat.writes(nb))


@pytest.mark.slow
def test_a_fifo_renamed_over_the_file_after_the_read_stops_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the class grader blocked in a second open of the original path (no result, no
    gradebook, killed at 240 s). Similarity reads what was graded, not the swapped bytes."""
    from tinytorch.sandbox import stage

    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "eve.ipynb").write_text(json.dumps(_notebook(COURSE.read_text())))
    read_file = stage.read_file

    def read_then_swap(path, *args, **kwargs):  # the student's move, right after the one read
        blob = read_file(path, *args, **kwargs)
        if Path(path).name == "eve.ipynb":
            os.mkfifo(tmp_path / "fifo")
            os.replace(tmp_path / "fifo", path)
        return blob

    monkeypatch.setattr(stage, "read_file", read_then_swap)
    done: dict = {}
    worker = threading.Thread(
        target=lambda: done.update(
            r=grade_and_report(subs, tmp_path / "out", points=Points(), jobs=1)
        ),
        daemon=True,
    )
    worker.start()
    worker.join(240)
    assert "r" in done, "the class run blocked on the swapped-in FIFO"
    doc = done["r"].run.docs["eve"]
    assert doc["verdict"] == "PASS" and doc["graded_file"] == "eve.ipynb", doc.get("error")
    assert (tmp_path / "out" / "gradebook.csv").exists()


def test_a_flood_of_notebook_warnings_is_counted_not_repeated(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    nb = _notebook(COURSE.read_text(), extra_cells=300)
    for cell in nb["cells"]:
        cell["id"] = "dup"
    (subs / "eve.ipynb").write_text(json.dumps(nb))
    run = grade_class(subs, tmp_path / "out", jobs=1, wall_timeout=1.0)  # grading is not the point
    err = capfd.readouterr().err
    assert err.count("Non-unique cell id") == 0, err[:500]
    (note,) = [w for w in run.warnings if w.startswith("eve: ")]
    assert "300 warnings reading the submission" in note


def test_a_class_entry_that_links_to_a_folder_is_named_not_graded(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir()
    (real / "acceleration.py").write_text(COURSE.read_text())
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "mallory").symlink_to(real)
    (sub,) = discover(subs)
    assert sub.impl is None and "symbolic link to a folder" in sub.problem


def test_milestone_run_refuses_a_folder_link_as_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: refused, but reported as a grader ERROR (exit 3, 'report it')."""
    from tinytorch.cli.main import main

    real = tmp_path / "real"
    real.mkdir()
    (real / "acceleration.py").write_text(COURSE.read_text())
    (tmp_path / "link").symlink_to(real)
    assert main(["milestone", "run", "07", "--impl", str(tmp_path / "link"), "--no-part-b"]) == 2
    assert "symbolic link to a folder" in capsys.readouterr().err


def test_milestone_run_on_a_folder_grades_the_bytes_it_chose_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Red-teaming: `--impl DIR` chose on one read and staged on another; swapping the folder in
    between graded a classmate's code (PASS). Now the folder is read once into a copy of ours."""
    from tinytorch.classroom import submissions
    from tinytorch.cli.main import main

    folder = tmp_path / "mallory"
    folder.mkdir()
    (folder / "acceleration.py").write_text(COURSE.read_text())
    real = submissions.snapshot

    reads: list[Path] = []

    def read_then_swap(path, *args, **kwargs):  # the student's move, right after the read
        got = real(path, *args, **kwargs)  # the usage check reads first, then the graded copy
        reads.append(path)
        if len(reads) < 2:
            return got
        (folder / "acceleration.py").write_text(
            "def tiled_matmul(a, b, tile_size=64):\n    raise NotImplementedError\n"
        )
        return got

    monkeypatch.setattr(submissions, "snapshot", read_then_swap)
    code = main(["milestone", "run", "07", "--impl", str(folder), "--no-part-b"])
    out = capsys.readouterr().out
    assert code == 0, out  # graded on the bytes read: the honest module, PASS
    assert str(folder / "acceleration.py") in out  # reported under the student's own path
