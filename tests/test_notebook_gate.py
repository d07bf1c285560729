"""The notebook's full gate says what the group walks above it did not: no failing row twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinytorch import milestone07 as m07
from tinytorch.milestone07.results import PartAResult
from tinytorch.render.notebook_gate import gate_html
from tinytorch.render.notebook_tables import cases_html

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "tests" / "mutants" / "student_base.py"


@pytest.fixture(scope="module")
def ragged_k(tmp_path_factory: pytest.TempPathFactory) -> PartAResult:
    """The browser test's bug: the ragged last K tile dropped (15 of 18 tiled_matmul cases)."""
    src = BASE.read_text()
    old = "for k0 in range(0, K, tile_size)"
    assert src.count(old) == 1
    bug = tmp_path_factory.mktemp("gate") / "acceleration.py"
    bug.write_text(src.replace(old, "for k0 in range(0, K - K % tile_size, tile_size)"))
    return m07.run_part_a(str(bug), seed=0)


def test_the_gate_lists_no_failing_row_the_walk_showed(ragged_k: PartAResult) -> None:
    failing = [c for c in ragged_k.cases if c.status != "pass"]
    assert len(failing) >= 10  # the table that was shown twice
    walk = cases_html([c for c in ragged_k.cases if c.group == "tiled_matmul"], lead=False)
    gate = gate_html(ragged_k)
    assert all(f"<code>{c.name}</code>" in walk for c in failing)  # section 1 shows them
    assert not any(f"<code>{c.name}</code><br>" in gate for c in failing)  # the gate does not
    assert "tiled_matmul</code> 3/18 pass: the failing cases, their lesson and drawing are in " \
        "section 1 above" in gate  # fmt: skip
    assert "<code>fused_gelu</code> 4/4 pass</li>" in gate
    assert "Lessons" not in gate  # each lesson was said in its section


def test_a_grading_run_lists_its_own_rows(ragged_k: PartAResult) -> None:
    """A grading run draws other data than the walks: its failing rows are its own news."""
    ragged_k.grading = True
    try:
        gate = gate_html(ragged_k)
    finally:
        ragged_k.grading = False
    assert all(f"<code>{c.name}</code>" in gate for c in ragged_k.cases if c.status != "pass")
