"""The diagnosis rules, one test per rule, on bug mutants of a correct student module (and stand-ins).

Rules: a failing deeper check that explains a group's failures leads and those cases point to it;
a lesson a passing check contradicts is not shown; identical lessons collapse into one with their
cases; timeouts and crashes get lessons of their own; a check that never ran is "not_run"; the
same diagnosis reaches the terminal report and the JSON.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tinytorch.cli.main import main
from tinytorch.milestone07 import LESSONS, run_part_a
from tinytorch.milestone07.checks import im2col_layout
from tinytorch.milestone07.diagnose import FAILURE_LESSONS, diagnose, diagnose_result
from tinytorch.milestone07.references import ref_im2col
from tinytorch.milestone07.results import CaseResult, CheckResult, PartAResult
from tinytorch.render.json_doc import to_json, validate
from tinytorch.render.notebook_record import CASES_MIME, cases_bundle
from tinytorch.render.notebook_tables import cases_html, cases_text, code_html
from tinytorch.render.terminal import render_part_a

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


def _check(name, status, blame=(), lesson="check lesson", names_cause=True):
    return SimpleNamespace(
        name=name, status=status, detail="d", lesson=lesson, blame=list(blame),
        names_cause=names_cause,
    )  # fmt: skip


class _Im2colAs:
    """A stand-in for StudentCalls whose im2col answers with `make(x, k, s, p)`, in float32."""

    def __init__(self, make):
        self.make = make

    def call(self, fn, args, kwargs, **_opts):
        x, k = args
        out = self.make(x, k, kwargs["stride"], kwargs["padding"])
        return {"status": "ok", "output": out.astype(np.float32)}


def _pad(top_left, bottom_right):
    def make(x, k, s, p):
        side = (top_left * p, bottom_right * p)
        return ref_im2col(np.pad(x, ((0, 0), (0, 0), side, side)), k, s, 0)

    return make


def _stride_one_start(x, k, s, p):
    n, _, h, w = x.shape
    full = ref_im2col(x, k, 1, p).reshape(n, h + 2 * p - k + 1, w + 2 * p - k + 1, -1)
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    return full[:, :oh, :ow].reshape(n * oh * ow, -1)


@pytest.mark.parametrize(
    "make, says, lesson",
    [
        (_pad(0, 2), "bottom and right only", "Pad both sides"),
        (_pad(2, 0), "top and left only", "Pad both sides"),
        (lambda x, k, s, p: ref_im2col(x, k, s, 0), "padding is left out", "Pad both sides"),
        (_stride_one_start, "step by 1, not by the stride", "step the slices by s"),
        (lambda x, k, s, p: ref_im2col(x, k, 1, p), "stride is ignored", "step the slices by s"),
        (
            lambda x, k, s, p: ref_im2col(x, k, s, p)
            .reshape(-1, x.shape[1], k, k).transpose(0, 2, 3, 1).reshape(-1, x.shape[1] * k * k),
            "(kernel row, kernel col, channel)",
            "Order the columns (channel, kernel row, kernel col)",
        ),
    ],
    ids=["pad_after", "pad_before", "no_padding", "steps_by_one", "stride_ignored", "kc_first"],
)  # fmt: skip
def test_the_im2col_layout_check_names_padding_stride_and_column_order_bugs(make, says, lesson):
    check = im2col_layout(_Im2colAs(make), seed=0)
    assert check.status == "fail" and says in check.detail, check.detail
    assert lesson in check.lesson and check.names_cause, check.lesson
    if "Order the columns" not in lesson:
        assert LESSONS["conv"] not in check.lesson  # no column-order lesson for another bug


def test_an_im2col_layout_failure_with_no_usual_bug_names_no_cause():
    check = im2col_layout(_Im2colAs(lambda x, k, s, p: 2.0 * ref_im2col(x, k, s, p)), seed=0)
    assert check.status == "fail" and not check.names_cause


def test_cases_keep_their_own_lessons_under_a_root_cause_that_names_no_cause():
    padding = LESSONS["conv_padding"] + " " + LESSONS["conv"]
    cases = [
        _case("im2col_conv2d/pad1", "im2col_conv2d", lesson=padding),
        _case("im2col_conv2d/k2", "im2col_conv2d", lesson=LESSONS["conv"]),
    ]
    vague = _check("im2col layout", "fail", ["im2col"], LESSONS["conv"], names_cause=False)
    diag = diagnose(cases, [vague])
    assert diag.cause_of == {c.name: "im2col layout" for c in cases}  # they still point to it
    # ... and keep what only they say (the root cause already shows the column-order lesson)
    assert diag.lesson_of == {"im2col_conv2d/pad1": LESSONS["conv_padding"]}
    named = diagnose(cases, [_check("im2col layout", "fail", ["im2col"], "Pad both sides.")])
    assert named.lesson_of == {} and named.lessons == []


def test_backward_failing_after_an_im2col_or_col2im_failure_is_a_consequence():
    cases = [_case("im2col_conv2d/pad1", "im2col_conv2d")]
    for upstream, blame in (("im2col layout", "im2col"), ("col2im coverage", "col2im")):
        checks = [
            _check(upstream, "fail", [blame], "the real lesson"),
            _check("backward", "fail", ["im2col_conv2d"], "grad weight = g2.T @ cols ..."),
        ]
        diag = diagnose(cases, checks)
        assert [r.check for r in diag.root_causes] == [upstream]
        assert diag.root_causes[0].consequences == ["backward"]
        assert diag.consequence_of == {"backward": upstream}
    alone = diagnose(cases, [_check("backward", "fail", ["im2col_conv2d"])])
    assert [r.check for r in alone.root_causes] == ["backward"] and not alone.consequence_of


def test_the_padding_bug_leads_with_the_padding_lesson_and_backward_follows_from_it(tmp_path):
    impl = mutant(
        tmp_path,
        (
            "((0, 0), (0, 0), (padding, padding), (padding, padding))",
            "((0, 0), (0, 0), (0, 2 * padding), (0, 2 * padding))",
        ),
    )
    result = run_part_a(impl, cases=["im2col_conv2d"])
    diag = diagnose_result(result)
    assert [r.check for r in diag.root_causes] == ["im2col layout"]
    assert "Pad both sides" in diag.root_causes[0].lesson
    assert diag.consequence_of == {"backward": "im2col layout"}
    text = " ".join(render_part_a(result).split())
    assert LESSONS["conv"] not in text  # the column-order lesson would point away from the bug
    assert "grad weight = g2.T @ cols" not in text  # nor backward's own lesson
    assert "backward (deeper check, a consequence: fix this first)" in text
    assert "a consequence of im2col layout: fix that first" in text


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


@pytest.mark.slow
@pytest.mark.timing  # races a 0.5 s timeout: CPU time, so it holds under 12 hogs on 2 cores
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


@pytest.mark.slow
def test_the_json_carries_the_same_diagnosis_and_validates(tmp_path):
    impl = mutant(tmp_path, ("C[i0:i1, j0:j1] += A", "C[i0:i1, j0:j1] = A"))
    result = run_part_a(impl, cases=["tiled_matmul"])
    doc = to_json(result, None)
    validate(doc)
    assert doc["diagnosis"] == json.loads(json.dumps(diagnose_result(result).to_dict()))
    assert doc["diagnosis"]["lessons"] and "+=" in doc["diagnosis"]["lessons"][0]["text"]
    json.dumps(doc)  # evidence included: JSON-able


def test_the_notebook_walk_names_the_column_order_bug_without_the_checks(tmp_path):
    # The notebook's walk runs one group with checks=False: the conv cases' own lessons must say
    # what the layout check would have said, not "pad both sides".
    impl = mutant(
        tmp_path,
        ("cols = np.empty((N, oh, ow, C, k, k)", "cols = np.empty((N, oh, ow, k, k, C)"),
        ("cols[:, :, :, :, di, dj] = win", "cols[:, :, :, di, dj, :] = win"),
    )
    result = run_part_a(impl, cases=["im2col_conv2d"], checks=False)
    assert not result.checks and {c.status for c in result.cases} == {"fail"}
    diag = diagnose_result(result)
    assert len(diag.lessons) == 1, diag.lessons  # one lesson, for all four cases
    assert "columns are ordered (kernel row, kernel col, channel)" in diag.lessons[0].text
    table = cases_text(result.cases)
    assert LESSONS["conv_padding"] not in table and LESSONS["conv_stride"] not in table


def test_hidden_cases_go_through_the_same_diagnosis_in_report_notebook_and_json(tmp_path):
    impl = mutant(
        tmp_path,
        ("for k0 in range(0, K, tile_size)", "for k0 in range(0, K - K % tile_size, tile_size)"),
    )
    result = run_part_a(impl, cases=["tiled_matmul"], grading=True, seed=11)
    hidden = [c.name for c in result.hidden if c.status == "fail"]
    assert hidden, "a dropped ragged K tile fails every hidden case (K is never a multiple)"
    doc = to_json(result, None)
    [lesson] = doc["diagnosis"]["lessons"]  # collapsed: published and hidden cases alike
    assert set(hidden) <= set(lesson["cases"])
    text = " ".join(lesson["text"].split())
    report = render_part_a(result)
    assert " ".join(report.split()).count(text) == 1  # no raw per-case fix line for hidden cases
    assert not [line for line in report.splitlines() if line.strip().startswith("fix:")]
    bundle = cases_bundle(result.cases, "gate", compact=True, checks=result.checks,
                          hidden=result.hidden)  # fmt: skip
    page = bundle["text/html"]
    assert page.count(code_html(lesson["text"])) == 1 and all(n in page for n in hidden)
    assert bundle["text/plain"].count(lesson["text"]) == 1
    assert [c["name"] for c in bundle[CASES_MIME]["cases"]] == [c.name for c in result.cases]


def test_a_hidden_case_points_to_its_root_cause_and_a_lesson_only_it_has_is_listed_once():
    def case(name, group, status, lesson=""):
        return CaseResult(name, group, name, status, 1.0, None, "wrong", lesson, 0.0, [group])

    result = PartAResult(
        "NOT_PASSED", "student.py", 3,
        [case("im2col_conv2d/pad1", "im2col_conv2d", "pass"), case("fused_gelu/zeros", "fused_gelu", "pass")],
        [CheckResult("im2col layout", "fail", "padded on one side", "Pad both sides.", ["im2col"])],
        [], 1.0, grading=True,
        hidden=[
            case("hidden/im2col_conv2d/0", "im2col_conv2d", "fail", LESSONS["conv"]),
            case("hidden/fused_gelu/0", "fused_gelu", "fail", "only hidden cases say this"),
            case("hidden/fused_gelu/1", "fused_gelu", "fail", "only hidden cases say this"),
        ],
    )  # fmt: skip
    lines = render_part_a(result).splitlines()
    assert "  cause (hidden/im2col_conv2d/0): im2col layout (root cause 1, above)" in lines
    flat = " ".join(lines)
    assert LESSONS["conv"] not in flat  # the root cause replaces its lesson
    assert flat.count("only hidden cases say this") == 1
    assert "fix (hidden/fused_gelu/0, hidden/fused_gelu/1): only hidden cases say this" in flat
    page = cases_html(result.cases, compact=True, checks=result.checks, hidden=result.hidden)
    assert page.count("only hidden cases say this") == 1 and "Cause:</b> im2col layout" in page


def test_tito_grade_prints_the_root_cause_first_and_its_cases_point_to_it(
    tmp_path, monkeypatch, capsys
):
    impl = mutant(
        tmp_path,
        ("cols = np.empty((N, oh, ow, C, k, k)", "cols = np.empty((N, oh, ow, k, k, C)"),
        ("cols[:, :, :, :, di, dj] = win", "cols[:, :, :, di, dj, :] = win"),
    )
    doc = to_json(run_part_a(impl, cases=["im2col_conv2d"]), None)
    report = {  # what grading.grade.grade returns, as far as the summary reads it
        "verdict": doc["verdict"], "passed": 0, "total": 4, "status": "completed", "error": None,
        "seconds": 1.0, "cases": doc["cases"], "hidden_cases": [], "checks": doc["checks"],
        "missing": [], "warnings": [], "diagnosis": doc["diagnosis"],
    }  # fmt: skip
    grading = importlib.import_module("tinytorch.grading.grade")  # the package re-exports grade
    monkeypatch.setattr(grading, "grade", lambda *a, **k: (1, report))
    assert main(["grade", "--impl", impl]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "root cause first:" and lines[2].startswith("  1. im2col layout (FAIL)")
    fix = next(i for i, line in enumerate(lines) if line.strip().startswith("fix:"))
    cases = [i for i, line in enumerate(lines) if line.startswith("  FAIL       im2col_conv2d/")]
    assert len(cases) == 4 and fix < min(cases)  # the cause and its fix come before the cases
    assert all(lines[i].endswith("(cause: im2col layout, above)") for i in cases)
    [backward] = [line for line in lines if "backward (deeper check)" in line]
    assert backward.endswith("(a consequence of im2col layout: fix that first)")
    assert not any("(deeper check): x (2, 3, 7, 9)" in line for line in lines)  # shown once


_HANG_IN_BACKWARD = (
    "        xd, wd = self.inputs[0].data, self.inputs[1].data\n",
    "        while True:\n            pass\n        xd, wd = self.inputs[0].data, self.inputs[1].data\n",
)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["forward", "backward"])
def test_the_backward_check_says_not_run_when_skipped_and_gives_a_hang_its_lesson(tmp_path, where):
    if where == "forward":  # the node's forward hangs: im2col_conv2d's cases and the check's call
        hang = "    def forward(self, xd, wd, bias):\n"
        edit = (hang, hang + "        while True:\n            pass\n")
    else:  # only backward hangs: the 30 forward cases pass, the check's own call times out
        edit = _HANG_IN_BACKWARD
    result = run_part_a(mutant(tmp_path, edit), cases=["im2col_conv2d"], timeout=0.5)
    backward = next(c for c in result.checks if c.name == "backward")
    if where == "forward":  # the check calls Im2colConv2dFunction.apply itself: its own timeout
        assert {c.status for c in result.cases} == {"timeout"}
        assert backward.status == "timeout" and backward.lesson == FAILURE_LESSONS["timeout"]
    else:
        assert {c.status for c in result.cases} == {"pass"}
        assert backward.status == "timeout" and backward.lesson == FAILURE_LESSONS["timeout"]
        assert "stride 2, padding 1" in backward.detail  # still says on which geometry


_GARBLE = """
import os as _os
def _garble():  # writes over every descriptor it can: the grader's reply pipe among them
    for fd in range(3, 64):
        try:
            _os.write(fd, b"\\xff" * 64)
        except OSError:
            pass
"""


def test_a_broken_channel_gets_the_protocol_lesson_in_cases_and_checks(tmp_path):
    impl = mutant(
        tmp_path,
        ("    xs = _arr(x)\n", "    _garble()\n    xs = _arr(x)\n"),
        (_HANG_IN_BACKWARD[0], "        _garble()\n" + _HANG_IN_BACKWARD[0]),
        append=_GARBLE,
    )
    result = run_part_a(impl, cases=["fused_gelu", "im2col_conv2d"], timeout=2.0)
    first = next(c for c in result.cases if c.group == "fused_gelu")
    assert "malformed reply" in first.detail and first.lesson == FAILURE_LESSONS["protocol"]
    backward = next(c for c in result.checks if c.name == "backward")
    assert "malformed reply" in backward.detail and backward.lesson == FAILURE_LESSONS["protocol"]
    assert " ".join(FAILURE_LESSONS["protocol"].split()) in " ".join(render_part_a(result).split())


def test_a_failing_col2im_coverage_check_is_the_root_cause_of_the_col2im_cases(tmp_path):
    impl = mutant(
        tmp_path,
        ("dj : dj + stride * ow : stride] += patch", "dj : dj + stride * ow : stride] = patch"),
    )
    result = run_part_a(impl, cases=["col2im"])
    diag = diagnose_result(result)
    failing = [c.name for c in result.cases if c.status == "fail"]
    assert failing and [r.check for r in diag.root_causes] == ["col2im coverage"]
    assert diag.root_causes[0].cases == failing and not diag.lessons
    assert diag.consequence_of == {"backward": "col2im coverage"}  # grad x goes through col2im
    text = " ".join(render_part_a(result).split())
    assert text.index("root cause first: 1. col2im coverage") < text.index("col2im FAIL 4 of 4")
    assert text.count("scatter-ADD (+=) each column back to its window") == 1


def test_the_tiling_audit_leads_but_never_hides_the_lessons_of_wrong_values(tmp_path):
    # Two bugs: K is not tiled (one product over all of K: values right, audit fails) and the
    # ragged last tile on M is dropped (values wrong). A block larger than the tile changes no
    # value, so the audit leads but claims no case: the ragged-M lesson stays.
    impl = mutant(
        tmp_path,
        ("for i0 in range(0, M, tile_size)", "for i0 in range(0, M - M % tile_size, tile_size)"),
        ("C[i0:i1, j0:j1] += A[i0:i1, k0:k1] @ B[k0:k1, j0:j1]",
         "C[i0:i1, j0:j1] = A[i0:i1, :] @ B[:, j0:j1]"),
    )  # fmt: skip
    result = run_part_a(impl, cases=["tiled_matmul"])
    diag = diagnose_result(result)
    failing = [c.name for c in result.cases if c.status == "fail"]
    assert failing and diag.root_causes[0].check == "tiling audit"
    assert "larger than the tile" in diag.root_causes[0].detail
    assert not diag.cause_of and set(diag.lesson_of) == set(failing)  # their own lessons
    assert any("ragged last tile on M" in x.text for x in diag.lessons)
    text = " ".join(render_part_a(result).split())
    assert text.index("root cause first: 1. tiling audit") < text.index("ragged last tile on M")
    assert "not a tiled kernel" in text and "cause: tiling audit (root cause" not in text


def _gelu(x: np.ndarray, a: float = 0.7978845608028654, c: float = 0.044715) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(a * (x + c * x**3)))


@pytest.mark.parametrize(
    ("make", "says", "never"),
    [
        (
            lambda x: _gelu(x, a=np.sqrt(np.pi / 2)),
            "sqrt(2/pi) = 0.797885 is 1.253314",
            "float16 rounding",
        ),
        (lambda x: _gelu(x, c=0.04), "0.044715 is 0.040000 here", "float16 rounding"),
        (
            lambda x: _gelu(x.astype(np.float16)).astype(np.float64),
            "float16 rounding",
            "constant is not",
        ),
        (
            lambda x: np.zeros_like(x),
            "",
            "float16 rounding",
        ),  # zeros are float16 values: not the cause
        (lambda x: np.round(_gelu(x)), "", "float16 rounding"),  # integers too
        (lambda x: 0.5 * x * (1 + np.tanh(0.1 * x**3)), "", "constant is not"),  # no linear term
    ],
    ids=["sqrt_pi_over_2", "cubic_0.04", "float16", "zeros", "rounded", "no_linear"],
)
def test_a_gelu_lesson_names_its_own_bug_and_no_other(make, says, never) -> None:
    from tinytorch.milestone07.diagnose import gelu_lesson

    x = np.random.default_rng(0).normal(0.0, 3.0, 1000)
    text = gelu_lesson(x, make(x), _gelu(x), LESSONS["gelu_range"], rtol=1e-5, atol=1e-5)
    assert says in text and never not in text and "NaN" not in text, text


def test_a_gelu_output_past_float16s_range_is_diagnosed_quietly() -> None:
    """The float16 test cast a 1e30 output to float16: numpy printed 'overflow encountered in
    cast' on the grader's own stderr, outside the sandbox."""
    import warnings

    from tinytorch.milestone07.diagnose import gelu_lesson

    x = np.random.default_rng(0).normal(0.0, 3.0, 1000)
    for out in (np.full_like(x, 1e30), x * 1e20):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            text = gelu_lesson(x, out, _gelu(x), LESSONS["gelu"], rtol=1e-5, atol=1e-5)
        assert text == LESSONS["gelu"], text


def test_two_values_are_too_few_to_call_an_error_float16_rounding() -> None:
    """A hidden case of 2 values with a wrong constant was told 'looks like float16 rounding'."""
    from tinytorch.milestone07.diagnose import gelu_lesson

    x = np.array([2.1, 2.6])
    text = gelu_lesson(x, _gelu(x, c=0.04), _gelu(x), LESSONS["gelu"], rtol=1e-5, atol=1e-5)
    assert "float16 rounding" not in text, text


def test_the_extremes_check_tells_a_wrong_shape_to_keep_the_shape(tmp_path) -> None:
    """It gave the formula's lesson for 'wrong shape (1,), expected (15,)'."""
    base = Path(__file__).parent / "mutants" / "student_base.py"
    impl = tmp_path / "one_value.py"
    impl.write_text(
        base.read_text() + "\n\ndef fused_gelu(x):\n    return Tensor(np.zeros(1, np.float32))\n"
    )
    result = run_part_a(str(impl), cases=["fused_gelu"])
    check = next(c for c in result.checks if c.name == "dtype and finiteness")
    assert check.status == "fail" and "wrong shape" in check.detail, check
    assert check.lesson.startswith("Return the same shape as x"), check.lesson
