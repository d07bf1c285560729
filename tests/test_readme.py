"""Every bash block of README.md, run as written, in order (or its documented equivalent); and
every command in the prose (an inline `tito ...` or `python ...` span) written with .venv/bin/.

Kept fast by reusing the environment the tests already run in, instead of building new venvs:
- `python3 -m venv .venv` and `.venv/bin/pip install ...` are what CI (or command 2) already did
  to make this environment, so they are checked to be exactly the README's, and not rerun;
- `.venv/bin/X` runs as this interpreter's `bin/X` (the test venv is the README's .venv in CI);
- command 2's `python -m pytest` runs as `pytest --collect-only` (the suite cannot run itself);
- `tito milestone run 07` and the milestone script run with the hidden `--part-b-sizes quick`
  (Part B's smaller problems; the same code path, a third of the time);
- `jupyter lab NOTEBOOK` runs as `jupyter lab --version` (a server would never return), and
  NOTEBOOK must exist;
- the instructor blocks (grading, the class grader, the Gradescope zip) run in a scratch folder
  holding submissions/alice/acceleration.py (a correct student module), as in a grader's folder.
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
)
SHELL_WORDS = ("mkdir", "for ", "name=", "echo ", "done", "export ")  # plain shell, not ours

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def bash_blocks() -> list[str]:
    """The README's ```bash fences, in order."""
    tokens = MarkdownIt().parse((ROOT / "README.md").read_text(encoding="utf-8"))
    return [t.content for t in tokens if t.type == "fence" and t.info.strip() == "bash"]


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
    for block in bash_blocks():
        for line in commands(block):
            for part in (p.strip() for p in line.split("&&")):
                ours = part.startswith((".venv/bin/", "python3 -m venv .venv"))
                assert ours or part.startswith(SHELL_WORDS), (
                    f"README command {part!r} needs an activated venv: write .venv/bin/..."
                )


COMMAND_WORDS = ("tito", "python", "pip", "jupyter", "jupytext", "pytest")
ELSEWHERE = ("tito autograder run prairielearn",)  # PrairieLearn's image runs it, from its PATH


def inline_commands() -> list[str]:
    """The README's inline code spans that start with a command (`tito ...`, `python ...`)."""
    tokens = MarkdownIt().parse((ROOT / "README.md").read_text(encoding="utf-8"))
    spans = [
        child.content
        for t in tokens
        if t.type == "inline"
        for child in t.children or []
        if child.type == "code_inline"
    ]
    return [s for s in spans if s.split(" ", 1)[0].rsplit("/", 1)[-1] in COMMAND_WORDS]


def test_every_inline_command_uses_the_venv_too():
    found = inline_commands()
    assert any(s.startswith(".venv/bin/tito info") for s in found), "the span scan found nothing"
    bare = [s for s in found if not s.startswith(".venv/bin/") and not s.startswith(ELSEWHERE)]
    assert not bare, f"README inline commands that need an activated venv: {bare}"


def test_the_colab_link_is_the_repository_declared_in_pyproject():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
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


def test_the_student_blocks_run_as_written():
    """Command 1, command 2 (collect only), running the milestone, and JupyterLab, from the root."""
    blocks = bash_blocks()
    student = [b for b in blocks if not _instructor(b)]
    assert len(student) >= 4
    for block in student:
        for line in commands(block):
            done = _run(line, ROOT)
            assert done.returncode == 0, (
                f"{line!r} exited {done.returncode}:\n{done.stderr[-2000:]}"
            )
            if "milestone run 07" in line:
                assert "PASS" in done.stdout and "root cause" not in done.stdout


def _instructor(block: str) -> bool:
    """Grading a class or building the Gradescope zip: run in a grader's scratch folder."""
    return "submissions/" in block or "tito autograder" in block


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


def test_the_python_block_runs(tmp_path):
    tokens = MarkdownIt().parse((ROOT / "README.md").read_text(encoding="utf-8"))
    (code,) = [t.content for t in tokens if t.type == "fence" and t.info.strip() == "python"]
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
    """The README's info.json: valid JSON, PrairieLearn's documented externalGradingOptions keys
    only, and an entrypoint that `tito` parses as `autograder run prairielearn`."""
    import shlex

    from tinytorch.cli.main import build_parser

    tokens = MarkdownIt().parse((ROOT / "README.md").read_text(encoding="utf-8"))
    (snippet,) = [t.content for t in tokens if t.type == "fence" and t.info.strip() == "json"]
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
