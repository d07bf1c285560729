"""The diagnosis rules, one test per rule, on bug mutants of a correct student module (and stand-ins).

Rules: a failing deeper check that explains a group's failures leads and those cases point to it;
a lesson a passing check contradicts is not shown; identical lessons collapse into one with their
cases; timeouts and crashes get lessons of their own; a check that never ran is "not_run"; the
same diagnosis reaches the terminal report and the JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tinytorch.milestone07 import LESSONS, render_part_a, run_part_a, to_json, validate
from tinytorch.milestone07.diagnose import FAILURE_LESSONS, diagnose, diagnose_result

BASE = Path(__file__).parent / "mutants" / "student_base.py"


def mutant(tmp_path: Path, *edits: tuple[str, str], append: str = "") -> str:
    src = BASE.read_text()
    for old, new in edits:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    path = tmp_path / "acceleration.py"
    path.write_text(src + append)
    return str(path)


def _case(name, group, status="fail", lesson="a lesson"):
    return SimpleNamespace(name=name, group=group, status=status, lesson=lesson)


def _check(name, status, blame=(), lesson="check lesson"):
    return SimpleNamespace(name=name, status=status, detail="d", lesson=lesson, blame=list(blame))


def test_a_deeper_check_that_explains_a_group_leads_and_its_cases_point_to_it(tmp_path):
    impl = mutant(
        tmp_path,
        ("cols = np.empty((N, oh, ow, C, k, k)", "cols = np.empty((N, oh, ow, k, k, C)"),
        ("cols[:, :, :, :, di, dj] = win", "cols[:, :, :, di, dj, :] = win"),
    )
    result = run_part_a(impl)
    diag = diagnose_result(result)
    first = diag.root_causes[0]
    assert first.check == "im2col layout" and "(kernel row, kernel col, channel)" in first.detail
    conv = {c.name for c in result.cases if c.group == "im2col_conv2d"}
    assert set(first.cases) == conv and all(diag.cause_of[n] == "im2col layout" for n in conv)
    assert not diag.lessons, "the conv cases carry no lesson of their own"
    text = render_part_a(result)
    assert text.index("root cause first") < text.index("im2col_conv2d/pad1")
    assert LESSONS["conv_padding"] not in text  # "pad both sides" would point away from the bug


def test_a_lesson_that_a_passing_check_contradicts_is_not_shown(tmp_path):
    # col2im reads the columns in (kernel row, kernel col, channel) order but adds correctly.
    impl = mutant(
        tmp_path,
        ("G6 = G.reshape(N, oh, ow, C, k, k)", "G6 = G.reshape(N, oh, ow, k, k, C)"),
        ("patch = G6[:, :, :, :, di, dj]", "patch = G6[:, :, :, di, dj, :]"),
    )
    result = run_part_a(impl, cases=["col2im"])
    coverage = next(c for c in result.checks if c.name == "col2im coverage")
    assert coverage.status == "pass"
    diag = diagnose_result(result)
    failing = [c.name for c in result.cases if c.status == "fail"]
    assert failing and set(diag.lesson_of) == set(failing)
    for text in diag.lesson_of.values():
        assert "must ADD" not in text and LESSONS["col2im"] not in text
        assert "(kernel row, kernel col, channel)" in text


def test_contradiction_replaces_the_phrase_only_when_the_check_passed():
    lesson = "Only pixels covered by several windows are wrong: overlapping patches must ADD. "
    lesson += LESSONS["col2im"]
    cases = [_case("col2im/a", "col2im", lesson=lesson)]
    kept = diagnose(cases, [_check("col2im coverage", "not_run", ["col2im"])])
    assert kept.lesson_of["col2im/a"] == lesson
    passed = diagnose(cases, [_check("col2im coverage", "pass")])
    assert "must ADD" not in passed.lesson_of["col2im/a"]
    assert "coverage check passes" in passed.lesson_of["col2im/a"]


def test_identical_lessons_collapse_into_one_line_listing_their_cases(tmp_path):
    impl = mutant(
        tmp_path,
        ("for k0 in range(0, K, tile_size)", "for k0 in range(0, K - K % tile_size, tile_size)"),
    )
    result = run_part_a(impl, cases=["tiled_matmul"])
    diag = diagnose_result(result)
    failing = [c.name for c in result.cases if c.status == "fail"]
    assert len(failing) == 15
    assert len(diag.lessons) == 1 and diag.lessons[0].cases == failing
    assert "ragged last k-tile" in diag.lessons[0].text
    flat = " ".join(render_part_a(result).split())  # undo the report's line wrapping
    assert flat.count(" ".join(diag.lessons[0].text.split())) == 1


def test_timeouts_and_crashes_get_lessons_of_their_own(tmp_path):
    impl = mutant(
        tmp_path,
        ("    xs = _arr(x)\n", "    xs = _arr(x)\n    while True:\n        pass\n"),
        ("    G = _arr(cols)\n", "    G = _arr(cols)\n    import os\n    os._exit(3)\n"),
    )
    result = run_part_a(impl, cases=["fused_gelu", "col2im"], timeout=0.5)
    by_status = {}
    for c in result.cases:
        by_status.setdefault(c.status, set()).add(c.lesson)
    assert by_status["timeout"] <= {FAILURE_LESSONS["timeout"], FAILURE_LESSONS["skipped"]}
    assert FAILURE_LESSONS["timeout"] in by_status["timeout"]
    assert FAILURE_LESSONS["crash"] in by_status["crash"]
    assert all(LESSONS["gelu"] != c.lesson for c in result.cases)
    # a check of a function that kept hanging never ran: not_run, never PASS
    gelu_check = next(c for c in result.checks if c.name == "dtype and finiteness")
    assert gelu_check.status == "not_run"
    assert "dtype and finiteness" in diagnose_result(result).not_run


def test_inputs_not_mutated_is_not_run_when_nothing_returned(tmp_path):
    src = "\n".join(
        f"def {fn}(*args, **kwargs):\n    raise NotImplementedError('TODO')\n"
        for fn in ("tiled_matmul", "fused_gelu", "im2col", "im2col_conv2d", "col2im")
    )
    path = tmp_path / "unfinished.py"
    path.write_text(src)
    result = run_part_a(str(path))
    mutation = next(c for c in result.checks if c.name == "inputs not mutated")
    assert result.verdict == "INCOMPLETE" and mutation.status == "not_run"


def test_a_mutating_kernel_is_a_root_cause(tmp_path):
    impl = mutant(
        tmp_path,
        append="""
def fused_gelu(x):
    xs = x.data  # no copy: zeroing it below clears the caller's tensor
    out = 0.5 * xs * (1.0 + np.tanh(np.sqrt(2 / np.pi) * (xs + 0.044715 * xs**3)))
    xs[...] = 0.0
    return Tensor(out)
""",
    )
    result = run_part_a(impl, cases=["fused_gelu"])
    diag = diagnose_result(result)
    assert [r.check for r in diag.root_causes] == ["inputs not mutated"]
    assert diag.root_causes[0].blame == ["fused_gelu"]


@pytest.mark.parametrize("status", ["incomplete", "not_observed", "not_run", "pass"])
def test_silent_check_statuses_are_never_root_causes(status):
    diag = diagnose([_case("x/a", "tiled_matmul")], [_check("tiling audit", status, ["x"])])
    assert diag.root_causes == [] and diag.lessons[0].cases == ["x/a"]


def test_the_json_carries_the_same_diagnosis_and_validates(tmp_path):
    impl = mutant(tmp_path, ("C[i0:i1, j0:j1] += A", "C[i0:i1, j0:j1] = A"))
    result = run_part_a(impl, cases=["tiled_matmul"])
    doc = to_json(result, None)
    validate(doc)
    assert doc["diagnosis"] == json.loads(json.dumps(diagnose_result(result).to_dict()))
    assert doc["diagnosis"]["lessons"] and "+=" in doc["diagnosis"]["lessons"][0]["text"]
    json.dumps(doc)  # evidence included: JSON-able
