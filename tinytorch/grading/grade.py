"""Grade one notebook headless: inject the implementation, execute, read back, exit code + report."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import nbformat

from tinytorch.grading.collect import collect
from tinytorch.grading.execute import execute, inject_parameters
from tinytorch.milestone07.impl import is_path

SCHEMA_VERSION = 1
NOTEBOOK_NAME = Path("notebooks") / "07_custom_kernels.ipynb"
# The checkout's notebook (editable install); a regular install has none, so grading needs NOTEBOOK.
DEFAULT_NOTEBOOK = Path(__file__).resolve().parents[2] / NOTEBOOK_NAME


def default_notebook() -> Path:
    """The checkout's milestone notebook, else ./notebooks/07_custom_kernels.ipynb."""
    for candidate in (DEFAULT_NOTEBOOK, Path.cwd() / NOTEBOOK_NAME):
        if candidate.is_file():
            return candidate
    raise UsageError(
        f"NOTEBOOK not given and no {NOTEBOOK_NAME} here or in the checkout: pass its path"
    )


# Exit codes of `tito grade`.
PASS, NOT_PASSED, USAGE, CELL_RAISED, TIMEOUT, DEAD_KERNEL = 0, 1, 2, 3, 4, 5
EXIT_BY_STATUS = {"cell_error": CELL_RAISED, "timeout": TIMEOUT, "dead_kernel": DEAD_KERNEL}


class UsageError(ValueError):
    """Bad arguments: exit code 2."""


def resolve_impl(impl: str, base: Path) -> str:
    """A module name stays as is; a path (contains a separator or ends in .py) becomes absolute."""
    if is_path(impl):
        path = (base / impl).resolve()
        if not path.is_file():
            raise UsageError(f"--impl: no such file {impl!r} (resolved to {path})")
        return str(path)
    if not all(part.isidentifier() for part in impl.split(".")):
        raise UsageError(f"--impl: {impl!r} is neither a module name nor a path to a .py file")
    return impl


def grade(
    notebook: str | Path | None = None,
    *,
    impl: str | None = None,
    params: dict[str, Any] | None = None,
    report: str | Path | None = None,
    executed: str | Path | None = None,
    timeout: float = 300.0,
    cwd: str | Path | None = None,
) -> tuple[int, dict[str, Any]]:
    """Execute `notebook` against `impl` and return (exit code, report); write the files asked for."""
    path = Path(notebook) if notebook is not None else default_notebook()
    if not path.is_file():
        raise UsageError(f"NOTEBOOK: no such file {str(notebook)!r}")
    if not timeout or timeout <= 0:
        raise UsageError(f"--timeout must be > 0 seconds, got {timeout!r}")
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # not JSON, not a notebook
        raise UsageError(f"NOTEBOOK: {notebook} is not a readable notebook: {exc}") from exc
    overrides = dict(params or {})
    if impl is not None:
        overrides["IMPL"] = resolve_impl(impl, Path(cwd or Path.cwd()))
    try:
        inject_parameters(nb, overrides)
    except ValueError as exc:
        raise UsageError(f"NOTEBOOK: {exc}") from exc

    start = time.perf_counter()
    run = execute(nb, timeout=timeout, cwd=path.resolve().parent)
    found = collect(run.nb)
    payload = found["verdict"]
    verdict = payload.get("verdict") if payload else None
    code = EXIT_BY_STATUS.get(run.status, PASS if verdict == "PASS" else NOT_PASSED)

    from tinytorch.cli.info import environment

    result = {
        "schema_version": SCHEMA_VERSION,
        "notebook": str(path.resolve()),
        "impl": overrides.get("IMPL") or (payload or {}).get("impl"),
        "params": {k: v for k, v in overrides.items()},
        "status": run.status,
        "exit_code": code,
        "verdict": verdict,
        "passed": sum(c.get("status") == "pass" for c in found["cases"]),
        "total": len(found["cases"]),
        "cases": found["cases"],
        "checks": found["checks"],
        "missing": (payload or {}).get("missing", []),
        "diagnosis": (payload or {}).get("diagnosis"),
        "part_b": (payload or {}).get("part_b"),
        "error": run.error,
        "cells": [vars(c) for c in run.cells],
        "widget_models": run.widget_models,
        "seconds": round(time.perf_counter() - start, 3),
        "environment": environment(),
    }
    if executed:
        Path(executed).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(run.nb, str(executed))
    if report:
        Path(report).parent.mkdir(parents=True, exist_ok=True)
        Path(report).write_text(json.dumps(result, indent=2, default=str))
    return code, result
