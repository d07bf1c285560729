"""Grading mode (issue 9 item 7): a fresh secret seed per run, recorded; practice stays seed 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tinytorch.cli.main import main
from tinytorch.milestone07 import SCHEMA_VERSION, run_part_a, to_json, validate
from tinytorch.milestone07.part_a import resolve_seed

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
    assert doc["schema_version"] == SCHEMA_VERSION == 2
    assert doc["grading"] is True and doc["seed"] == graded.seed
    assert isinstance(doc["hidden_cases"], list) and isinstance(doc["warnings"], list)
    assert isinstance(doc["isolation"], dict)


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
