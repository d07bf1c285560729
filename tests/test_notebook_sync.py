"""The notebook pair: the py:percent source and the committed .ipynb agree, and the .ipynb is stripped."""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
IPYNB = ROOT / "notebooks" / "07_custom_kernels.ipynb"
PY = ROOT / "notebooks" / "07_custom_kernels.py"


def _cells(nb):
    return [(c.cell_type, c.source.strip(), sorted(c.metadata.get("tags", []))) for c in nb.cells]


def test_ipynb_matches_its_py_percent_source():
    from_py = jupytext.read(PY)
    from_ipynb = nbformat.read(IPYNB, as_version=4)
    assert _cells(from_ipynb) == _cells(from_py), (
        "notebooks/07_custom_kernels.ipynb is out of sync: run "
        "`jupytext --sync notebooks/07_custom_kernels.py` (or --to ipynb) and commit both"
    )
    assert from_ipynb.metadata.get("jupytext", {}).get("formats") == "ipynb,py:percent"


def test_ipynb_is_committed_without_outputs():
    nb = nbformat.read(IPYNB, as_version=4)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"cell {i} has outputs"
            assert cell.execution_count is None, f"cell {i} has an execution count"
    assert "widgets" not in nb.metadata


@pytest.mark.parametrize("tag", ["setup", "parameters", "summary"])
def test_tagged_cells_exist_once(tag):
    nb = nbformat.read(IPYNB, as_version=4)
    assert sum(tag in c.metadata.get("tags", []) for c in nb.cells) == 1


def test_notebook_calls_the_package_rather_than_holding_logic():
    nb = nbformat.read(IPYNB, as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert not any("def tiled_matmul" in s or "np.matmul" in s for s in code)
    assert max(len(s.splitlines()) for s in code) <= 25


def test_the_notebook_says_how_to_rerun_part_b_alone():
    cells = jupytext.read(PY).cells
    text = [c.source for c in cells if c.cell_type == "markdown" and "Part B" in c.source]
    assert any(
        "To rerun Part B alone" in t and "run_part_b(IMPL, part_a=part_a)" in t for t in text
    )
    code = [c.source for c in cells if c.cell_type == "code"]
    assert any("part_a = m07.run_part_a(" in c for c in code)  # what that call reuses
    assert any("run_part_b(IMPL" in c for c in code)  # "run the next cell again"
