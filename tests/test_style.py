"""The codebase stays ruff-clean (lint and format), so style drift fails CI, not review.

Only the project's own files are linted: the Python files git tracks. What running the docs'
examples leaves in the checkout (grades/, submissions/, a student edition) is not the project's,
and must not fail this test. Outside a git checkout, ruff walks the tree and [tool.ruff]'s
extend-exclude keeps those folders out.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    exe = Path(sys.executable).with_name("ruff")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (it comes with the dev extra)")
    return [found]


def project_files(root: Path) -> list[str]:
    """The tracked Python files that exist (a file moved but not yet `git rm`ed is still listed
    by git), relative to root; ["."] where root is not a git checkout."""
    git = shutil.which("git")
    if git is None or not (root / ".git").exists():
        return ["."]
    listed = subprocess.run(
        [git, "ls-files", "-z", "--", "*.py", "*.pyi"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split("\0")
    return sorted(f for f in listed if f and (root / f).is_file())


def ruff(args: list[str], root: Path) -> subprocess.CompletedProcess:
    """`ruff ARGS` on root's own files ([tool.ruff]'s excludes still apply: --force-exclude)."""
    return subprocess.run(
        [*_ruff(), *args, "--force-exclude", *project_files(root)],
        check=False,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_clean(args: list[str]) -> None:
    files = project_files(ROOT)
    assert files == ["."] or "tests/test_style.py" in files
    proc = ruff(args, ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_badly_formatted_tracked_file_fails_and_grader_output_does_not(tmp_path: Path) -> None:
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    subprocess.run([git, "init", "-q"], cwd=tmp_path, check=True, timeout=60)
    (tmp_path / ".gitignore").write_text("/grades/\n")
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / "bad.py").write_text("x=1\n")
    (tmp_path / "grades").mkdir()
    (tmp_path / "grades" / "alice.py").write_text("y=2\n")  # grader output, not the project's
    subprocess.run([git, "add", "ok.py", "bad.py"], cwd=tmp_path, check=True, timeout=60)
    assert project_files(tmp_path) == ["bad.py", "ok.py"]
    proc = ruff(["format", "--check"], tmp_path)
    assert proc.returncode == 1 and "bad.py" in proc.stdout and "alice" not in proc.stdout
    (tmp_path / "bad.py").write_text("x = 1\n")
    assert ruff(["format", "--check"], tmp_path).returncode == 0
