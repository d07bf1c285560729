"""Submissions in the course's formats: a .ipynb notebook, a jupytext percent .py with nbdev
`#| export` markers, and a plain .py. Only exported cells are graded; scratch cells never run."""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tinytorch.cli.main import main
from tinytorch.milestone07 import run_part_a
from tinytorch.sandbox.child.exports import (
    SubmissionError,
    exported_source,
    has_nbdev_markers,
)

COURSE = Path(__file__).parent / "course" / "course_module.py"
SCRATCH = [
    'raise RuntimeError("scratch cell: must never run")',
    "import time\ntime.sleep(600)  # ten minutes: the import would time out if this ran",
    "print(im2col_conv2d)  # uses the module, as a notebook's test cell would",
]


def course_cells(source: str) -> list[str]:
    """The course module split into exported cells: imports, then one cell per top-level def."""
    head, *defs = source.split("\n\n\n")
    return ["#| export\n" + head] + ["#| export\n" + d for d in defs]


def notebook(source: str, *, export: bool = True) -> nbformat.NotebookNode:
    cells = [
        new_markdown_cell("# Module 17: Acceleration"),
        new_code_cell("#| default_exp perf.acceleration"),
    ]
    for i, code in enumerate(course_cells(source)):
        cells.append(new_code_cell(code if export else code.replace("#| export\n", "")))
        if i < len(SCRATCH):
            cells.append(new_code_cell(SCRATCH[i]))
    return new_notebook(cells=cells)


def write(tmp_path: Path, kind: str, source: str, **kw: bool) -> Path:
    nb = notebook(source, **kw)
    if kind == "ipynb":
        path = tmp_path / "acceleration.ipynb"
        nbformat.write(nb, path)
    else:
        path = tmp_path / "acceleration.py"
        path.write_text(jupytext.writes(nb, fmt="py:percent"))
    return path


BUG = (
    "Xp[n, :, hs : hs + k, ws : ws + k] += G[row]",
    "Xp[n, :, hs : hs + k, ws : ws + k] = G[row]",
)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ipynb", "percent"])
def test_a_correct_notebook_passes_and_its_scratch_cells_never_run(kind, tmp_path) -> None:
    path = write(tmp_path, kind, COURSE.read_text())
    if kind == "percent":
        assert "# %%" in path.read_text() and has_nbdev_markers(path.read_text())
    result = run_part_a(str(path), timeout=10.0)
    bad = [(c.name, c.detail) for c in [*result.failing(), *result.failing_checks()]]
    # A scratch cell that ran would fail the import (RuntimeError) or hang it (sleep 600).
    assert result.verdict == "PASS", bad
    assert result.passed() == 30
    assert result.seconds < 120


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ipynb", "percent"])
def test_a_buggy_notebook_fails_and_is_blamed(kind, tmp_path) -> None:
    source = COURSE.read_text()
    assert source.count(BUG[0]) == 1
    path = write(tmp_path, kind, source.replace(*BUG))
    result = run_part_a(str(path), timeout=10.0)
    assert result.verdict == "NOT_PASSED"
    assert "col2im" in result.blamed()
    assert all(c.status == "pass" for c in result.cases if c.group != "col2im")


def test_exported_source_is_only_the_exported_cells(tmp_path) -> None:
    path = write(tmp_path, "ipynb", COURSE.read_text())
    source = exported_source(path)
    assert "scratch cell" not in source and "time.sleep" not in source
    assert "default_exp" not in source  # a directive-only cell is not exported
    assert source.count("#| export") == len(course_cells(COURSE.read_text()))
    compile(source, str(path), "exec")


def test_a_plain_py_without_markers_is_graded_as_it_is(tmp_path) -> None:
    text = COURSE.read_text()
    assert not has_nbdev_markers(text)
    path = tmp_path / "plain.py"
    path.write_text(text)
    assert exported_source(path) == text


@pytest.mark.parametrize("line", ["#| export", "#|export", "# | export", "#| exports"])
def test_nbdev_directive_spellings(line, tmp_path) -> None:
    path = tmp_path / "m.py"
    path.write_text(f"# %%\n{line}\nX = 1\n\n# %%\nY = 2\n")
    source = exported_source(path)
    assert "X = 1" in source and "Y = 2" not in source


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ipynb", "percent"])
def test_a_notebook_without_exported_cells_gets_a_clear_message(kind, tmp_path) -> None:
    path = write(tmp_path, kind, COURSE.read_text(), export=False)
    with pytest.raises(SubmissionError, match="no exported cell.*#\\| export"):
        exported_source(path)
    result = run_part_a(str(path))
    assert result.verdict == "NOT_PASSED"
    detail = result.cases[0].detail
    assert "has no exported cell" in detail and "Traceback" not in detail


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ipynb", "percent"])
def test_the_cli_grades_a_notebook(kind, tmp_path, capsys) -> None:
    path = write(tmp_path, kind, COURSE.read_text())
    code = main(["milestone", "run", "07", "--impl", str(path), "--no-part-b"])
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]
    assert "PASS" in out


BACKWARD_DEF = "    def backward(self, grad_output):\n"
RAISES = ("def fused_gelu(x):\n", 'def fused_gelu(x):\n    raise ValueError("boom")\n')


def _where(path: Path, needle: str) -> str:
    """`file:line` of the line holding `needle`, as the student sees it: a notebook names the
    cell (counting every cell from 1) and the line within it."""
    if path.suffix == ".ipynb":
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells, start=1):
            for number, line in enumerate(cell.source.splitlines(), start=1):
                if needle in line:
                    return f"{path.name}[cell {index}]:{number}"
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return f"{path.name}:{number}"
    raise AssertionError(f"{needle!r} is not in {path}")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ipynb", "percent"])
def test_error_locations_point_at_the_students_own_file(kind, tmp_path) -> None:
    source = COURSE.read_text()
    stub = "        raise NotImplementedError('later')\n"
    source = source.replace(*RAISES).replace(BACKWARD_DEF, BACKWARD_DEF + stub)
    source = source.replace("Im2colConv2dFunction", "Conv")  # a name the grader cannot guess
    source += "\nIm2colConv2dFunction = Conv  # graded under the course's name\n"
    path = write(tmp_path, kind, source)
    result = run_part_a(str(path), timeout=10.0, cases=["fused_gelu/zeros"])
    (case,) = result.cases
    assert case.detail == f"raised ValueError: boom (at {_where(path, 'boom')})"
    # the stub met at run time is named from the cell's code (else "Im2colConv2dFunction...")
    assert [m.split("(")[0] for m in result.missing] == ["Conv.backward"]

    broken = write(tmp_path, kind, COURSE.read_text().replace("row = 0\n", "row = = 0\n", 1))
    result = run_part_a(str(broken), cases=["fused_gelu/zeros"])
    detail = result.cases[0].detail
    assert "SyntaxError" in detail and detail.endswith(f"(at {_where(broken, 'row = = 0')})")
