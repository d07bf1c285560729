"""Packaging: environment.yml and pyproject.toml install the same things; the wheel has every package."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
# In environment.yml but not pyproject.toml: conda's own tooling, the compiler and Python itself.
CONDA_ONLY = {"python", "pip", "cxx-compiler"}


def pyproject() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)


def lower_bound(specifier) -> str | None:
    """The version after >= in a specifier set, if there is one."""
    bounds = [s.version for s in specifier if s.operator == ">="]
    return bounds[0] if bounds else None


def pyproject_requirements() -> dict[str, str | None]:
    """Core dependencies plus the dev extra: canonical name -> lower bound."""
    project = pyproject()["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    reqs += [Requirement(r) for r in project["optional-dependencies"]["dev"]]
    return {canonicalize_name(r.name): lower_bound(r.specifier) for r in reqs}


def conda_requirements() -> dict[str, str | None]:
    """Every dependency of environment.yml, conda and pip sections alike: name -> lower bound."""
    with open(ROOT / "environment.yml") as fh:
        env = yaml.safe_load(fh)
    specs: list[str] = []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            specs += [s for s in dep.get("pip", []) if not s.startswith("-")]  # skip "-e ."
        else:
            specs.append(dep)
    out = {}
    for spec in specs:
        # conda specs look like "numpy>=1.24", "numpy >=1.24" or "conda-forge::numpy>=1.24".
        match = re.fullmatch(r"(?:[\w.-]+::)?([A-Za-z0-9_.-]+)\s*(.*)", spec.strip())
        assert match, f"environment.yml: cannot parse {spec!r}"
        name, rest = match.groups()
        bound = re.search(r">=\s*([0-9][\w.]*)", rest)
        out[canonicalize_name(name)] = bound.group(1) if bound else None
    return out


def test_environment_yml_parses_and_installs_the_package_editable():
    with open(ROOT / "environment.yml") as fh:
        env = yaml.safe_load(fh)
    assert env["name"]
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert any("-e ." in section for section in pip_sections), "environment.yml lacks `-e .`"


def test_environment_yml_has_the_same_dependencies_as_pyproject():
    conda = conda_requirements()
    pip = pyproject_requirements()
    conda_names = set(conda) - CONDA_ONLY
    assert conda_names == set(pip), (
        f"only in environment.yml: {sorted(conda_names - set(pip))}; "
        f"only in pyproject.toml: {sorted(set(pip) - conda_names)}"
    )
    differ = {n: (conda[n], pip[n]) for n in pip if pip[n] and conda[n] and conda[n] != pip[n]}
    assert not differ, f"lower bounds differ (environment.yml, pyproject.toml): {differ}"


def test_environment_yml_python_matches_requires_python():
    requires = pyproject()["project"]["requires-python"]
    assert requires == ">=3.10"
    assert conda_requirements()["python"] == requires.removeprefix(">=")


@pytest.mark.parametrize("extra", ["torch", "triton", "dev"])
def test_extras_exist_and_torch_is_a_range(extra):
    reqs = [Requirement(r) for r in pyproject()["project"]["optional-dependencies"][extra]]
    assert reqs, f"extra {extra!r} is empty"
    if extra == "torch":
        (torch,) = reqs
        operators = {s.operator for s in torch.specifier}
        assert "==" not in operators and ">=" in operators, f"torch must be a range: {torch}"


def test_core_dependencies_are_the_ones_the_course_needs():
    names = {canonicalize_name(Requirement(r).name) for r in pyproject()["project"]["dependencies"]}
    needed = {"numpy", "matplotlib", "ipywidgets", "nbformat", "nbclient", "ipykernel", "jupytext"}
    assert needed | {"threadpoolctl"} <= names


def test_console_scripts_point_to_importable_functions():
    scripts = pyproject()["project"]["scripts"]
    assert "tito" in scripts
    for name, target in scripts.items():
        module_name, _, attr = target.partition(":")
        fn = getattr(importlib.import_module(module_name), attr, None)
        assert callable(fn), f"console script {name} -> {target} is not callable"


def test_every_subpackage_is_listed_in_pyproject():
    # Packages are listed by hand (extensions/ maps to tinytorch.extensions); a folder left out
    # imports fine from the checkout but is missing from a wheel or a non-editable install.
    setuptools = pyproject()["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    found = set()
    for package, folder in setuptools["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *rel.parts]))
    assert found - listed == set(), f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert listed - found == set(), f"listed but missing: {sorted(listed - found)}"
