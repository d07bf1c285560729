"""Grading mode's own-work check without false alarms (issue 37 item 5).

The child fingerprints every staged file of a submission, not only its main file, and only the
reference's places whose solution is long enough to be one are fingerprinted: a body the stub's
hint spells out (a one-line call of a library or a helper) is anyone's. A copy of the reference
run from outside the submission's own text is still caught.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from tinytorch.milestone07 import own_work, run_part_a
from tinytorch.release import make_student_source, reference_path
from tinytorch.sandbox import spawn
from tinytorch.sandbox.child import fingerprint

BASE = Path(__file__).parent / "mutants" / "student_base.py"
# The two lines the student edition's hint for im2col_conv2d describes ("the forward of
# Im2colConv2dFunction without a graph: with no_grad(), apply it"), as a student writes them.
HINT_BODY = (
    "    with no_grad():\n"
    "        return Im2colConv2dFunction.apply(x_t, w_t, b_t, stride=g.stride, padding=g.padding)\n"
)
STUB_LINE = "    raise NotImplementedError("


def _segments(source: str, *names: str) -> str:
    """The source text of the top-level functions and classes `names` of `source`, in order."""
    tree = ast.parse(source)
    found = {
        node.name: ast.get_source_segment(source, node)
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef))
    }
    return "\n\n\n".join(found[name] for name in names) + "\n"


def _hinted_im2col_conv2d() -> str:
    """The student edition's im2col_conv2d (its argument checks kept) with the hint's body."""
    edition = make_student_source(reference_path(17).read_text())
    text = _segments(edition, "_as_float32", "im2col_conv2d")
    stub = next(line for line in text.splitlines(True) if line.startswith(STUB_LINE))
    assert "no_grad" in stub  # the hint this test follows is still the stub's
    return text.replace(stub, HINT_BODY)


HELPER_HEADER = """\
from __future__ import annotations

from typing import Any

import numpy as np

from tinytorch.core.autograd import Function, no_grad
from tinytorch.core.tensor import Tensor
from tinytorch.nn.geometry import conv_geometry

ArrayLike = Any


"""


def hint_folder(folder: Path) -> Path:
    """A folder submission: acceleration.py (matmul and GELU) imports the convolution from its
    helper conv.py, whose im2col_conv2d has the two-line body the stub's hint describes."""
    base = BASE.read_text()
    folder.mkdir(parents=True, exist_ok=True)
    helper = (
        HELPER_HEADER
        + _segments(base, "_arr", "im2col", "Im2colConv2dFunction", "col2im")
        + "\n\n"
        + _hinted_im2col_conv2d()
    )
    (folder / "conv.py").write_text(helper)
    main = (
        "import numpy as np\n\nfrom tinytorch.core.tensor import Tensor\n"
        "from conv import Im2colConv2dFunction, col2im, im2col, im2col_conv2d  # noqa: F401\n\n\n"
        + _segments(base, "_arr", "tiled_matmul", "fused_gelu")
    )
    (folder / "acceleration.py").write_text(main)
    return folder / "acceleration.py"


def _own_work(result: object) -> object:
    return next(c for c in result.checks if c.name == "own work")


# ---- the honest folder submission of the issue -------------------------------------------------
@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "no_namespaces"])
def test_a_helper_file_written_as_the_hint_says_passes_in_grading_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, namespaces: bool
) -> None:
    if not namespaces:  # the stage is fingerprinted the same way without a mount namespace
        monkeypatch.setenv(spawn.NAMESPACES_VAR, "0")
        monkeypatch.setattr(spawn, "_NAMESPACES", None)
        monkeypatch.setenv("TINYTORCH_TRUSTED_CODE", "1")  # else grading refuses (item 1)
    path = hint_folder(tmp_path / "alice")
    graded = run_part_a(str(path), grading=True)
    own = _own_work(graded)
    bad = [
        (c.name, c.detail) for c in [*graded.failing(), *graded.hidden, *graded.failing_checks()]
    ]
    assert own.status == "pass", own.detail
    assert graded.verdict == "PASS", [b for b in bad if b[1]]
    assert graded.passed() == 30 and all(c.ok for c in graded.checks)


def test_the_same_code_in_one_file_passes_too(tmp_path: Path) -> None:
    folder = hint_folder(tmp_path / "bob")
    conv = folder.parent / "conv.py"
    one = folder.parent / "one_file.py"
    helper = conv.read_text().replace("from __future__ import annotations\n", "")
    main = folder.read_text().replace(
        "from conv import Im2colConv2dFunction, col2im, im2col, im2col_conv2d  # noqa: F401\n", ""
    )
    one.write_text("from __future__ import annotations\n" + helper + "\n\n" + main)
    graded = run_part_a(str(one), grading=True)
    assert _own_work(graded).status == "pass" and graded.verdict == "PASS"


# ---- what the child fingerprints -----------------------------------------------------------------
def test_every_staged_file_is_the_submissions_own_text(tmp_path: Path) -> None:
    path = hint_folder(tmp_path / "carol")
    (path.parent / "notes.txt").write_text("not code")
    (path.parent / "broken.py").write_text("def (:\n")  # one bad file hides nothing else
    helper_only = fingerprint.source_fingerprints(str(path.parent / "conv.py"))
    assert helper_only  # the helper's functions
    folder = fingerprint.folder_fingerprints(str(path.parent))
    assert helper_only <= folder
    assert fingerprint.source_fingerprints(str(path)) <= folder
    assert not (helper_only <= fingerprint.source_fingerprints(str(path)))  # main alone: no


def test_folder_fingerprints_are_bounded(tmp_path: Path) -> None:
    for i in range(fingerprint.MAX_OWN_FILES + 5):
        (tmp_path / f"m{i:03d}.py").write_text(f"def f{i}():\n    return {i} + x{i}\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.py").write_text("def deep():\n    return y\n")
    (tmp_path / "link.py").symlink_to(tmp_path / "m000.py")
    found = fingerprint.folder_fingerprints(str(tmp_path))
    assert 0 < len(found) <= 2 * fingerprint.MAX_OWN_FILES  # module code + one function each


# ---- the length rule --------------------------------------------------------------------------------
def test_only_places_whose_solution_is_long_enough_are_fingerprinted() -> None:
    sizes = own_work.solution_sizes()
    places = set(own_work.reference_fingerprints().values())
    assert sizes["im2col_conv2d"] < own_work.MIN_SOLUTION_STATEMENTS  # `with no_grad(): return`
    assert sizes["vectorized_matmul"] < own_work.MIN_SOLUTION_STATEMENTS  # one np.matmul
    assert "im2col_conv2d" not in places and "vectorized_matmul" not in places
    long_enough = {p for p, n in sizes.items() if n >= own_work.MIN_SOLUTION_STATEMENTS}
    assert places == long_enough
    assert {"tiled_matmul", "fused_gelu", "im2col", "col2im"} <= places
    assert {"Im2colConv2dFunction.forward", "Im2colConv2dFunction.backward"} <= places


def test_a_short_region_counts_statements_not_lines() -> None:
    source = textwrap.dedent(
        """\
        def one_call(a):
            ### BEGIN SOLUTION
            # HINT: one call
            return helper(
                a,
            )
            ### END SOLUTION


        def wrapped(a):
            ### BEGIN SOLUTION
            with ctx():
                return helper(a)
            ### END SOLUTION


        class K:
            def method(self, a):
                ### BEGIN SOLUTION
                b = a + 1
                for i in range(3):
                    b += i
                return b
                ### END SOLUTION
        """
    )
    assert own_work.solution_sizes(source) == {"one_call": 1, "wrapped": 1, "K.method": 3}


def test_no_stub_of_the_student_edition_matches_a_reference_fingerprint(tmp_path: Path) -> None:
    """The student edition as handed out (every hint still a stub) is nobody's copy."""
    edition = tmp_path / "acceleration.py"
    edition.write_text(make_student_source(reference_path(17).read_text()))
    prints = own_work.reference_fingerprints()
    assert not set(prints) & fingerprint.source_fingerprints(str(edition))


# ---- a copy of the reference is still caught -------------------------------------------------------
COPY_AT_RUN_TIME = """
import importlib.util, os, shutil, tinytorch
src = os.path.join(os.path.dirname(tinytorch.__file__), "perf", "acceleration.py")
shutil.copy(src, "kernels_elsewhere.py")
spec = importlib.util.spec_from_file_location("kernels_elsewhere", "kernels_elsewhere.py")
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
tiled_matmul, fused_gelu, im2col, col2im, im2col_conv2d = (
    mod.tiled_matmul, mod.fused_gelu, mod.im2col, mod.col2im, mod.im2col_conv2d
)
Im2colConv2dFunction = mod.Im2colConv2dFunction
"""


def test_a_folder_submission_copying_the_reference_at_run_time_is_still_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a mount namespace the child can read the reference's source: a copy written at run
    time, beside honest helper files, is not the submission's own text."""
    monkeypatch.setenv(spawn.NAMESPACES_VAR, "0")
    monkeypatch.setattr(spawn, "_NAMESPACES", None)
    # grading without namespaces is refused unless the code is declared trusted (issue 37 item 1)
    monkeypatch.setenv("TINYTORCH_TRUSTED_CODE", "1")
    folder = tmp_path / "dave"
    hint_folder(folder)
    (folder / "acceleration.py").write_text(COPY_AT_RUN_TIME)
    graded = run_part_a(str(folder / "acceleration.py"), grading=True)
    own = _own_work(graded)
    assert graded.verdict == "NOT_PASSED" and own.status == "fail"
    assert "runs a copy of the reference's" in own.detail and "tiled_matmul" in own.detail


def test_reference_text_in_a_helper_file_gets_the_verdict_it_gets_in_the_main_file(
    tmp_path: Path,
) -> None:
    """A helper file is the submission's own text, as its main file is: the reference's code
    written into either is the same question (similarity's, in a class run), with the same
    verdict here. Before, the helper's copy alone was 'uses the bundled reference solution'."""
    pasted = reference_path(17).read_text()
    one = tmp_path / "one" / "acceleration.py"
    one.parent.mkdir()
    one.write_text(pasted)
    folder = tmp_path / "two"
    folder.mkdir()
    (folder / "kernels.py").write_text(pasted)
    (folder / "acceleration.py").write_text("from kernels import *  # noqa: F403\n")
    in_main = run_part_a(str(one), grading=True, cases=["fused_gelu"])
    in_helper = run_part_a(str(folder / "acceleration.py"), grading=True, cases=["fused_gelu"])
    assert _own_work(in_helper).status == _own_work(in_main).status == "pass"
    assert in_helper.verdict == in_main.verdict
