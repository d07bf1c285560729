"""Every bash block of README.md and docs/*.md, run as written, in order (or its documented
equivalent); every command in their prose (an inline `tito ...` or `python ...` span) written with
.venv/bin/; every relative link pointing at a file (and heading) that exists.

Kept fast by reusing the environment the tests already run in, instead of building new venvs:
- `python3 -m venv .venv` and `.venv/bin/pip install ...` are what CI (or command 2) already did
  to make this environment, so they are checked to be exactly the README's, and not rerun;
- `.venv/bin/X` runs as this interpreter's `bin/X` (the test venv is the README's .venv in CI);
- `python -m pytest ...` runs as `pytest ... --collect-only` (the suite cannot run itself);
- `tito milestone run 07` and the milestone script run with the hidden `--part-b-sizes quick`
  (Part B's smaller problems; the same code path, a third of the time);
- `jupyter lab NOTEBOOK` runs as `jupyter lab --version` (a server would never return), and
  NOTEBOOK must exist;
- a command line written on several pages (the README's first steps repeat docs/students.md's)
  runs once;
- the instructor blocks (grading, the class grader, the Gradescope zip) run in a scratch folder
  holding submissions/alice/acceleration.py (a correct student module), as in a grader's folder.
The tests that run commands are marked slow; the others (links, spans, snippets) take a second.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
STUDENT = ROOT / "tests" / "mutants" / "student_base.py"
SETUP = (  # what CI did to build this environment: checked, not rerun
    "python3 -m venv .venv",
    ".venv/bin/pip install -e .",
    ".venv/bin/pip install -q torch==2.13.0",
    ".venv/bin/pip install -q -e '.[dev,torch,triton]'",
    ".venv/bin/pip install -q jupyterlab",
    ".venv/bin/pip install -e '.[nbgrader]'",  # in `dev` too
)
SHELL_WORDS = ("mkdir", "for ", "name=", "echo ", "done", "export ")  # plain shell, not ours

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

pytestmark = [pytest.mark.timeout(600)]


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _tokens(page: Path) -> list:
    return MarkdownIt().parse(page.read_text(encoding="utf-8"))


def fences(info: str) -> list[tuple[Path, str]]:
    """Every page's ```INFO fences, as (page, content): the README first, then docs/ by name."""
    return [
        (page, t.content)
        for page in PAGES
        for t in _tokens(page)
        if t.type == "fence" and t.info.strip() == info
    ]


def bash_blocks() -> list[str]:
    """The ```bash fences of the README and docs/*.md, in order."""
    return [content for _, content in fences("bash")]


def test_the_docs_pages_exist_and_the_readme_links_each():
    docs = [p for p in PAGES if p.parent.name == "docs"]
    assert len(docs) >= 5, f"docs/ holds {[_name(p) for p in docs]}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    unlinked = [_name(p) for p in docs if f"]({_name(p)})" not in readme]
    assert not unlinked, f"README links none of {unlinked}"
    assert len(readme.splitlines()) <= 160, "README: a front page; the details go to docs/"


def commands(block: str) -> list[str]:
    """The block's shell lines: comments dropped, backslash continuations joined."""
    joined = block.replace("\\\n", " ")
    lines = [re.sub(r"\s+#.*$", "", ln).strip() for ln in joined.splitlines()]
    return [" ".join(ln.split()) for ln in lines if ln and not ln.startswith("#")]


def equivalent(line: str) -> str:
    """The command this test runs for one README line (see the module docstring)."""
    parts = [p.strip() for p in line.split("&&")]
    kept = [p for p in parts if p not in SETUP]
    out = []
    for part in kept:
        if re.match(r"\.venv/bin/python -m pytest\b", part):
            part += " --collect-only -q tests/test_readme.py"
        m = re.match(r"\.venv/bin/jupyter lab (\S+)$", part)
        if m:
            assert (ROOT / m.group(1)).is_file(), f"README opens {m.group(1)}, which is missing"
            part = ".venv/bin/jupyter lab --version"
        if "milestone run 07" in part or "01_custom_kernels.py" in part:
            part += " --part-b-sizes quick" if "--no-part-b" not in part else ""
        out.append(part.replace(".venv/bin/", f"{BIN}/"))
    return " && ".join(out)


def _run(line: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, MPLBACKEND="Agg")
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", equivalent(line)],
        cwd=cwd,
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=300,
    )


def test_every_command_uses_the_venv_or_plain_shell():
    for page, block in fences("bash"):
        for line in commands(block):
            for part in (p.strip() for p in line.split("&&")):
                ours = part.startswith((".venv/bin/", "python3 -m venv .venv"))
                assert ours or part.startswith(SHELL_WORDS), (
                    f"{_name(page)} command {part!r} needs an activated venv: write .venv/bin/..."
                )


COMMAND_WORDS = ("tito", "python", "pip", "jupyter", "jupytext", "pytest")
ELSEWHERE = ("tito autograder run prairielearn",)  # PrairieLearn's image runs it, from its PATH


def code_spans(page: Path) -> list[str]:
    """A page's inline code spans."""
    return [
        child.content
        for t in _tokens(page)
        if t.type == "inline"
        for child in t.children or []
        if child.type == "code_inline"
    ]


def inline_commands(page: Path | None = None) -> list[str]:
    """The inline code spans that start with a command (`tito ...`, `python ...`): one page's, or
    every page's."""
    spans = [s for p in ([page] if page else PAGES) for s in code_spans(p)]
    return [s for s in spans if s.split(" ", 1)[0].rsplit("/", 1)[-1] in COMMAND_WORDS]


def test_every_inline_command_uses_the_venv_too():
    found = inline_commands()
    assert any(s.startswith(".venv/bin/tito info") for s in found), "the span scan found nothing"
    for page in PAGES:
        bare = [
            s
            for s in inline_commands(page)
            if not s.startswith(".venv/bin/") and not s.startswith(ELSEWHERE)
        ]
        assert not bare, f"{_name(page)} inline commands that need an activated venv: {bare}"


def test_the_documented_grading_commands_grade_and_use_the_venv():
    """The PrairieLearn command grades in grading mode (without --grading it is a practice run),
    and the Gradescope zip's local test runs the venv's Python (the system's lacks tinytorch)."""
    written = [s for p in PAGES for s in code_spans(p)]
    written += [ln for b in bash_blocks() for ln in commands(b)]
    prairielearn = [c for c in written if "--format prairielearn" in c and "milestone run" in c]
    assert prairielearn, "no documented `tito milestone run ... --format prairielearn`"
    assert all("--grading" in c for c in prairielearn), prairielearn
    local = [c for c in written if "TINYTORCH_PYTHON=" in c]
    assert local, "no documented local test of the Gradescope zip"
    assert all("TINYTORCH_PYTHON=$PWD/.venv/bin/python" in c for c in local), local
    assert not any("$(which python" in c for c in written)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    tokens = _tokens(page)
    seen: dict[str, int] = {}
    for i, t in enumerate(tokens):
        if t.type == "heading_open":
            slug = _slug(tokens[i + 1].content)
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            if n:
                seen[f"{slug}-{n}"] = 1
    return set(seen)


def test_every_relative_link_points_at_a_file_that_exists():
    checked = 0
    for page in PAGES:
        for t in _tokens(page):
            for child in t.children or []:
                target = child.attrs.get("href") or child.attrs.get("src")
                if child.type not in ("link_open", "image") or not target:
                    continue
                if re.match(r"[a-z][a-z0-9+.-]*:", str(target)):  # https:, mailto:
                    continue
                path, _, anchor = str(target).partition("#")
                dest = (page.parent / path).resolve() if path else page
                where = f"{_name(page)} links {target!r}"
                assert dest.exists(), f"{where}, which does not exist"
                assert dest == ROOT or ROOT in dest.parents, f"{where}, outside the repository"
                if anchor and dest.suffix == ".md":
                    assert anchor in _anchors(dest), f"{where}: no such heading"
                checked += 1
    assert checked >= 10, "the link scan found nothing"


def test_the_colab_link_is_the_repository_declared_in_pyproject():
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    assert "<org>" not in text and "<repo>" not in text
    repo = re.search(
        r'^Repository = "https://github.com/(.+?)"',
        (ROOT / "pyproject.toml").read_text(),
        re.MULTILINE,
    )
    assert f"colab.research.google.com/github/{repo.group(1)}/blob/main/notebooks/" in text


def test_the_setup_steps_the_test_skips_are_the_ones_ci_ran():
    skipped = {
        p.strip() for b in bash_blocks() for ln in commands(b) for p in ln.split("&&")
    } & set(SETUP)
    assert "python3 -m venv .venv" in skipped and ".venv/bin/pip install -e ." in skipped
    assert (BIN / "tito").exists() and (BIN / "jupyter").exists(), "the test venv lacks them"


@pytest.mark.slow
def test_the_student_blocks_run_as_written():
    """Command 1, command 2 (collect only), running the milestone, JupyterLab, the quick test loop,
    from the root; a line written on several pages runs once."""
    blocks = bash_blocks()
    student = [b for b in blocks if not _instructor(b) and not _nbgrader(b)]
    assert len(student) >= 4
    lines = list(dict.fromkeys(ln for block in student for ln in commands(block)))
    for line in lines:
        done = _run(line, ROOT)
        assert done.returncode == 0, f"{line!r} exited {done.returncode}:\n{done.stderr[-2000:]}"
        if "milestone run 07" in line:
            assert "PASS" in done.stdout and "root cause" not in done.stdout


def _nbgrader(block: str) -> bool:
    """The nbgrader course's blocks: tests/test_nbgrader.py runs them in a scratch folder."""
    return "tito nbgrader" in block or "[nbgrader]" in block


def _instructor(block: str) -> bool:
    """Grading a class or building the Gradescope zip: run in a grader's scratch folder."""
    return "submissions/" in block or "tito autograder" in block


@pytest.mark.slow
def test_the_instructor_blocks_run_as_written(tmp_path):
    (tmp_path / "submissions" / "alice").mkdir(parents=True)
    shutil.copy(STUDENT, tmp_path / "submissions" / "alice" / "acceleration.py")
    (tmp_path / "grades").mkdir()
    blocks = [b for b in bash_blocks() if _instructor(b)]
    assert len(blocks) == 4  # milestone run --json, tito grade, tito grade-class, the zip
    for block in blocks:
        (line,) = commands(block)
        done = _run(line, tmp_path)
        assert done.returncode == 0, f"{block!r} exited {done.returncode}:\n{done.stderr[-2000:]}"
        assert "without encryption" not in done.stderr, "tito grade must be quiet"
    assert json.loads((tmp_path / "grades" / "alice.json").read_text())["verdict"] == "PASS"
    assert (tmp_path / "grades" / "alice.ipynb").is_file()
    with open(tmp_path / "grades" / "gradebook.csv", newline="") as fh:
        rows = {r["student"]: r for r in csv.DictReader(fh)}
    assert rows["alice"]["verdict"] == "PASS"
    assert zipfile.is_zipfile(tmp_path / "autograder.zip")


@pytest.mark.slow
def test_the_python_block_runs(tmp_path):
    (code,) = [content for _, content in fences("python")]
    (tmp_path / "submissions" / "alice").mkdir(parents=True)
    shutil.copy(STUDENT, tmp_path / "submissions" / "alice" / "acceleration.py")
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "PASS"


@pytest.mark.slow
def test_a_missing_impl_is_a_usage_error_in_one_line(tmp_path):
    for argv in (
        ["milestone", "run", "07", "--impl", "nope.py"],
        ["milestone", "run", "07", "--impl", "no_such_module_xyz"],
        ["grade", "--impl", "nope.py"],
    ):
        done = subprocess.run(
            [str(BIN / "tito"), *argv],
            cwd=tmp_path,
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, (argv, done.stdout[-500:], done.stderr[-500:])
        assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
        assert "nope.py" in done.stderr or "no_such_module_xyz" in done.stderr


def test_the_prairielearn_info_json_snippet_names_our_entry_point():
    """The docs' info.json: valid JSON, PrairieLearn's documented externalGradingOptions keys
    only, and an entrypoint that `tito` parses as `autograder run prairielearn`."""
    import shlex

    from tinytorch.cli.main import build_parser

    (snippet,) = [content for _, content in fences("json")]
    info = json.loads(snippet)
    options = info["externalGradingOptions"]
    documented = {"enabled", "image", "entrypoint", "serverFilesCourse", "timeout",
                  "enableNetworking", "environment"}  # fmt: skip
    assert info["gradingMethod"] == "External" and set(options) <= documented
    assert 0 < options["timeout"] <= 600  # PrairieLearn's maximum
    exe, *argv = shlex.split(options["entrypoint"])
    assert exe.startswith("/") and exe.endswith("/bin/tito")  # an absolute path in the image
    args = build_parser().parse_args(argv)
    assert (args.command, args.autograder_command, args.platform) == (
        "autograder",
        "run",
        "prairielearn",
    )
    assert args.points.startswith("/grade/tests/")


OUTPUT_FLAGS = ("--out", "--json", "--plots", "-o")  # each writes the path that follows it


def _written_paths(line: str) -> list[str]:
    """The concrete paths a command line writes (`--out my17`, `--json=r.json`); placeholders in
    capitals (PATH, DIR, FILE) are the reader's to choose."""
    words = line.replace("[", " ").replace("]", " ").replace("`", " ").split()
    paths = []
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if flag in OUTPUT_FLAGS:
            value = value if eq else (words[i + 1] if i + 1 < len(words) else "")
            if value and not value.isupper():
                paths.append(value)
    return paths


def test_documented_commands_write_outside_the_checkout_or_into_ignored_paths():
    """A student who runs a documented command from the checkout's root is left with no
    untracked file (`tito release 17 --out my17`, `--json results.json`)."""
    lines = [ln for _, block in fences("bash") for ln in commands(block)] + inline_commands()
    written = sorted({p for line in lines for p in _written_paths(line)})
    assert "my17" in written and "results.json" in written, written  # the scan finds them
    inside = [p for p in written if not p.startswith(("/", "~", "$"))]
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        input="\n".join(q for p in inside for q in (p.rstrip("/"), p.rstrip("/") + "/")),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    ignored = {p.rstrip("/") for p in done.stdout.split()}  # as a file or as a folder
    assert [p for p in inside if p.rstrip("/") not in ignored] == [], ".gitignore misses them"
