"""`tito grade` on small fixture notebooks: exit codes, injection, partial results on failure.

The milestone notebook itself is graded in test_notebook_execute.py; these fixtures isolate the
grader's own behaviour (a raise, a timeout, a dead kernel) and run in a few seconds each.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from tinytorch.cli.grade import parse_param
from tinytorch.cli.main import main
from tinytorch.grading import collect, inject_parameters
from tinytorch.grading.grade import UsageError, resolve_impl
from tinytorch.render.notebook_record import CASES_MIME, VERDICT_MIME

pytestmark = pytest.mark.timeout(120)

PARAMS = 'IMPL = "tinytorch.perf.acceleration"\nVERDICT = "PASS"\n'
RECORD_CASES = """
from tinytorch.render.notebook_record import show
show({"@CASES@": {"stage": "early", "cases": [
    {"name": "tiled_matmul/a", "status": "pass", "max_error": 0.0},
    {"name": "tiled_matmul/b", "status": "fail", "max_error": 0.5}]}, "text/plain": "cases"})
""".replace("@CASES@", CASES_MIME)
WIDGET = """
import ipywidgets as w
out = w.Output()
with out:
    print("inside the widget")
display(w.VBox([w.IntSlider(3), out]))
"""
RECORD_VERDICT = """
from tinytorch.render.notebook_record import show
show({"@VERDICT@": {"verdict": VERDICT, "impl": IMPL, "cases": [
    {"name": "tiled_matmul/a", "status": "pass", "max_error": 0.0},
    {"name": "tiled_matmul/b", "status": "pass", "max_error": 1e-7}], "checks": []},
    "text/plain": VERDICT})
""".replace("@VERDICT@", VERDICT_MIME)


def _notebook(tmp_path: Path, *middle: str) -> Path:
    """parameters, recorded cases, a widget, `middle` cells, then the verdict."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_markdown_cell("# fixture"),
        nbformat.v4.new_code_cell(PARAMS, metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(RECORD_CASES),
        nbformat.v4.new_code_cell(WIDGET),
        *[nbformat.v4.new_code_cell(src) for src in middle],
        nbformat.v4.new_code_cell(RECORD_VERDICT, metadata={"tags": ["summary"]}),
    ]
    path = tmp_path / "fixture.ipynb"
    nbformat.write(nb, path)
    return path


def _grade(tmp_path: Path, nb: Path, *extra: str) -> tuple[int, dict, object]:
    report, executed = tmp_path / "report.json", tmp_path / "out.ipynb"
    code = main(["grade", str(nb), "--report", str(report), "--executed", str(executed), *extra])
    return code, json.loads(report.read_text()), nbformat.read(executed, as_version=4)


def _widget_state(nb) -> dict:
    return nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]


def _output_widget_text(nb) -> str:
    return json.dumps([m["state"].get("outputs") for m in _widget_state(nb).values()])


@pytest.mark.slow
def test_a_passing_notebook_exits_0_with_cases_cells_and_environment(tmp_path):
    code, report, executed = _grade(tmp_path, _notebook(tmp_path))
    assert code == 0
    assert report["verdict"] == "PASS" and report["status"] == "completed"
    assert report["passed"] == report["total"] == 2  # the summary's cases replace the early ones
    assert [c["status"] for c in report["cells"]] == ["markdown"] + ["ok"] * 4
    assert all(c["seconds"] >= 0 for c in report["cells"])
    assert report["environment"]["numpy"] and report["schema_version"] == 2
    assert "inside the widget" in _output_widget_text(executed)


@pytest.mark.slow
def test_a_not_passed_verdict_exits_1(tmp_path):
    code, report, _ = _grade(tmp_path, _notebook(tmp_path), "-p", "VERDICT='NOT_PASSED'")
    assert code == 1 and report["verdict"] == "NOT_PASSED"
    assert report["params"] == {"VERDICT": "NOT_PASSED"}


@pytest.mark.slow
def test_impl_is_injected_after_the_parameters_cell(tmp_path):
    student = tmp_path / "student.py"
    student.write_text("")
    code, _, executed = _grade(tmp_path, _notebook(tmp_path), "--impl", str(student))
    assert code == 0
    injected = executed.cells[2]
    assert injected.metadata["tags"] == ["injected-parameters"]
    assert f"IMPL = {str(student.resolve())!r}" in injected.source
    verdict = [o for o in executed.cells[-1].outputs if VERDICT_MIME in o.get("data", {})]
    assert verdict[0]["data"][VERDICT_MIME]["impl"] == str(student.resolve())


@pytest.mark.slow
def test_a_raising_cell_exits_3_and_names_it(tmp_path):
    nb = _notebook(tmp_path, "raise ZeroDivisionError('student bug')")
    code, report, _ = _grade(tmp_path, nb)
    assert code == 3 and report["status"] == "cell_error"
    assert report["error"]["cell"] == 4 and report["error"]["ename"] == "ZeroDivisionError"
    assert report["verdict"] is None and report["cells"][-1]["status"] == "not_run"
    assert {c["name"] for c in report["cases"]} == {"tiled_matmul/a", "tiled_matmul/b"}


@pytest.mark.slow
def test_a_timeout_exits_4_keeping_partial_results_and_widget_state(tmp_path):
    nb = _notebook(tmp_path, "import time\ntime.sleep(60)")
    code, report, executed = _grade(tmp_path, nb, "--timeout", "4")
    assert code == 4 and report["status"] == "timeout" and report["cells"][4]["status"] == "timeout"
    assert [c["status"] for c in report["cases"]] == ["pass", "fail"]
    assert report["widget_models"] >= 3
    assert "inside the widget" in _output_widget_text(executed)
    assert any(CASES_MIME in o.get("data", {}) for o in executed.cells[2].outputs)


@pytest.mark.slow
def test_a_dead_kernel_exits_5_keeping_partial_results_and_widget_state(tmp_path):
    nb = _notebook(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    code, report, executed = _grade(tmp_path, nb, "--timeout", "30")
    assert code == 5 and report["status"] == "dead_kernel"
    assert report["error"]["cell"] == 4
    assert len(report["cases"]) == 2
    assert "inside the widget" in _output_widget_text(executed)


@pytest.mark.parametrize(
    "argv",
    [
        ["grade", "no/such/notebook.ipynb"],
        ["grade", "--impl", "no/such/student.py"],
        ["grade", "--impl", "not a module"],
        ["grade", "--timeout", "0"],
        ["grade", "-p", "no_equals_sign"],
        ["grade", "--no-such-option"],
    ],
)
def test_usage_errors_exit_2(argv, tmp_path, capsys):
    assert main(argv) == 2
    assert "tito grade" in capsys.readouterr().err or argv[-1] == "--no-such-option"


def test_a_notebook_without_parameters_cell_cannot_take_impl(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    path = tmp_path / "bare.ipynb"
    nbformat.write(nb, path)
    assert main(["grade", str(path), "--impl", "tinytorch.perf.acceleration"]) == 2


def test_inject_parameters_replaces_an_earlier_injection():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("IMPL = 'x'", metadata={"tags": ["parameters"]})]
    inject_parameters(nb, {"IMPL": "a"})
    inject_parameters(nb, {"IMPL": "b", "SEED": 3})
    assert [c.metadata.get("tags") for c in nb.cells] == [["parameters"], ["injected-parameters"]]
    assert "IMPL = 'b'\nSEED = 3\n" in nb.cells[1].source
    with pytest.raises(ValueError, match="parameters"):
        inject_parameters(nbformat.v4.new_notebook(), {"IMPL": "a"})


def test_resolve_impl_and_parse_param(tmp_path):
    (tmp_path / "mine.py").write_text("")
    assert resolve_impl("mine.py", tmp_path) == str((tmp_path / "mine.py").resolve())
    assert resolve_impl("pkg.module", tmp_path) == "pkg.module"
    (tmp_path / "mine.ipynb").write_text("{}")  # a notebook is a path, whatever its contents
    assert resolve_impl("mine.ipynb", tmp_path) == str((tmp_path / "mine.ipynb").resolve())
    with pytest.raises(UsageError, match="--impl"):
        resolve_impl("missing.py", tmp_path)
    with pytest.raises(UsageError, match="no such file 'missing.ipynb'"):
        resolve_impl("missing.ipynb", tmp_path)
    assert parse_param("SEED=3") == ("SEED", 3)
    assert parse_param("PART_B=quick") == ("PART_B", "quick")


def test_collect_prefers_later_records_and_the_verdict():
    nb = nbformat.v4.new_notebook()
    early = {CASES_MIME: {"stage": "g", "cases": [{"name": "a", "status": "fail"}]}}
    late = {VERDICT_MIME: {"verdict": "PASS", "cases": [{"name": "a", "status": "pass"}]}}
    nb.cells = [
        nbformat.v4.new_code_cell("", outputs=[nbformat.v4.new_output("display_data", data=early)]),
        nbformat.v4.new_code_cell("", outputs=[nbformat.v4.new_output("display_data", data=late)]),
    ]
    found = collect(nb)
    assert found["verdict"]["verdict"] == "PASS"
    assert [(c["name"], c["status"]) for c in found["cases"]] == [("a", "pass")]
