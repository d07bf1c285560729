"""Milestone 07 Part A: the registry, the comparison helper, verdicts, and untrusted student code."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tinytorch.bench.part_b import run_part_b
from tinytorch.milestone07 import (
    CASES,
    FUNCTIONS,
    GROUPS,
    check_matmul_grid,
    compare,
    run_part_a,
    select_cases,
)

BASE = Path(__file__).parent / "mutants" / "student_base.py"


def _module(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(BASE.read_text() + body)
    return str(path)


# ---- the registry ------------------------------------------------------------------------------
def test_registry_has_30_cases_in_group_order() -> None:
    assert len(CASES) == 30
    counts = {g: sum(c.group == g for c in CASES) for g in GROUPS}
    assert counts == {"tiled_matmul": 18, "fused_gelu": 4, "im2col_conv2d": 4, "col2im": 4}
    assert [c.group for c in CASES] == sorted((c.group for c in CASES), key=GROUPS.index)
    assert len({c.name for c in CASES}) == 30
    json.dumps([c.params for c in CASES])  # params are data


def test_matmul_cases_cover_the_awkward_shapes() -> None:
    mm = [c.params for c in CASES if c.group == "tiled_matmul"]
    assert {p["tile_size"] for p in mm} == {64, 16, 7}
    for t in (64, 16, 7):
        shapes = [(p["m"], p["k"], p["n"]) for p in mm if p["tile_size"] == t]
        assert len(shapes) == 6
        assert any(m % t and k % t and n % t and min(m, k, n) > t for m, k, n in shapes)
        assert any(m == 1 and n == 1 for m, k, n in shapes)
        assert any(k == 1 for m, k, n in shapes)
        assert any(max(m, k, n) < t for m, k, n in shapes)
        assert any(min(m, k, n) > 2 * t and m % t and k % t and n % t for m, k, n in shapes)
        assert any(m % t == 0 and k % t == 0 and n % t == 0 for m, k, n in shapes)


def test_conv_cases_cover_stride_padding_and_odd_shapes() -> None:
    conv = [c.params for c in CASES if c.group == "im2col_conv2d"]
    assert any(p["padding"] == 1 for p in conv)
    assert any(
        p["stride"] == 2
        and p["padding"] == 0
        and p["x_shape"][2] % 2
        and p["x_shape"][2] != p["x_shape"][3]
        for p in conv
    )
    assert any(p["kernel_size"] == 2 and p["x_shape"][2] != p["x_shape"][3] for p in conv)
    assert any(p["kernel_size"] == 5 and p["padding"] == 2 for p in conv)


def test_select_cases_by_group_and_name() -> None:
    assert len(select_cases("fused_gelu")) == 4
    assert [c.name for c in select_cases([CASES[3].name])] == [CASES[3].name]
    with pytest.raises(ValueError, match="unknown case"):
        select_cases(["nope"])


# ---- the comparison helper ---------------------------------------------------------------------
def test_compare_checks_shape_then_dtype_then_finite_then_tolerance() -> None:
    ref = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert compare(np.zeros((2, 3), np.float64), ref, rtol=0, atol=1).reason == "shape"
    assert compare(np.full((2, 2), np.nan), ref, rtol=0, atol=1).reason == "dtype"
    got = compare(np.array([[1, 2], [np.inf, 4]], np.float32), ref, rtol=0, atol=1)
    assert (got.reason, got.where) == ("nonfinite", [1, 0])
    off = np.array([[1.0, 2.0], [3.0, 4.5]], np.float32)
    got = compare(off, ref, rtol=0.1, atol=0.0)
    assert got.ok is False and got.reason == "tolerance"
    assert got.where == [1, 1] and got.max_error == pytest.approx(0.5)
    assert compare(off, ref, rtol=0.2, atol=0.0).ok  # 0.5 <= 0 + 0.2 * 4


# ---- verdicts -----------------------------------------------------------------------------------
def test_reference_module_passes_every_case_and_check() -> None:
    result = run_part_a()
    assert result.verdict == "PASS", [(c.name, c.detail) for c in result.failing()]
    assert result.passed() == 30
    assert [c.status for c in result.checks] == ["pass"] * 6, result.checks


def test_student_edition_is_incomplete(tmp_path: Path) -> None:
    from tinytorch.cli.main import main

    assert main(["release", "17", "--out", str(tmp_path)]) == 0
    result = run_part_a(str(tmp_path / "acceleration.py"))
    assert result.verdict == "INCOMPLETE"
    # every stub, by its place: the five graded functions, the two ungraded ones, both methods
    places = [m.split("(")[0] for m in result.missing]
    assert places == [*FUNCTIONS, "vectorized_matmul", "unfused_gelu",
                      "Im2colConv2dFunction.forward", "Im2colConv2dFunction.backward"]  # fmt: skip
    assert {c.status for c in result.cases} == {"incomplete"}


def test_missing_module_and_missing_function_are_incomplete(tmp_path: Path) -> None:
    gone = run_part_a("tinytorch.no_such_module_for_m07")
    assert gone.verdict == "INCOMPLETE" and "not found" in gone.missing[0]
    path = tmp_path / "partial.py"
    path.write_text(BASE.read_text() + "\ndel col2im\n")
    partial = run_part_a(str(path))
    assert partial.verdict == "INCOMPLETE"
    assert [m.split("(")[0] for m in partial.missing] == ["col2im"]
    assert all(c.status == "pass" for c in partial.cases if c.group != "col2im")


def test_a_module_that_fails_to_import_is_named(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("def tiled_matmul(a, b, tile_size=64)\n    pass\n")
    result = run_part_a(str(path))
    assert result.verdict == "NOT_PASSED"
    assert all("SyntaxError" in c.detail for c in result.cases)


def test_a_student_file_whose_own_import_fails_is_an_import_error_not_missing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "needs_dep.py"
    path.write_text("import no_such_dependency_xyz\n" + BASE.read_text())
    result = run_part_a(str(path), checks=False)
    assert result.verdict == "NOT_PASSED"
    assert all("no_such_dependency_xyz" in c.detail for c in result.cases)


# ---- untrusted code ------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_hang_times_out_with_a_named_result(tmp_path: Path) -> None:
    impl = _module(tmp_path, "hangs", "\ndef fused_gelu(x):\n    while True:\n        pass\n")
    result = run_part_a(impl, timeout=0.5)
    gelu = [c for c in result.cases if c.group == "fused_gelu"]
    assert {c.status for c in gelu} == {"timeout"}
    assert "no result within 0.5 s of CPU time" in gelu[0].detail  # which limit fired
    assert all(c.status == "pass" for c in result.cases if c.group != "fused_gelu")
    assert result.verdict == "NOT_PASSED" and result.blamed() == {"fused_gelu"}


@pytest.mark.slow
def test_a_sleeping_kernel_is_named_blocked_not_an_endless_loop(tmp_path: Path) -> None:
    """The report says which limit fired: a kernel that sleeps spends no CPU time."""
    impl = _module(
        tmp_path, "sleeps", "\ndef fused_gelu(x):\n    import time\n    time.sleep(60)\n"
    )
    result = run_part_a(impl, timeout=0.5, cases=[c.name for c in CASES if c.group == "fused_gelu"])
    gelu = [c for c in result.cases if c.group == "fused_gelu"]
    assert gelu[0].status == "timeout" and "blocked" in gelu[0].detail, gelu[0].detail
    assert "endless loop" not in gelu[0].detail


@pytest.mark.slow
def test_part_b_does_not_time_a_function_that_hung_in_part_a(tmp_path: Path) -> None:
    """The notebook and the CLI hand Part A's result to Part B, which then skips the hung kernel."""
    impl = _module(tmp_path, "hangs_b", "\ndef fused_gelu(x):\n    while True:\n        pass\n")
    part_a = run_part_a(impl, timeout=0.5, cases=["fused_gelu/zeros"], checks=False)
    assert part_a.stalled() == {"fused_gelu"}
    part_b = run_part_b(impl, sizes="quick", part_a=part_a)
    student = {r.kind: r for r in part_b.rows if r.backend == "student"}
    assert student["bias_gelu"].status == "unavailable"
    assert "did not finish in Part A" in student["bias_gelu"].detail
    assert student["gemm"].status == "ok"  # tiled_matmul still timed


@pytest.mark.slow
@pytest.mark.exclusive  # 0.5 s per case: under the suite's load a passing case once timed out
def test_a_shape_dependent_hang_still_runs_the_other_cases(tmp_path: Path) -> None:
    body = (
        "\n_ok = tiled_matmul\n"
        "def tiled_matmul(a, b, tile_size=64):\n"
        "    while tile_size == 7:\n        pass\n"
        "    return _ok(a, b, tile_size)\n"
    )
    result = run_part_a(_module(tmp_path, "hang7", body), timeout=0.5, checks=False)
    for c in result.cases:
        if c.group == "tiled_matmul":
            assert c.status == ("timeout" if c.name.endswith("tile7") else "pass"), c
    assert result.restarts >= 6  # one fresh child after each hang


def test_a_segfault_is_a_named_crash_and_the_grader_survives(tmp_path: Path) -> None:
    body = "\nimport ctypes\ndef col2im(cols, x_shape, kernel_size, stride=1, padding=0):\n    ctypes.string_at(0)\n"
    result = run_part_a(_module(tmp_path, "segv", body), timeout=5)
    col = [c for c in result.cases if c.group == "col2im"]
    assert {c.status for c in col} == {"crash"}
    assert "SIGSEGV" in " ".join(c.detail for c in col)
    assert all(c.status == "pass" for c in result.cases if c.group != "col2im")
    assert result.verdict == "NOT_PASSED"


def test_raises_nan_and_exit_are_named_failures(tmp_path: Path) -> None:
    body = (
        "\ndef fused_gelu(x):\n    return Tensor(_arr(x) * np.nan)\n"
        "\ndef col2im(cols, x_shape, kernel_size, stride=1, padding=0):\n    raise SystemExit(3)\n"
    )
    result = run_part_a(_module(tmp_path, "misbehaves", body), checks=False)
    by_group = {c.group: c for c in result.cases}
    assert by_group["fused_gelu"].status == "fail" and "NaN" in by_group["fused_gelu"].detail
    assert by_group["col2im"].status == "error" and "SystemExit" in by_group["col2im"].detail


# ---- the tiling audit ----------------------------------------------------------------------------
def test_audit_sees_through_np_asarray(tmp_path: Path) -> None:
    body = (
        "\ndef tiled_matmul(a, b, tile_size=64):\n"
        "    return Tensor(np.asarray(a) @ np.ascontiguousarray(np.asarray(b)))\n"
    )
    result = run_part_a(_module(tmp_path, "asarray_whole", body))
    audit = next(c for c in result.checks if c.name == "tiling audit")
    assert audit.status == "fail" and audit.blame == ["tiled_matmul"]
    assert result.verdict == "NOT_PASSED" and result.passed() == 30


def test_audit_says_not_observed_when_it_cannot_see(tmp_path: Path) -> None:
    body = (
        "\n_tiled = tiled_matmul\n"
        "def tiled_matmul(a, b, tile_size=64):\n"
        "    A = np.frombuffer(_arr(a).tobytes(), np.float32).reshape(_arr(a).shape)\n"
        "    B = np.frombuffer(_arr(b).tobytes(), np.float32).reshape(_arr(b).shape)\n"
        "    return _tiled(Tensor(A), Tensor(B), tile_size)\n"
    )
    result = run_part_a(_module(tmp_path, "opaque", body))
    audit = next(c for c in result.checks if c.name == "tiling audit")
    assert audit.status == "not_observed" and "could not be verified" in audit.detail
    assert not audit.ok and "np.matmul" in audit.lesson and audit.blame == ["tiled_matmul"]
    assert result.verdict == "NOT_PASSED"  # issue 9: what the audit cannot see does not pass


def test_check_matmul_grid_is_shape_major(tmp_path: Path) -> None:
    body = (
        "\n_ok = tiled_matmul\ndef tiled_matmul(a, b, tile_size=64):\n    return _ok(a, b, 1000)\n"
    )
    shapes, tiles = [(5, 6, 7), (40, 33, 9)], [4, 16]
    got = check_matmul_grid(_module(tmp_path, "one_tile", body), shapes, tiles)
    assert [c.name for c in got] == [
        f"grid/{m}x{k}x{n}/tile{t}" for (m, k, n) in shapes for t in tiles
    ]
    assert all(c.status == "pass" and c.max_error is not None for c in got)
    wrong = check_matmul_grid(
        _module(
            tmp_path,
            "mut",
            "\ndef tiled_matmul(a, b, tile_size=64):\n    return Tensor(np.zeros((len(a.data), b.shape[1]), np.float32))\n",
        ),
        [(3, 4, 5)],
        [2],
    )
    assert wrong[0].status == "fail"
