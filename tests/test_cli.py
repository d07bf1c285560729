"""`tito`: the console script runs in a fresh process and its basic commands exit 0."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinytorch.cli.main import main

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).with_name("tito.exe" if os.name == "nt" else "tito")


def tito(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the installed console script, or the module when the script is not installed here."""
    cmd = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "tinytorch.cli.main"]
    return subprocess.run(
        [*cmd, *args], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )


def project_version() -> str:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["project"]["version"]


def test_help_lists_the_subcommands():
    result = tito("--help")
    assert result.returncode == 0, result.stderr
    for command in ("info", "milestone", "grade", "bench", "release"):
        assert command in result.stdout


def test_version_is_the_project_version():
    result = tito("--version")
    assert result.returncode == 0, result.stderr
    assert project_version() in result.stdout


def test_module_entry_point_runs():
    result = subprocess.run(
        [sys.executable, "-m", "tinytorch.cli.main", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert project_version() in result.stdout


def test_info_prints_python_and_numpy():
    result = tito("info")
    assert result.returncode == 0, result.stderr
    assert platform.python_version() in result.stdout
    assert np.__version__ in result.stdout


def test_info_json_parses():
    result = tito("info", "--json")
    assert result.returncode == 0, result.stderr
    env = json.loads(result.stdout)
    assert env["python"] == platform.python_version()
    assert env["numpy"] == np.__version__
    assert isinstance(env["blas"], list) and isinstance(env["backends"], list)
    for row in env["backends"]:
        assert {"name", "available", "reason"} <= set(row), row
        assert isinstance(row["available"], bool) and row["reason"], row
    # Issue 2: the C++ compiler, torch, Triton and MPS, each available or not, with the reason.
    names = " ".join(row["name"].lower() for row in env["backends"])
    for backend in ("c++", "torch", "triton", "mps"):
        assert backend in names, f"tito info has no {backend} row: {names}"


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "usage: tito" in capsys.readouterr().out


def test_unknown_command_is_a_usage_error(capsys):
    assert main(["no-such-command"]) == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.skipif(not SCRIPT.exists(), reason="no tito console script next to sys.executable")
def test_console_script_is_installed_next_to_python():
    assert os.access(SCRIPT, os.X_OK)


def test_info_survives_a_failing_backend_probe(monkeypatch):
    from tinytorch import extensions
    from tinytorch.profiling import environment as info

    def broken():
        raise OSError("libfoo.so: cannot open shared object file")

    monkeypatch.setattr(extensions, "backend_status", broken)
    (row,) = info.backend_report()
    assert row["available"] is False and "libfoo.so" in row["reason"]
