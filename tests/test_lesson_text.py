"""Bug runs say each thing once: every lesson is about its own bug, in words it does not repeat."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tinytorch.cli.main import main
from tinytorch.milestone07.diagnose import IM2COL_BUGS, unloadable_lesson

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "tests" / "mutants" / "student_base.py"


def _repeated(text: str, n: int = 5) -> list[str]:
    """The runs of n words (punctuation aside) that a text says more than once."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    runs = [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
    return sorted({r for r in runs if runs.count(r) > 1})


def test_the_repeat_finder_finds_the_old_column_order_lesson() -> None:
    old = (
        "Order the columns (channel, kernel row, kernel col): im2col columns are ordered (channel, "
        "kernel row, kernel col) to match weight.reshape(F, -1); add the bias to every position."
    )
    assert _repeated(old) == ["channel kernel row kernel col"]


@pytest.mark.parametrize("bug", IM2COL_BUGS, ids=lambda b: b.says[:30])
def test_each_im2col_lesson_is_about_its_bug_and_says_it_once(bug) -> None:
    assert _repeated(bug.lesson) == [], bug.lesson
    assert "bias" not in bug.lesson.lower()  # im2col has no bias: the convolution adds it
    others = {b.cause for b in IM2COL_BUGS} - {bug.cause}
    assert not any(cause in bug.lesson.lower() for cause in others - {"padding"}), bug.lesson


def test_a_column_order_run_says_its_lesson_once_and_no_bias(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = BASE.read_text()
    for old, new in (
        ("np.empty((N, oh, ow, C, k, k)", "np.empty((N, oh, ow, k, k, C)"),
        ("cols[:, :, :, :, di, dj] = win", "cols[:, :, :, di, dj, :] = win"),
    ):
        assert old in src
        src = src.replace(old, new)
    bug = tmp_path / "acceleration.py"
    bug.write_text(src)
    assert main(["milestone", "run", "07", "--impl", str(bug), "--no-part-b"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert out.count("Order the columns (channel, kernel row, kernel col)") == 1, out
    assert "bias" not in out, out


@pytest.mark.parametrize(
    ("impl", "says", "never"),
    [
        ("/home/s/acceleration.ipynb", "restart the kernel", "python "),
        ("/home/s/kernels.py", "run `python kernels.py`", "your_file"),
        ("mypkg.acceleration", "`import mypkg.acceleration`", "your_file"),
    ],
)
def test_the_import_lesson_speaks_of_the_kind_of_file_graded(
    impl: str, says: str, never: str
) -> None:
    lesson = unloadable_lesson(impl)
    assert says in lesson and never not in lesson
