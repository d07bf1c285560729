"""The setup cell's Colab branch, run against a stub `google.colab` and a stubbed pip call."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
IPYNB = ROOT / "notebooks" / "07_custom_kernels.ipynb"


def _setup_source() -> str:
    nb = nbformat.read(IPYNB, as_version=4)
    (cell,) = [c for c in nb.cells if "setup" in c.metadata.get("tags", [])]
    return cell.source


def _run_setup_cell() -> dict:
    namespace: dict = {}
    exec(_setup_source(), namespace)  # noqa: S102  (running the notebook's own cell is the test)
    return namespace


PIP_RESULT: dict = {"code": 0, "stderr": "", "env": None}


@pytest.fixture
def pip_calls(monkeypatch):
    calls = []
    PIP_RESULT.update(code=0, stderr="", env=None)

    def fake_run(cmd, *args, **kwargs):
        calls.append(list(cmd))
        PIP_RESULT["env"] = kwargs.get("env")
        return subprocess.CompletedProcess(cmd, PIP_RESULT["code"], "", PIP_RESULT["stderr"])

    monkeypatch.setattr(subprocess, "run", fake_run)
    return calls


def _with_source(source: str, monkeypatch) -> None:
    """Run the setup cell as if the student had typed `source` into its form field."""
    cell = _setup_source()
    edited = re.sub(
        r'^TINYTORCH_PIP = ".*?"', f"TINYTORCH_PIP = {source!r}", cell, flags=re.MULTILINE
    )
    assert edited != cell, "the setup cell no longer assigns TINYTORCH_PIP on one line"
    monkeypatch.setattr(sys.modules[__name__], "_setup_source", lambda: edited)


@pytest.fixture
def colab(monkeypatch):
    """A stub google.colab whose output.enable_custom_widget_manager() counts its calls."""
    google = types.ModuleType("google")
    google.__path__ = []
    colab_mod = types.ModuleType("google.colab")
    output = types.ModuleType("google.colab.output")
    output.enabled = 0

    def enable_custom_widget_manager():
        output.enabled += 1

    output.enable_custom_widget_manager = enable_custom_widget_manager
    colab_mod.output = output
    google.colab = colab_mod
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", colab_mod)
    monkeypatch.setitem(sys.modules, "google.colab.output", output)
    return output


def _tinytorch_missing(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a, **k: None if name == "tinytorch" else real(name, *a, **k),
    )


def test_on_colab_without_tinytorch_it_pip_installs_then_enables_widgets(
    monkeypatch, colab, pip_calls
):
    _tinytorch_missing(monkeypatch)
    namespace = _run_setup_cell()
    assert len(pip_calls) == 1
    cmd = pip_calls[0]
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"]
    assert cmd[-1] == namespace["TINYTORCH_PIP"] and cmd[-1].startswith("git+https://github.com/")
    assert colab.enabled == 1


def test_on_colab_with_tinytorch_it_only_enables_widgets(colab, pip_calls):
    _run_setup_cell()
    assert pip_calls == []
    assert colab.enabled == 1


def test_elsewhere_it_does_nothing(monkeypatch, pip_calls):
    for name in ("google.colab.output", "google.colab"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "google.colab", None)  # import of google.colab fails
    _tinytorch_missing(monkeypatch)
    namespace = _run_setup_cell()
    assert pip_calls == []
    assert namespace["colab_output"] is None


def test_the_install_source_is_a_colab_form_field_defaulting_to_the_repository_url():
    cell = _setup_source()
    (line,) = [ln for ln in cell.splitlines() if ln.startswith("TINYTORCH_PIP = ")]
    assert line.endswith('# @param {type:"string"}'), line
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert f'"git+{urls["Repository"]}.git"' in line


def test_a_placeholder_source_says_what_to_set_without_running_pip(monkeypatch, colab, pip_calls):
    _tinytorch_missing(monkeypatch)
    _with_source("git+https://github.com/<org>/<repo>.git", monkeypatch)
    with pytest.raises(SystemExit) as exc:
        _run_setup_cell()
    message = str(exc.value)
    assert pip_calls == [] and "\n" not in message
    assert "placeholder" in message and "set TINYTORCH_PIP in the form above" in message


def test_an_unreachable_source_is_one_line_not_a_pip_traceback(monkeypatch, colab, pip_calls):
    _tinytorch_missing(monkeypatch)
    PIP_RESULT.update(
        code=1,
        stderr="Traceback (most recent call last):\n  ...\n"
        "ERROR: Could not find a version that satisfies the requirement",
    )
    with pytest.raises(SystemExit) as exc:
        _run_setup_cell()
    message = str(exc.value)
    assert len(pip_calls) == 1 and "\n" not in message and "Traceback" not in message
    assert "Could not install TinyTorch" in message and "Could not find a version" in message
    assert colab.enabled == 0  # stopped before the widgets, with the reason


# What pip 24 prints (with -q) when git cannot clone: git's own line first, then pip's wrapping.
GIT_CLONE_FAILED = """\
  fatal: could not read Username for 'https://github.com': terminal prompts disabled
  error: subprocess-exited-with-error

  × git clone --filter=blob:none --quiet https://github.com/x/y.git /tmp/pip-req-build-1 did not run successfully.
  │ exit code: 128
  ╰─> See above for output.

  note: This error originates from a subprocess, and is likely not a problem with pip.
error: subprocess-exited-with-error

× git clone --filter=blob:none --quiet https://github.com/x/y.git /tmp/pip-req-build-1 did not run successfully.
│ exit code: 128
╰─> See above for output.

note: This error originates from a subprocess, and is likely not a problem with pip.
"""
NO_HOST = GIT_CLONE_FAILED.replace(
    "fatal: could not read Username for 'https://github.com': terminal prompts disabled",
    "fatal: unable to access 'https://github.com/x/y.git/': Could not resolve host: github.com",
)
NO_DISTRIBUTION = """\
ERROR: Could not find a version that satisfies the requirement tinytorch-m07 (from versions: none)
ERROR: No matching distribution found for tinytorch-m07
"""


@pytest.mark.parametrize(
    "stderr, cause",
    [
        (GIT_CLONE_FAILED, "fatal: could not read Username for 'https://github.com'"),
        (NO_HOST, "Could not resolve host: github.com"),
        (NO_DISTRIBUTION, "ERROR: Could not find a version that satisfies the requirement"),
    ],
    ids=["private_repo", "no_network", "no_distribution"],
)
def test_a_failed_install_names_git_or_pips_first_error_not_pips_closing_note(
    monkeypatch, colab, pip_calls, stderr, cause
):
    _tinytorch_missing(monkeypatch)
    PIP_RESULT.update(code=1, stderr=stderr)
    with pytest.raises(SystemExit) as exc:
        _run_setup_cell()
    message = str(exc.value)
    assert "\n" not in message and cause in message, message
    assert "likely not a problem with pip" not in message and "subprocess-exited" not in message
    assert PIP_RESULT["env"]["GIT_TERMINAL_PROMPT"] == "0"  # git fails instead of prompting
