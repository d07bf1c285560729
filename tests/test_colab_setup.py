"""The setup cell's Colab branch, run against a stub `google.colab` and a stubbed pip call."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest

IPYNB = Path(__file__).resolve().parents[1] / "notebooks" / "07_custom_kernels.ipynb"


def _setup_source() -> str:
    nb = nbformat.read(IPYNB, as_version=4)
    (cell,) = [c for c in nb.cells if "setup" in c.metadata.get("tags", [])]
    return cell.source


def _run_setup_cell() -> dict:
    namespace: dict = {}
    exec(_setup_source(), namespace)  # noqa: S102  (running the notebook's own cell is the test)
    return namespace


@pytest.fixture
def pip_calls(monkeypatch):
    calls = []

    def fake_run(cmd, *args, **kwargs):
        calls.append(list(cmd))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    return calls


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
