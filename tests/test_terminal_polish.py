"""The terminal as a student meets it: usage errors for what cannot be Module 17, notebook advice
for a notebook, no Part B for unfinished work, the nearest flag for a typo, quiet ends in a pipe,
and no internal references in what a person reads."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tinytorch.bench import part_b
from tinytorch.cli.main import main
from tinytorch.cli.milestone import main_run

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "tests" / "mutants" / "student_base.py"
STUB = "def tiled_matmul(a, b, tile_size=64):\n    raise NotImplementedError\n"


def _tito(*args: str) -> int:
    return main(["milestone", *args])


@pytest.mark.parametrize("name", ["acceleration.txt", "README"])
def test_a_file_that_is_not_a_module_nor_a_notebook_is_a_usage_error(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / name).write_text(BASE.read_text())
    monkeypatch.chdir(tmp_path)
    for impl in (name, f"./{name}", str(tmp_path / name)):
        assert _tito("run", "07", "--impl", impl) == 2, impl
        captured = capsys.readouterr()
        assert captured.out == "", impl  # no INCOMPLETE report, no Part B, no sandbox path
        (line,) = captured.err.splitlines()
        assert "is not a Module 17 file" in line and ".ipynb" in line and "tt-sandbox" not in line


def _notebook(path: Path, *cells: tuple[str, str]) -> Path:
    nb = nbformat.v4.new_notebook()
    make = {"md": nbformat.v4.new_markdown_cell, "code": nbformat.v4.new_code_cell}
    nb.cells = [make[kind](source) for kind, source in cells]
    nbformat.write(nb, path)
    return path


def test_a_notebook_that_does_not_import_gets_notebook_advice_and_its_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nb = _notebook(
        tmp_path / "acceleration.ipynb",
        ("md", "# Module 17"),
        ("code", "#| export\nimport numpy as np\n\nscale = 1 / 0\n"),
    )
    assert _tito("run", "07", "--impl", str(nb)) == 1
    out = capsys.readouterr().out
    assert "acceleration.ipynb[cell 2]:4" in out  # the student's cell and line
    assert "python your_file.py" not in out and "python " not in out  # .py advice
    assert "restart the kernel" in out and "#| export" in out
    assert "Part B" not in out


def test_a_py_file_that_does_not_import_is_told_to_run_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "my_kernels.py"
    broken.write_text("import numpy as np\nscale = 1 / 0\n")
    assert _tito("run", "07", "--impl", str(broken), "--no-part-b") == 1
    out = capsys.readouterr().out
    assert "run `python my_kernels.py`" in out and "my_kernels.py:2" in out


class _PartBCalled(Exception):
    pass


def _refuse_part_b(*args: object, **kwargs: object) -> None:
    raise _PartBCalled("Part B ran")


def test_incomplete_skips_part_b_unless_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(part_b, "run_part_b", _refuse_part_b)
    stub = tmp_path / "acceleration.py"
    stub.write_text(STUB)
    assert _tito("run", "07", "--impl", str(stub)) == 1
    out = capsys.readouterr().out
    assert "INCOMPLETE" in out and "Part B ran" not in out
    assert "Part B (timings) skipped" in out and "--part-b" in out
    assert _tito("run", "07", "--impl", str(stub), "--part-b") == 1  # asked for: it runs
    assert "Part B failed inside the grader: _PartBCalled: Part B ran" in capsys.readouterr().out
    assert _tito("run", "07", "--impl", str(stub), "--part-b", "--no-part-b") == 2


@pytest.mark.parametrize(
    ("argv", "usage", "nearest"),
    [
        (["milestone", "run", "07", "--no-partb"], "tito milestone run", "--no-part-b"),
        (["milestone", "run", "07", "--verbsoe"], "tito milestone run", "--verbose"),
        (["milestone", "run", "07", "--seeds=3"], "tito milestone run", "--seed"),
    ],
)
def test_a_mistyped_flag_names_the_nearest_one(
    argv: list[str], usage: str, nearest: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"usage: {usage}" in err  # the subcommand's own usage, not the top level's
    assert f"(did you mean {nearest}?)" in err


def test_the_script_entry_point_suggests_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main_run(["--part-b-onyl"]) == 2
    assert "(did you mean --part-b-only?)" in capsys.readouterr().err


def test_an_unknown_flag_far_from_every_flag_gets_no_guess(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["milestone", "run", "07", "--zzzzzz"]) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --zzzzzz" in err and "did you mean" not in err


TITO = [sys.executable, "-m", "tinytorch.cli.main"]
SCRIPT = [sys.executable, str(ROOT / "milestones" / "07_2024_kernels" / "01_custom_kernels.py")]


@pytest.mark.parametrize(
    ("argv", "unbuffered", "status"),
    [
        ([*TITO, "milestone", "run", "07", "--impl", str(BASE), "--no-part-b"], False, 0),
        (
            [*TITO, "milestone", "run", "07", "--impl", str(BASE), "--part-b-sizes", "quick"],
            True,
            0,
        ),
        ([*TITO, "milestone", "list"], False, 0),  # buffered: it meets the pipe at the last flush
        ([*TITO, "milestone", "list"], True, 141),  # its print meets it: as `cat` would end
        ([*SCRIPT, "--impl", str(BASE), "--no-part-b"], False, 0),
    ],
    ids=["run", "run_with_part_b", "list", "list_unbuffered", "script"],
)
def test_output_into_a_closed_pipe_ends_quietly(
    argv: list[str], unbuffered: bool, status: int
) -> None:
    """`tito milestone run 07 | head`: the reader is gone before the report is written. No
    traceback, the exit status still the command's own (the verdict's), and no Part B for
    nobody (the run with Part B takes as long as the one without)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env.update({"PYTHONUNBUFFERED": "1"} if unbuffered else {})
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    proc.stdout.close()  # the reader leaves before anything is written
    _, err = proc.communicate(timeout=120)
    assert err.decode() == ""
    assert proc.returncode == status


USER_FACING_ROOTS = ("tinytorch", "extensions", "milestones", "notebooks")
ISSUE = re.compile(r"\bissues? #?\d+", re.IGNORECASE)


def _strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each string literal but docstrings: what the code can say to a person."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def test_no_user_facing_text_mentions_an_issue() -> None:
    """The package, the native extensions, the course script and the notebook (test_bench_cli
    holds the package alone to the same rule)."""
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text[:80]!r}"
        for root in USER_FACING_ROOTS
        for path in sorted((ROOT / root).rglob("*.py"))
        for line, text in _strings(path)
        if ISSUE.search(text)
    ]
    assert found == []


def test_the_issue_scan_finds_an_issue_in_a_string(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('"""Issue 3 is fine in a docstring."""\nprint("fixed in issue 12")\n')
    assert [text for _, text in _strings(sample) if ISSUE.search(text)] == ["fixed in issue 12"]
