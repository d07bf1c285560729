"""The student edition of Module 17: imports, keeps every signature, raises NotImplementedError."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys
from pathlib import Path

import numpy as np
import pytest

from tinytorch.cli.main import main
from tinytorch.perf import acceleration
from tinytorch.release import BEGIN, END, make_student_source, write_student_edition
from tinytorch.sandbox.child.exports import stub_places

PUBLIC = [
    "vectorized_matmul",
    "tiled_matmul",
    "unfused_gelu",
    "fused_gelu",
    "im2col",
    "col2im",
    "im2col_conv2d",
]
STUBBED = [*PUBLIC, "Im2colConv2dFunction.forward", "Im2colConv2dFunction.backward"]


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and annotations look the module up by name
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    path = write_student_edition(17, out)
    assert path == out / "acceleration.py"
    return load(path, "student_acceleration"), path.read_text()


def test_reference_marks_its_solutions():
    source = Path(acceleration.__file__).read_text()
    assert source.count(BEGIN) == source.count(END) >= 5
    for name in ("tiled_matmul", "fused_gelu"):
        assert BEGIN in inspect.getsource(getattr(acceleration, name)), name


def test_student_edition_keeps_signatures_and_docstrings(student):
    module, _ = student
    for name in PUBLIC:
        ours, theirs = getattr(acceleration, name), getattr(module, name)
        assert str(inspect.signature(theirs)) == str(inspect.signature(ours)), name
        assert inspect.getdoc(theirs) == inspect.getdoc(ours), name
    assert module.__doc__ == acceleration.__doc__


def test_student_edition_keeps_imports(student):
    _, text = student
    reference = Path(acceleration.__file__).read_text()

    def imports(src: str) -> list[str]:
        return [
            ast.unparse(node)
            for node in ast.parse(src).body
            if isinstance(node, (ast.Import, ast.ImportFrom))
        ]

    assert imports(text) == imports(reference)


def test_student_edition_has_no_solution_code(student):
    _, text = student
    assert not any(line.strip() in (BEGIN, END) for line in text.splitlines())
    # Lines only the solutions contain.
    for fragment in ("c_tile += buf", "np.exp(y, out=y)", "np.copyto(cols_t", "window +="):
        assert fragment not in text, fragment
    assert text.count("raise NotImplementedError(") == Path(
        acceleration.__file__
    ).read_text().count(BEGIN)


def test_student_functions_raise_not_implemented_with_a_hint(student):
    module, _ = student
    x = np.ones((1, 2, 5, 5), dtype=np.float32)
    w = np.ones((3, 2, 3, 3), dtype=np.float32)
    calls = {
        "tiled_matmul": lambda: module.tiled_matmul(np.ones((3, 4)), np.ones((4, 2)), 2),
        "fused_gelu": lambda: module.fused_gelu(np.ones(3)),
        "im2col": lambda: module.im2col(x, 3),
        "col2im": lambda: module.col2im(np.ones((9, 18)), (1, 2, 5, 5), 3),
        "im2col_conv2d": lambda: module.im2col_conv2d(x, w),
    }
    for name, call in calls.items():
        with pytest.raises(NotImplementedError) as info:
            call()
        assert str(info.value).strip(), f"{name}: NotImplementedError without a hint"


def test_student_edition_still_validates_arguments(student):
    module, _ = student
    with pytest.raises(ValueError, match="tile_size"):
        module.tiled_matmul(np.ones((2, 2)), np.ones((2, 2)), 0)
    with pytest.raises(ValueError, match="stride"):
        module.im2col(np.ones((1, 1, 4, 4)), 3, stride=0)


SAMPLE = '''"""Doc."""

import numpy as np


def f(x: int) -> int:
    """Twice x."""
    y = x
    ### BEGIN SOLUTION
    # HINT: multiply
    #   by two
    return 2 * y  # not part of the hint
    ### END SOLUTION


def g() -> None:
    if True:
        ### BEGIN SOLUTION
        pass
        ### END SOLUTION
'''


def test_generator_on_a_small_source(tmp_path):
    text = make_student_source(SAMPLE)
    assert "raise NotImplementedError('multiply by two')" in text
    assert "        raise NotImplementedError('implement g (see its docstring)')" in text
    assert "return 2 * y" not in text
    assert 'def f(x: int) -> int:\n    """Twice x."""\n    y = x\n' in text
    path = tmp_path / "sample.py"
    path.write_text(text)
    module = load(path, "sample_student")
    with pytest.raises(NotImplementedError, match="multiply by two"):
        module.f(1)


@pytest.mark.parametrize(
    "source, match",
    [
        (f"def f():\n    {BEGIN}\n    return 1\n", "no matching"),
        (f"def f():\n    {END}\n    return 1\n", "without a matching"),
        (f"def f():\n    {BEGIN}\n    {BEGIN}\n    {END}\n", "inside the region"),
        (f"def f():\n{BEGIN}\n    pass\n{END}\n", "not valid Python"),  # stub not indented
    ],
)
def test_generator_rejects_broken_markers_naming_the_line(source, match):
    with pytest.raises(ValueError, match=match):
        make_student_source(source, origin="sample.py")


def test_cli_writes_the_student_edition(tmp_path, capsys):
    out = tmp_path / "dist" / "student"
    assert main(["release", "17", "--out", str(out)]) == 0
    written = out / "acceleration.py"
    assert written.is_file()
    assert str(written) in capsys.readouterr().out
    assert "raise NotImplementedError(" in written.read_text()


@pytest.mark.parametrize(
    "argv", [["release", "5", "--out", "x"], ["release", "seventeen", "--out", "x"]]
)
def test_cli_rejects_unknown_modules(tmp_path, capsys, argv):
    argv = [a if a != "x" else str(tmp_path / "x") for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "module" in err
    assert not (tmp_path / "x").exists()


def test_cli_requires_out(capsys):
    assert main(["release", "17"]) == 2
    assert "--out" in capsys.readouterr().err


def test_stubs_sit_in_the_public_functions_and_methods_only(student):
    module, text = student
    assert sorted(stub_places(text)) == sorted(STUBBED)
    assert stub_places(Path(acceleration.__file__).read_text()) == []
    # no private helper holds a region: each public place raises by itself
    for name in ("forward", "backward"):
        src = inspect.getsource(getattr(module.Im2colConv2dFunction, name))
        assert "raise NotImplementedError(" in src, name
    with pytest.raises(NotImplementedError):
        module.Im2colConv2dFunction.apply(
            np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 2, 2), np.float32), None
        )


def test_a_hint_never_repeats_hint(student):
    _, text = student
    stubs = [line for line in text.splitlines() if line.strip().startswith("raise NotImpl")]
    assert len(stubs) == len(STUBBED)
    assert all("HINT" not in line for line in stubs), stubs
    two_lines = "def f():\n    ### BEGIN SOLUTION\n    # HINT: one\n    # HINT: two\n    pass\n"
    out = make_student_source(two_lines + "    ### END SOLUTION\n")
    assert "raise NotImplementedError('one two')" in out


def test_stub_places_counts_only_unconditional_raises():
    source = (
        "class A:\n    def f(self):\n        x = 1\n        raise NotImplementedError\n"
        "    def g(self):\n        if self:\n            raise NotImplementedError('maybe')\n"
        "def h():\n    raise NotImplementedError('todo')\n"
        "def k():\n    raise ValueError('no')\n"
    )
    assert stub_places(source) == ["A.f", "h"]
    assert stub_places("def broken(:\n") == []
