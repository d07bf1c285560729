"""Grading mode (issue 9 item 7): a fresh secret seed per run, recorded; practice stays seed 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_milestone_mutants import ALTERNATIVES, MUTANTS, mutate

from tinytorch.cli.main import main
from tinytorch.milestone07 import CASES, GROUPS, run_part_a
from tinytorch.milestone07.cases import HIDDEN_GROUPS, hidden_cases
from tinytorch.milestone07.checks import AUDIT_PROBLEMS
from tinytorch.milestone07.part_a import resolve_seed
from tinytorch.render.json_doc import SCHEMA_VERSION, to_json, validate
from tinytorch.render.terminal import render_part_a

BASE = Path(__file__).parent / "mutants" / "student_base.py"


def test_practice_seed_is_0_and_grading_seeds_are_fresh() -> None:
    assert resolve_seed(None, grading=False) == 0
    drawn = {resolve_seed(None, grading=True) for _ in range(20)}
    assert len(drawn) == 20  # 63 random bits: a repeat in 20 draws would be a broken source
    assert resolve_seed(7, grading=True) == 7  # a given seed replays a grading run
    with pytest.raises(ValueError, match="seed"):
        resolve_seed(-1, grading=False)


def test_run_part_a_records_mode_and_seed_in_json() -> None:
    practice = run_part_a(str(BASE), cases=["fused_gelu/zeros"], checks=False)
    graded = run_part_a(str(BASE), cases=["fused_gelu/zeros"], checks=False, grading=True)
    assert (practice.grading, practice.seed) == (False, 0)
    assert graded.grading is True and graded.seed != 0
    doc = to_json(graded, None)
    validate(doc)
    assert doc["schema_version"] == SCHEMA_VERSION == 3
    assert doc["grading"] is True and doc["seed"] == graded.seed
    assert isinstance(doc["hidden_cases"], list) and isinstance(doc["warnings"], list)
    assert isinstance(doc["isolation"], dict)


@pytest.mark.slow
def test_cli_grading_flag_writes_a_secret_seed(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    argv = ["milestone", "run", "07", "--impl", str(BASE), "--no-part-b", "--json", str(path)]
    assert main([*argv, "--grading"]) == 0
    first = json.loads(path.read_text())
    assert main([*argv, "--grading"]) == 0
    second = json.loads(path.read_text())
    assert first["grading"] is second["grading"] is True
    assert first["seed"] != second["seed"]
    assert main(argv) == 0
    assert json.loads(path.read_text())["seed"] == 0


@pytest.mark.parametrize(
    "extra",
    [["--budget", "0"], ["--budget", "soon"], ["--memory-limit", "-5"], ["--memory-limit", "x"]],
)
def test_bad_budget_or_memory_limit_is_a_usage_error(extra: list[str]) -> None:
    assert main(["milestone", "run", "07", "--no-part-b", *extra]) == 2


# ---- hidden cases -------------------------------------------------------------------------------
def test_hidden_cases_are_named_seeded_ragged_and_never_published() -> None:
    first, again, other = hidden_cases(1234), hidden_cases(1234), hidden_cases(99)
    assert first == again and first != other  # the seed decides them, and only the seed
    assert {c.group for c in first} == set(HIDDEN_GROUPS) == {*GROUPS, "im2col"}
    assert all(c.name.startswith("hidden/" + c.group + "/") for c in first)
    assert len({c.name for c in first}) == len(first)
    published = [c.params for c in CASES]
    for seed in range(50):
        for case in hidden_cases(seed):
            assert case.params not in published
            if case.group == "tiled_matmul":
                t = case.params["tile_size"]
                sides = [case.params[a] for a in ("m", "k", "n")]
                assert all(s == 1 or s % t for s in sides), case  # ragged on every axis
                assert "x".join(map(str, sides)) in case.name and f"tile {t}" in case.title


def test_hidden_tiles_and_shapes_vary_across_runs() -> None:
    tiles = {c.params["tile_size"] for s in range(30) for c in hidden_cases(s, ["tiled_matmul"])}
    assert len(tiles) > 15  # not a handful of fixed tiles a file could special-case
    geoms = {
        (tuple(c.params["x_shape"]), c.params["kernel_size"], c.params["stride"])
        for s in range(30)
        for c in hidden_cases(s, ["im2col_conv2d", "col2im"])
    }
    assert len(geoms) > 100


def test_hidden_im2col_cases_grade_im2col_itself(tmp_path: Path) -> None:
    # right for every kernel size anything published uses (2, 3, 5), rows reversed for 1 and 4
    wrong = BASE.read_text() + (
        "\n_im2col = im2col\n"
        "def im2col(x, kernel_size, stride=1, padding=0):\n"
        "    cols = _im2col(x, kernel_size, stride, padding).data\n"
        "    return Tensor(cols[::-1] if kernel_size in (1, 4) else cols)\n"
    )
    path = tmp_path / "odd_kernels.py"
    path.write_text(wrong)
    assert run_part_a(str(path)).verdict == "PASS"  # nothing published can see it
    seed = next(
        s for s in range(1000)
        if any(c.group == "im2col" and c.params["kernel_size"] in (1, 4) for c in hidden_cases(s))
    )  # fmt: skip
    graded = run_part_a(str(path), grading=True, seed=seed)
    failed = [c for c in graded.hidden if c.group == "im2col" and c.status == "fail"]
    assert failed and all(c.blame == ["im2col"] and c.lesson for c in failed), graded.hidden
    assert graded.verdict == "NOT_PASSED" and "im2col" in graded.blamed()
    validate(to_json(graded, None))


def test_grading_run_grades_hidden_cases_and_reports_them_after_the_run() -> None:
    graded = run_part_a(str(BASE), grading=True)
    assert graded.verdict == "PASS" and graded.hidden
    expected = [c.name for c in hidden_cases(graded.seed)]
    assert [c.name for c in graded.hidden] == expected  # the recorded seed replays them
    assert all(c.status == "pass" for c in graded.hidden)
    doc = to_json(graded, None)
    validate(doc)
    assert [c["name"] for c in doc["hidden_cases"]] == expected
    assert all("hidden:" in c["title"] for c in doc["hidden_cases"])  # shapes, in words
    assert any(c["name"] == "own work" for c in doc["checks"])
    practice = run_part_a(str(BASE))
    assert practice.hidden == [] and not any(c.name == "own work" for c in practice.checks)


def test_a_hidden_case_failure_alone_fails_the_verdict(tmp_path: Path) -> None:
    # right on every published K, 1% off on any other: a bug no published case can see
    published = sorted(
        {c.params["k"] for c in CASES if c.group == "tiled_matmul"}
        | {k for _m, k, _n, _t in AUDIT_PROBLEMS}  # the practice audit's, published too
    )
    path = tmp_path / "k_limit.py"
    path.write_text(
        BASE.read_text()
        + f"\nPUBLISHED_K = {published!r}\n"
        + "_ok = tiled_matmul\n"
        + "def tiled_matmul(a, b, tile_size=64):\n"
        + "    out = _ok(a, b, tile_size)\n"
        + "    if _arr(a).shape[1] not in PUBLISHED_K:\n"
        + "        return Tensor(out.data * np.float32(1.01))\n"
        + "    return out\n"
    )
    assert run_part_a(str(path)).verdict == "PASS"
    graded = run_part_a(str(path), grading=True, seed=5)
    failed = [c for c in graded.hidden if c.status == "fail"]
    assert failed and graded.verdict == "NOT_PASSED"
    assert all(c.blame == ["tiled_matmul"] and c.lesson for c in failed)
    assert "hidden/" in render_part_a(graded)


# ---- every earlier mutant and correct alternative keeps its verdict in grading mode ----------
@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutants_are_caught_in_grading_mode(mutant, tmp_path: Path) -> None:
    path = tmp_path / f"{mutant.name}.py"
    path.write_text(mutate(mutant, BASE.read_text()))
    result = run_part_a(str(path), timeout=10.0, grading=True)
    assert result.verdict == "NOT_PASSED", mutant.name
    assert result.blamed() == mutant.blame


@pytest.mark.parametrize("name", sorted(ALTERNATIVES))
def test_alternatives_pass_in_grading_mode(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.py"
    path.write_text(BASE.read_text() + ALTERNATIVES[name])
    result = run_part_a(str(path), grading=True)
    bad = [
        (c.name, c.detail) for c in [*result.failing(), *result.hidden, *result.failing_checks()]
    ]
    assert result.verdict == "PASS", [b for b in bad if b]


def test_memory_limit_is_recorded_in_the_isolation_section() -> None:
    result = run_part_a(str(BASE), cases=["fused_gelu/zeros"], checks=False, memory_limit=1500)
    limits = result.isolation.get("limits")
    assert limits is not None and isinstance(limits["active"], bool)
    assert "1500" in limits["why"] or limits["active"]  # K1's Sandbox applies it and says so
    validate(to_json(result, None))


# ---- tito grade: grading mode by default, --practice turns it off ----------------------------
def _fixture(tmp_path: Path, params: str) -> Path:
    import nbformat

    from tinytorch.render.notebook_record import VERDICT_MIME

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    record = (
        "from tinytorch.render.notebook_record import show\n"
        f"show({{{VERDICT_MIME!r}: {{'verdict': 'PASS', 'grading': globals().get('GRADING'), "
        "'seed': 7, 'cases': [], 'hidden_cases': [{'name': 'hidden/x', 'status': 'pass'}], "
        "'checks': []}, 'text/plain': 'v'})\n"
    )
    nb.cells = [
        nbformat.v4.new_code_cell(params, metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(record),
    ]
    path = tmp_path / "fixture.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_tito_grade_injects_grading_unless_practice(tmp_path: Path) -> None:
    import nbformat

    nb, report, executed = (
        _fixture(tmp_path, "GRADING = False\n"),
        tmp_path / "r.json",
        tmp_path / "e.ipynb",
    )
    base = ["grade", str(nb), "--report", str(report), "--executed", str(executed)]
    assert main(base) == 0
    doc = json.loads(report.read_text())
    assert doc["grading"] is True and doc["warnings"] == [] and doc["seed"] == 7
    assert doc["hidden_cases"] == [{"name": "hidden/x", "status": "pass"}]
    assert "GRADING = True" in nbformat.read(executed, as_version=4).cells[1].source
    assert main([*base, "--practice"]) == 0
    doc = json.loads(report.read_text())
    assert doc["grading"] is False and doc["warnings"] == []
    assert "GRADING = False" in nbformat.read(executed, as_version=4).cells[1].source
    bare = _fixture(tmp_path, "IMPL = 'x'\n")  # a notebook that takes no GRADING
    assert main(["grade", str(bare), "--report", str(report)]) == 0
    doc = json.loads(report.read_text())
    assert any("practice mode" in w for w in doc["warnings"])


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_tito_grade_gives_the_gate_the_clis_budget_unless_told(tmp_path: Path) -> None:
    import nbformat

    from tinytorch.cli.milestone import DEFAULT_BUDGET_S

    nb, report, executed = (
        _fixture(tmp_path, "BUDGET = None\n"),
        tmp_path / "r.json",
        tmp_path / "e.ipynb",
    )
    base = ["grade", str(nb), "--report", str(report), "--executed", str(executed)]
    for extra, injected in (
        ([], f"BUDGET = {DEFAULT_BUDGET_S!r}"),
        (["--budget", "7"], "BUDGET = 7.0"),
        (["-p", "BUDGET=9"], "BUDGET = 9"),
    ):
        assert main([*base, *extra]) == 0
        assert injected in nbformat.read(executed, as_version=4).cells[1].source, extra
    assert main([*base, "--budget", "0"]) == 2  # a usage error, like tito milestone run's


def test_the_notebooks_gate_takes_the_budget_parameter() -> None:
    import nbformat

    from tinytorch.grading.grade import DEFAULT_NOTEBOOK, takes_parameter

    nb = nbformat.read(DEFAULT_NOTEBOOK, as_version=4)
    assert takes_parameter(nb, "BUDGET")
    gate = [c.source for c in nb.cells if "part_a = m07.run_part_a(" in c.source]
    assert len(gate) == 1 and "budget=BUDGET" in gate[0]


def test_the_packages_own_module_is_not_graded_as_its_own_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tinytorch.milestone07 import part_a

    real = part_a.open_sandbox

    class Reported:  # what K1's child says of tinytorch.perf.acceleration: the reference's code
        def __init__(self, box: object) -> None:
            self.box = box

        def __enter__(self) -> Reported:  # noqa: PYI034
            return self

        def __exit__(self, *exc: object) -> None:
            self.box.close()

        def start(self) -> dict:
            return {**self.box.start(), "origins": dict.fromkeys(part_a.FUNCTIONS, "reference")}

        def __getattr__(self, name: str) -> object:
            return getattr(self.box, name)

    monkeypatch.setattr(part_a, "open_sandbox", lambda impl, **kw: Reported(real(impl, **kw)))
    practice = run_part_a(cases=["fused_gelu/zeros"], checks=False)
    assert practice.verdict == "PASS" and practice.warnings == []  # a student edition's own file
    graded = run_part_a(cases=["fused_gelu/zeros"], checks=False, grading=True)
    assert graded.verdict == "NOT_PASSED"
    assert next(c for c in graded.checks if c.name == "own work").status == "fail"
