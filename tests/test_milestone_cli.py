"""`tito milestone` and the script entry point: exit codes, aliases, --json, and Part B's honesty."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from tinytorch.bench import tasks as bench_tasks
from tinytorch.cli.main import main
from tinytorch.render.json_doc import SCHEMA_VERSION, validate

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "tests" / "mutants" / "student_base.py"


def _tito(*args: str) -> int:
    return main(["milestone", *args])


def test_run_07_passes_with_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert _tito("run", "07", "--impl", str(BASE), "--no-part-b") == 0
    out = capsys.readouterr().out
    assert out.startswith("PASS  30/30 cases, 6/6 deeper checks")  # the verdict first
    assert len(out.splitlines()) <= 12  # one line per passing group and for the deeper checks
    assert _tito("run", "07", "--impl", str(BASE), "--no-part-b", "--verbose") == 0
    out = capsys.readouterr().out
    assert out.count("  PASS    ") == 36  # --verbose: one row per case and per check


@pytest.mark.parametrize("alias", ["kernels", "triton", "metal", "7"])
def test_aliases_run_the_same_milestone(alias: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _tito("run", alias, "--impl", str(BASE), "--no-part-b") == 0
    assert "Milestone 07: Custom Kernels" in capsys.readouterr().out


def test_not_passed_exits_1_and_names_the_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bug = tmp_path / "bug.py"
    bug.write_text(BASE.read_text().replace("] += A[", "] = A[", 1))
    assert _tito("run", "07", "--impl", str(bug), "--no-part-b") == 1
    out = capsys.readouterr().out
    assert "tiled_matmul   FAIL  " in out and "multiple, ragged_all_axes" in out
    assert "NOT PASSED" in out and "+=" in out


def test_incomplete_exits_1(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    stub = tmp_path / "stub.py"
    stub.write_text("def tiled_matmul(a, b, tile_size=64):\n    raise NotImplementedError\n")
    assert _tito("run", "07", "--impl", str(stub), "--no-part-b") == 1
    assert "INCOMPLETE" in capsys.readouterr().out


def test_a_file_that_does_not_import_is_one_root_cause_and_no_part_b(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "acceleration.py"
    broken.write_text("import numpy as np\ndef tiled_matmul(a, b tile_size=64):\n    pass\n")
    assert _tito("run", "07", "--impl", str(broken)) == 1  # Part B asked for, and not run
    out = capsys.readouterr().out
    assert out.startswith("NOT PASSED") and len(out.splitlines()) <= 12, out
    assert out.count("SyntaxError") == 1 and "line 2" in out  # the error, its file and line, once
    assert "Part B" not in out


@pytest.mark.parametrize("holds", [(), ("notes.py",), ("a.py", "b.py")])
def test_a_folder_the_file_rule_names_nothing_in_is_a_usage_error(
    holds: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No acceleration.py or .ipynb, and not exactly one file defining the graded functions."""
    for name in holds:
        (tmp_path / name).write_text("def tiled_matmul(a, b): ...\n" if len(holds) > 1 else "")
    assert _tito("run", "07", "--impl", str(tmp_path), "--no-part-b") == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1
    assert "acceleration.py" in captured.err
    assert all(name in captured.err for name in holds)  # the candidates are listed


def test_a_folder_with_one_module_17_file_grades_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "acceleration.py").write_text(BASE.read_text())
    assert _tito("run", "07", "--impl", str(tmp_path), "--no-part-b") == 0
    assert str(tmp_path / "acceleration.py") in capsys.readouterr().out


def test_part_b_only_and_no_part_b_together_are_a_usage_error(capsys) -> None:
    assert _tito("run", "07", "--part-b-only", "--no-part-b") == 2
    assert "contradict" in capsys.readouterr().err


def test_a_missing_impl_module_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert _tito("run", "07", "--impl", "tinytorch.no_such_module_m07", "--no-part-b") == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "no module named 'tinytorch.no_such_module_m07'" in captured.err


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "08"],
        ["run", "07", "--timeout", "0"],
        ["run", "07", "--timeout", "soon"],
        ["run", "07", "--seed", "x"],
        ["run"],
        [],
    ],
)
def test_usage_errors_exit_2(argv: list[str]) -> None:
    assert _tito(*argv) == 2


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert _tito("list") == 0
    out = capsys.readouterr().out
    assert "07" in out and "kernels" in out and "metal" in out


@pytest.mark.slow
def test_json_matches_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    code = _tito(
        "run",
        "07",
        "--impl",
        str(BASE),
        "--json",
        str(path),
        "--seed",
        "3",
        "--part-b-sizes",
        "quick",
    )
    assert code == 0
    doc = json.loads(path.read_text())
    validate(doc)
    assert doc["schema_version"] == SCHEMA_VERSION and doc["verdict"] == "PASS" and doc["seed"] == 3
    assert len(doc["cases"]) == 30 and {c["status"] for c in doc["cases"]} == {"pass"}
    rows = doc["part_b"]["rows"]
    assert {r["backend"] for r in rows} >= {
        "student",
        "numpy",
        "torch-cpu",
        "c++ simd",
        "mps",
        "triton",
    }
    assert all(r["status"] != "ok" or r["ms"] > 0 for r in rows)
    assert "python" in doc["environment"]


def test_json_records_failures(tmp_path: Path) -> None:
    bug = tmp_path / "bug.py"
    bug.write_text(BASE.read_text().replace("np.tanh(inner)", "np.tanh(inner * 1.01)"))
    path = tmp_path / "result.json"
    assert _tito("run", "07", "--impl", str(bug), "--no-part-b", "--json", str(path)) == 1
    doc = json.loads(path.read_text())
    validate(doc)
    assert doc["verdict"] == "NOT_PASSED" and doc["part_b"] is None
    bad = [c for c in doc["cases"] if c["status"] != "pass"]
    assert bad and all(
        c["group"] == "fused_gelu" and c["max_error"] > 0 and c["where"] for c in bad
    )


def test_other_seed_draws_other_data() -> None:
    from tinytorch.milestone07.cases import CASES
    from tinytorch.milestone07.references import make_call

    _, a0, _ = make_call(CASES[0], 0)
    _, a1, _ = make_call(CASES[0], 1)
    _, again, _ = make_call(CASES[0], 0)
    assert not np.array_equal(a0[0], a1[0]) and np.array_equal(a0[0], again[0])


def test_script_entry_point(tmp_path: Path) -> None:
    script = ROOT / "milestones" / "07_2024_kernels" / "01_custom_kernels.py"
    run = subprocess.run(
        [sys.executable, str(script), "--impl", str(BASE), "--no-part-b"],
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert "PASS  30/30" in run.stdout


# ---- Part B: says what is missing, never credits a wrong native kernel --------------------------
def test_part_b_without_native_extension_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    import tinytorch.extensions

    monkeypatch.setitem(sys.modules, "tinytorch.extensions.simd", None)  # import fails
    monkeypatch.delattr(tinytorch.extensions, "simd", raising=False)
    row = bench_tasks.simd_gemm(None, n=8, repeats=1)
    assert row["status"] == "unavailable" and "not importable" in row["detail"]
    status = bench_tasks.simd_status(None)
    assert status["available"] is False and status["reason"]
    mod, why = bench_tasks._backend("no_such_backend")
    assert mod is None and "not importable" in why


def test_part_b_flags_a_wrong_native_kernel_as_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("tinytorch.extensions.simd")
    fake.available = lambda: (True, "fake")
    fake.build_info = lambda: {"isa": "fake", "openmp": False, "threads": 1}
    fake.matmul = lambda a, b, threads=None, out=None: (a @ b) + 1.0  # off by one everywhere
    fake.fused_bias_gelu = lambda x, bias, threads=None, out=None: np.zeros_like(x)
    monkeypatch.setitem(sys.modules, "tinytorch.extensions.simd", fake)
    import tinytorch.extensions

    monkeypatch.setattr(tinytorch.extensions, "simd", fake, raising=False)
    gemm = bench_tasks.simd_gemm(None, n=16, repeats=1)
    gelu = bench_tasks.simd_bias_gelu(None, m=4, n=8, repeats=1)
    for row in (gemm, gelu):
        assert row["status"] == "mismatch" and row["ms"] is None
        assert "bug in the bundled kernel" in row["detail"]


def test_a_load_error_never_points_into_the_graders_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: '... (at exports.py:173)', a line of the grader's own code, ended the message."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1  # no #| export cell")]
    path = tmp_path / "acceleration.ipynb"
    nbformat.write(nb, str(path))
    assert _tito("run", "07", "--impl", str(path), "--no-part-b") == 1
    out = capsys.readouterr().out
    assert "export" in out and ".py:" not in out, out
