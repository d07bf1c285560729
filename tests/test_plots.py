"""`tito milestone run 07 --plots DIR`: a PNG of where each group's first failing case is wrong."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tinytorch.cli.milestone import run_milestone

pytestmark = pytest.mark.slow

BASE = Path(__file__).parent / "mutants" / "student_base.py"


def test_plots_are_written_for_the_first_failure_of_each_broken_group(tmp_path):
    src = BASE.read_text()
    src = src.replace("C[i0:i1, j0:j1] += A", "C[i0:i1, j0:j1] = A")  # tiled_matmul assigns
    src = src.replace(
        "cols[:, :, :, :, di, dj] = win", "cols[:, :, :, :, dj, di] = win"
    )  # im2col swaps kernel row and col
    impl = tmp_path / "acceleration.py"
    impl.write_text(src)
    out = io.StringIO()
    code = run_milestone(str(impl), part_b=False, plots=str(tmp_path / "plots"), out=out)
    assert code == 1
    names = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert names == [
        "im2col_conv2d__pad1.png",
        "im2col_layout.png",
        "tiled_matmul__multiple__tile64.png",
    ]
    assert all((tmp_path / "plots" / n).stat().st_size > 5000 for n in names)
    assert f"drawings in {tmp_path / 'plots'}" in out.getvalue()


def test_a_passing_kernel_writes_no_plots(tmp_path):
    out = io.StringIO()
    assert run_milestone(str(BASE), part_b=False, plots=str(tmp_path / "p"), out=out) == 0
    assert list((tmp_path / "p").iterdir()) == []
    assert "none (nothing failed with a drawing)" in out.getvalue()


def test_a_link_planted_at_a_drawings_name_is_replaced_never_followed(tmp_path):
    """Red-teaming, namespaces off: a student's import made the --plots folder (the grader made it
    only after the run) and put a link named like a drawing in it; the root grader then wrote the
    PNG through the link, over a file of the student's choosing. The folder is now the grader's
    before any student code runs, and each drawing is published as --json is: a temporary file
    renamed over the name, so a link there is replaced, its target untouched."""
    victim = tmp_path / "victim.txt"
    victim.write_text("ORIGINAL")
    plots = tmp_path / "plots"
    plots.mkdir()
    plots.chmod(0o777)  # as a folder under /tmp that the student could write
    (plots / "fused_gelu__normal_1d.png").symlink_to(victim)
    impl = tmp_path / "acceleration.py"
    impl.write_text(BASE.read_text().replace("0.044715 * xs", "0.04 * xs"))
    out = io.StringIO()
    assert run_milestone(str(impl), part_b=False, plots=str(plots), out=out) == 1
    assert victim.read_text() == "ORIGINAL"
    drawing = plots / "fused_gelu__normal_1d.png"
    assert not drawing.is_symlink() and drawing.read_bytes().startswith(b"\x89PNG")


def test_a_plots_path_that_cannot_be_a_folder_is_a_usage_error_before_grading(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    out = io.StringIO()
    code = run_milestone(str(BASE), part_b=False, plots=str(tmp_path / "file" / "p"), out=out)
    assert code == 2 and out.getvalue() == ""  # nothing graded
    assert "tito milestone run: --plots: cannot use" in capsys.readouterr().err
