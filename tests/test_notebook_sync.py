"""The notebook pair: the py:percent source and the committed .ipynb agree, and the .ipynb is stripped."""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
IPYNB = ROOT / "notebooks" / "07_custom_kernels.ipynb"
PY = ROOT / "notebooks" / "07_custom_kernels.py"


def _cells(nb):
    return [(c.cell_type, c.source.strip(), sorted(c.metadata.get("tags", []))) for c in nb.cells]


SYNC = ".venv/bin/jupytext --to ipynb --update notebooks/07_custom_kernels.py"


def test_ipynb_matches_its_py_percent_source():
    from_py = jupytext.read(PY)
    from_ipynb = nbformat.read(IPYNB, as_version=4)
    assert _cells(from_ipynb) == _cells(from_py), (
        f"notebooks/07_custom_kernels.ipynb is out of sync: run `{SYNC}` and commit both"
    )


def test_the_shipped_notebook_pairs_with_no_text_file():
    """Jupytext's server extension writes a paired `07_custom_kernels.py` beside a notebook whose
    metadata (or the text file's header) names `formats`: into a student's folder, on every
    autosave. The pairing is the developers' command (SYNC), never the files' metadata."""
    nb = nbformat.read(IPYNB, as_version=4)
    assert "formats" not in nb.metadata.get("jupytext", {}), nb.metadata["jupytext"]
    assert "formats" not in jupytext.read(PY).metadata.get("jupytext", {})
    assert not any((ROOT / d / name).exists() for d in ("", "notebooks")
                   for name in ("jupytext.toml", ".jupytext", "jupytext.yml"))  # fmt: skip


def test_the_notebook_holds_what_jupyterlab_would_add_on_open():
    """JupyterLab marks a notebook modified when opening it changes the model: it sets
    metadata.language_info from the kernel (unless equal), and upgrades an nbformat below 4.5
    (adding cell ids). The committed file already holds both, as ipykernel reports them. Only
    the Python version can differ: a student whose kernel runs another Python than the one the
    notebook was saved with sees that one change (no metadata can hold every version)."""
    from ipykernel.ipkernel import IPythonKernel

    nb = nbformat.read(IPYNB, as_version=4)
    assert (nb.nbformat, nb.nbformat_minor) == (4, 5)
    assert all(cell.get("id") for cell in nb.cells)
    info = dict(nb.metadata.get("language_info", {}))
    assert re.fullmatch(r"3\.\d+\.\d+", info.pop("version", "")), "a Python version"
    assert info == {k: v for k, v in IPythonKernel.language_info.items() if k != "version"}
    assert nb.metadata.get("kernelspec") == {
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "name": "python3",
    }


def test_the_top_links_to_the_verdict_heading():
    """Restart and Run All leaves the view at the top: the first cell links to the verdict."""
    cells = jupytext.read(PY).cells
    link = re.search(r"\]\(#([^)]+)\)", cells[0].source)
    assert link, cells[0].source
    headings = [
        line.lstrip("#").strip().replace(" ", "-")  # JupyterLab's anchor for a heading
        for c in cells
        if c.cell_type == "markdown"
        for line in c.source.splitlines()
        if line.startswith("#")
    ]
    assert link.group(1) in headings
    title = link.group(1).replace("-", " ")
    (at,) = [
        i for i, c in enumerate(cells) if c.cell_type == "markdown" and f"# {title}" in c.source
    ]
    assert any("verdict_bundle" in c.source for c in cells[at:] if c.cell_type == "code")


def test_the_full_gate_shows_people_what_the_sections_did_not():
    """The gate's failing rows were the group walks' table again: people see gate_html."""
    code = [c.source for c in jupytext.read(PY).cells if c.cell_type == "code"]
    (gate,) = [c for c in code if 'stage="gate"' in c]
    assert '"text/html": gate_html(part_a)' in gate


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
