"""Similarity on what the code does, not how it is spelled (issue 37, item 7).

Red-teaming: each disguise below got PASS 60/60 in grading mode with no similarity flag, while a
verbatim copy was flagged 1.000: every name in redundant parentheses (the bytecode is the
reference's), integer literals in hex, and three of the reference's functions copied verbatim
into a classmate's own file (78% of the reference's tokens, under the whole-file threshold).
Each is flagged now, and the flag names its kind; honest, independently written files are not.
"""

from __future__ import annotations

import ast
import io
import re
import time
import tokenize
import types
from pathlib import Path

import pytest

from tinytorch.classroom.similarity import (
    FUNC_MIN,
    KINDS,
    REFERENCE,
    Flag,
    normalise,
    similarity_flags,
    without_starter,
)
from tinytorch.release import make_student_source, reference_path

ROOT = Path(__file__).resolve().parents[1]
HONEST = {  # written independently of the reference and of each other
    "alice": ROOT / "tests" / "mutants" / "student_base.py",
    "bob": ROOT / "tests" / "classroom" / "bob.py",
}
REF = reference_path(17).read_text(encoding="utf-8")
STARTER = make_student_source(REF)
COPIED = ("tiled_matmul", "im2col", "col2im")  # the three functions of the red-team round


def _names_in_parentheses(source: str) -> str:
    """Every name (outside f-strings) wrapped in redundant parentheses: `(a)[(i)]`."""
    tree = ast.parse(source)
    skip = {id(n) for f in ast.walk(tree) if isinstance(f, ast.JoinedStr) for n in ast.walk(f)}
    skip |= {id(a.target) for a in ast.walk(tree) if isinstance(a, ast.AnnAssign)}  # `(x): int`
    spans = sorted(
        (n.lineno, n.col_offset, n.end_col_offset)
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and id(n) not in skip and n.lineno == n.end_lineno
    )
    lines = source.splitlines(keepends=True)
    for row, start, end in reversed(spans):
        line = lines[row - 1]
        lines[row - 1] = f"{line[:start]}({line[start:end]}){line[end:]}"
    return "".join(lines)


def _hex_literals(source: str) -> str:
    """Every decimal integer literal written in hex: `64` is `0x40`."""
    lines = source.splitlines(keepends=True)
    toks = tokenize.generate_tokens(io.StringIO(source).readline)
    numbers = [t for t in toks if t.type == tokenize.NUMBER and t.string.isdigit()]
    for t in reversed(numbers):
        (row, start), (_, end) = t.start, t.end
        lines[row - 1] = lines[row - 1][:start] + hex(int(t.string)) + lines[row - 1][end:]
    return "".join(lines)


def _renamed(source: str) -> str:
    """Every local name and argument of every function renamed (`x` is `v_x`)."""
    tree = ast.parse(source)
    local: set[str] = set()
    for f in ast.walk(tree):
        if isinstance(f, ast.FunctionDef):
            local |= {a.arg for a in ast.walk(f.args) if isinstance(a, ast.arg)}
            local |= {n.id for n in ast.walk(f) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}  # fmt: skip
    local -= {"self"}
    return re.sub(r"\b(" + "|".join(sorted(local, key=len, reverse=True)) + r")\b", r"v_\1", source)


def _functions(source: str, names: tuple[str, ...]) -> str:
    tree = ast.parse(source)
    found = [
        ast.get_source_segment(source, f) for f in tree.body if getattr(f, "name", "") in names
    ]
    assert len(found) == len(names)
    return "\n\n\n".join(found) + "\n"


def _flags(sources: dict[str, str]) -> list[Flag]:
    return similarity_flags(sources, REF, STARTER)


def _against_reference(flags: list[Flag]) -> dict[str, Flag]:
    return {f.a: f for f in flags if f.b == REFERENCE}


def test_the_disguises_run_as_the_reference_does() -> None:
    """The disguised files are the reference's code: parentheses leave its bytecode as it was."""
    parens, hexed = _names_in_parentheses(REF), _hex_literals(REF)
    assert parens.count("(") > REF.count("(") + 500 and "0x40" in hexed

    def bytecode(code: types.CodeType) -> list[bytes]:
        inner = [c for c in code.co_consts if isinstance(c, types.CodeType)]
        return [code.co_code, *(b for c in inner for b in bytecode(c))]

    assert bytecode(compile(parens, "ref", "exec")) == bytecode(compile(REF, "ref", "exec"))


def test_names_in_parentheses_are_flagged_verbatim() -> None:
    flags = _against_reference(_flags({"mallory": _names_in_parentheses(REF)}))
    assert flags["mallory"].score >= 0.99 and flags["mallory"].kind == "verbatim"


def test_hex_literals_are_flagged_verbatim() -> None:
    flags = _against_reference(_flags({"mallory": _hex_literals(REF)}))
    assert flags["mallory"].score >= 0.99 and flags["mallory"].kind == "verbatim"


def test_renamed_locals_are_flagged_renamed() -> None:
    renamed = _renamed(REF)
    assert renamed != REF
    flags = _flags({"mallory": renamed, "trudy": _hex_literals(renamed), "eve": REF})
    assert _against_reference(flags)["mallory"].kind == "renamed"
    assert _against_reference(flags)["eve"].kind == "verbatim"
    pairs = {(f.a, f.b): f.kind for f in flags if f.b != REFERENCE}
    assert pairs == {("mallory", "trudy"): "verbatim", ("eve", "mallory"): "renamed",
                     ("eve", "trudy"): "renamed"}  # fmt: skip


def test_reference_functions_in_a_classmates_own_file_are_flagged_contained() -> None:
    """Bob's own file, then three reference functions copied verbatim: 78% of the reference's
    own code is in it, and the file as a whole is far from the threshold."""
    copied = _functions(REF, COPIED)
    cheat = HONEST["bob"].read_text() + "\n\n" + copied
    flags = _flags({"mallory": cheat, "alice": HONEST["alice"].read_text()})
    got = _against_reference(flags)
    assert set(got) == {"mallory"}
    assert got["mallory"].kind == "contained" and got["mallory"].score >= 0.9
    assert got["mallory"].functions == list(COPIED)
    assert got["mallory"].a_lines  # the copied regions are marked for the side by side


def _line_added_at_the_top(function: str) -> str:
    """A statement with a new name before the function's first (a name numbered by its first use
    would shift every number after it)."""
    lines = function.splitlines(keepends=True)
    at = ast.parse(function).body[0].body[1].lineno - 1  # after the docstring
    return "".join([*lines[:at], "    _unused = None\n", *lines[at:]])


def test_one_reference_function_is_enough_and_its_disguises_do_not_hide_it() -> None:
    one = _functions(REF, ("col2im",))
    for name, text in {
        "plain": one,
        "parens": _names_in_parentheses(one),
        "hex": _hex_literals(one),
        "renamed": _renamed(one),
        "a line added": _line_added_at_the_top(_renamed(one)),
    }.items():
        cheat = HONEST["alice"].read_text() + "\n\n" + text
        got = _against_reference(_flags({"mallory": cheat}))
        assert got["mallory"].functions == ["col2im"], name
        assert got["mallory"].kind == "contained", name


def test_a_classmates_function_copied_into_another_file_is_flagged_contained() -> None:
    """Bob's tiled_matmul and col2im, renamed and in parentheses, inside Alice's whole file."""
    bob = HONEST["bob"].read_text()
    taken = _names_in_parentheses(_renamed(_functions(bob, ("tiled_matmul", "col2im"))))
    sources = {"bob": bob, "mallory": HONEST["alice"].read_text() + "\n\n" + taken}
    (flag,) = _flags(sources)
    assert (flag.a, flag.b, flag.kind) == ("bob", "mallory", "contained")
    assert {"bob: tiled_matmul", "bob: col2im"} <= set(flag.functions)  # and mallory's copies


def test_honest_independent_solutions_are_not_flagged() -> None:
    """Two independent solutions, the course-convention module and the reference: no function of
    one is inside another, though all are NumPy code of the same five kernels."""
    sources = {name: path.read_text() for name, path in HONEST.items()}
    sources["carol"] = (ROOT / "tests" / "course" / "course_module.py").read_text()
    assert _flags(sources) == []


def test_a_tiny_reference_function_copied_alone_is_not_a_flag() -> None:
    """A function under FUNC_MIN tokens (a one-line helper, im2col_conv2d's call of im2col) is
    how anyone would write it: copied alone it is not flagged."""
    tiny = _functions(REF, ("im2col_conv2d",))
    own = without_starter(normalise(tiny), normalise(STARTER))  # the signature is the starter's
    assert 0 < len(own.norm) < FUNC_MIN
    assert _flags({"alice": HONEST["alice"].read_text() + "\n\n" + tiny}) == []


def test_formatting_docstrings_and_comments_do_not_count() -> None:
    a = 'def f(x, y):\n    """Doc."""\n    # note\n    return (x + 0x1) * y[(0)]\n'
    b = "def f(x,y): return (x+1)*y[0]  # other\n"
    assert normalise(a).norm == normalise(b).norm
    assert normalise(a).norm == normalise(b.replace("x", "p")).norm  # names are ID


def test_code_that_does_not_parse_falls_back_to_tokens_block_by_block() -> None:
    """A helper the child never imports may not parse: the rest is still read through the AST,
    and the broken block by tokenize, which spells parentheses and numbers the same way."""
    good = "def g(a):\n    return (a) * 0x10\n"
    broken = "def h(:\n    return (b) * 16\n"
    toks = normalise(good + broken)
    assert toks.norm[: len(normalise(good).norm)] == normalise(good).norm
    assert toks.norm.count("16") == 2 and "(" in toks.norm  # h's call parenthesis kept
    assert "cannot tokenize" in toks.error and [f[0] for f in toks.funcs] == ["g", "h"]


def test_a_statement_unparse_cannot_print_is_read_by_tokenize() -> None:
    """An expression nested past the recursion limit of `ast.unparse` inside a copied function
    does not hide the function (nor stop similarity)."""
    deep = "    _ = " + " + ".join(["1"] * 2000) + "\n"
    col2im = _functions(REF, ("col2im",))
    lines = col2im.splitlines(keepends=True)
    at = ast.parse(col2im).body[0].body[1].lineno - 1  # after the docstring
    cheat = HONEST["alice"].read_text() + "\n\n" + "".join(lines[:at] + [deep] + lines[at:])
    ast.parse(cheat)  # it runs
    got = _against_reference(_flags({"mallory": cheat}))
    assert got["mallory"].functions == ["col2im"]


def test_warnings_about_the_students_code_are_not_printed(capfd: pytest.CaptureFixture) -> None:
    normalise('def f():\n    return "\\d" + "\\q"\n' * 100)
    assert capfd.readouterr().err == ""


def test_normalise_wants_text() -> None:
    with pytest.raises(TypeError, match="source"):
        normalise(b"x = 1\n")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="mallory"):
        similarity_flags({"mallory": b"x = 1\n"}, REF, STARTER)  # type: ignore[dict-item]


def test_every_flag_has_a_known_kind() -> None:
    with pytest.raises(ValueError, match="kind"):
        Flag("a", "b", 1.0, "copied")
    assert KINDS == ("verbatim", "renamed", "contained")


def test_a_class_of_copies_and_disguises_stays_fast() -> None:
    """60 students (20 verbatim, 20 in parentheses, 20 renamed, each with its own comment): every
    pair flagged with its kind, in a few seconds (the bench runs 200, benchmarks/)."""
    texts = {"v": REF, "p": _names_in_parentheses(REF), "r": _renamed(REF)}
    sources = {f"{k}{i:02d}": f"# student {k}{i}\n{t}" for k, t in texts.items() for i in range(20)}
    start = time.process_time()
    flags = _flags(sources)
    assert time.process_time() - start < 20.0  # CPU seconds: about 2 on an idle machine
    assert len([f for f in flags if f.b != REFERENCE]) == 60 * 59 // 2
    kinds = {(f.a[0], f.b[0]): f.kind for f in flags if f.b != REFERENCE}
    assert kinds[("p", "v")] == kinds[("p", "p")] == "verbatim"
    assert kinds[("p", "r")] == kinds[("r", "v")] == "renamed"


def test_the_class_report_names_each_flags_kind() -> None:
    from tinytorch.classroom.class_report import similarity_html

    cheat = HONEST["bob"].read_text() + "\n\n" + _functions(REF, COPIED)
    sources = {"mallory": cheat, "trudy": _hex_literals(REF), "eve": _renamed(REF)}
    flags = _flags(sources)
    page = similarity_html(flags, sources, REF)
    assert f"<td>mallory</td><td>{REFERENCE}</td>" in page
    assert "<td>contained (tiled_matmul, im2col, col2im)</td>" in page
    assert page.count("<td>verbatim</td>") == 1 and page.count("<td>renamed</td>") == 2
    assert "(score 1.000, verbatim)</h3>" in page and "<th>kind</th>" in page
