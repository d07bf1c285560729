"""Grade one notebook headless: inject the implementation, execute, read back, exit code + report."""

from __future__ import annotations

import ast
import time
from pathlib import Path
from typing import Any

import nbformat

from tinytorch.grading.collect import collect
from tinytorch.grading.execute import PARAMETERS_TAG, execute, inject_parameters
from tinytorch.render.resultfile import ResultFileError, claim_all
from tinytorch.sandbox.child.load import is_path

SCHEMA_VERSION = 2  # 2: grading, seed, hidden_cases, isolation, warnings; verdict ERROR (exit 6)
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
PASS, NOT_PASSED, USAGE, CELL_RAISED, TIMEOUT, DEAD_KERNEL, ERROR = 0, 1, 2, 3, 4, 5, 6
EXIT_BY_STATUS = {"cell_error": CELL_RAISED, "timeout": TIMEOUT, "dead_kernel": DEAD_KERNEL}


class UsageError(ValueError):
    """Bad arguments: exit code 2."""


def resolve_impl(impl: str, base: Path) -> str:
    """A module name stays as is; a path (contains a separator, or ends in .py or .ipynb: a
    module, a jupytext percent file or a notebook) becomes absolute."""
    if is_path(impl):
        path = (base / impl).resolve()
        if not path.is_file():
            raise UsageError(f"--impl: no such file {impl!r} (resolved to {path})")
        return str(path)
    if not all(part.isidentifier() for part in impl.split(".")):
        raise UsageError(
            f"--impl: {impl!r} is neither a module name nor a path to a .py or .ipynb file"
        )
    return impl


def takes_parameter(nb: Any, name: str) -> bool:
    """Whether the notebook's parameters cell assigns `name` (so overriding it means something)."""
    for cell in nb.cells:
        if PARAMETERS_TAG not in cell.get("metadata", {}).get("tags", []):
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            return False
        return any(
            isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store)
            for node in ast.walk(tree)
        )
    return False


def grade(
    notebook: str | Path | None = None,
    *,
    impl: str | None = None,
    params: dict[str, Any] | None = None,
    report: str | Path | None = None,
    executed: str | Path | None = None,
    timeout: float = 300.0,
    cwd: str | Path | None = None,
    grading: bool = True,
    budget: float | None = None,
) -> tuple[int, dict[str, Any]]:
    """Execute `notebook` against `impl` and return (exit code, report); write the files asked for.

    Grading mode (the default) injects GRADING = True: a secret seed and hidden cases. `budget`
    (seconds; `tito grade` passes the CLI's default) is injected as BUDGET, the wall-clock budget of
    the notebook's Part A gate, unless params set BUDGET themselves. The result
    files are removed first and published (tmp file + rename) once the notebook's kernel, and with
    it every student process, is gone. A bug of the grader's own is verdict ERROR, exit 6.
    """
    path = Path(notebook) if notebook is not None else default_notebook()
    if not path.is_file():
        raise UsageError(f"NOTEBOOK: no such file {str(notebook)!r}")
    if not timeout or timeout <= 0:
        raise UsageError(f"--timeout must be > 0 seconds, got {timeout!r}")
    if budget is not None and not budget > 0:
        raise UsageError(f"--budget must be > 0 seconds, got {budget!r}")
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # not JSON, not a notebook
        raise UsageError(f"NOTEBOOK: {notebook} is not a readable notebook: {exc}") from exc
    overrides = dict(params or {})
    if impl is not None:
        overrides["IMPL"] = resolve_impl(impl, Path(cwd or Path.cwd()))
    takes = takes_parameter(nb, "GRADING") and "GRADING" not in overrides
    mode = {"GRADING": bool(grading)} if takes else {}
    if budget is not None and takes_parameter(nb, "BUDGET") and "BUDGET" not in overrides:
        mode["BUDGET"] = float(budget)
    try:
        inject_parameters(nb, overrides | mode)
    except ValueError as exc:
        raise UsageError(f"NOTEBOOK: {exc}") from exc
    try:
        targets = claim_all({"--report": report, "--executed": executed})
    except ResultFileError as exc:
        raise UsageError(str(exc)) from exc

    start = time.perf_counter()
    try:
        code, result, run_nb = _run(nb, path, overrides, timeout, grading, start)
    except Exception as exc:  # noqa: BLE001 (a grader bug: verdict ERROR, never a bare traceback)
        code, result, run_nb = ERROR, _error_report(path, overrides, grading, exc, start), None
    if "--executed" in targets and run_nb is not None:
        targets["--executed"].publish(nbformat.writes(run_nb))
    if "--report" in targets:
        targets["--report"].publish_json(result)
    return code, result


def _run(
    nb: Any, path: Path, overrides: dict[str, Any], timeout: float, grading: bool, start: float
) -> tuple[int, dict[str, Any], Any]:
    run = execute(nb, timeout=timeout, cwd=path.resolve().parent)
    found = collect(run.nb)
    payload = found["verdict"]
    verdict = payload.get("verdict") if payload else None
    by_verdict = {"PASS": PASS, "ERROR": ERROR}
    code = EXIT_BY_STATUS.get(run.status, by_verdict.get(str(verdict), NOT_PASSED))
    warnings = list((payload or {}).get("warnings", []))
    if grading and payload is not None and payload.get("grading") is not True:
        warnings.append(
            "grading mode asked for, but the notebook's verdict was computed in practice mode "
            "(its parameters cell takes no GRADING)"
        )

    from tinytorch.profiling.environment import environment

    result = {
        "schema_version": SCHEMA_VERSION,
        "notebook": str(path.resolve()),
        "impl": overrides.get("IMPL") or (payload or {}).get("impl"),
        "params": {k: v for k, v in overrides.items()},
        "grading": bool(grading),
        "seed": (payload or {}).get("seed"),
        "status": run.status,
        "exit_code": code,
        "verdict": verdict,
        "passed": sum(c.get("status") == "pass" for c in found["cases"]),
        "total": len(found["cases"]),
        "cases": found["cases"],
        "hidden_cases": list((payload or {}).get("hidden_cases", [])),
        "checks": found["checks"],
        "missing": (payload or {}).get("missing", []),
        "warnings": warnings,
        "isolation": (payload or {}).get("isolation", {}),
        "diagnosis": (payload or {}).get("diagnosis"),
        "part_b": (payload or {}).get("part_b"),
        "error": run.error,
        "cells": [vars(c) for c in run.cells],
        "widget_models": run.widget_models,
        "seconds": round(time.perf_counter() - start, 3),
        "environment": environment(),
    }
    return code, result, run.nb


def _error_report(
    path: Path, overrides: dict[str, Any], grading: bool, exc: BaseException, start: float
) -> dict[str, Any]:
    """The report of a run the grader itself broke: verdict ERROR, exit 6, what broke."""
    return {
        "schema_version": SCHEMA_VERSION,
        "notebook": str(path.resolve()),
        "impl": overrides.get("IMPL"),
        "params": dict(overrides),
        "grading": bool(grading),
        "seed": None,
        "status": "grader_error",
        "exit_code": ERROR,
        "verdict": "ERROR",
        "passed": 0,
        "total": 0,
        "cases": [],
        "hidden_cases": [],
        "checks": [],
        "missing": [],
        "warnings": [],
        "isolation": {},
        "part_b": None,
        "error": {"cell": None, "ename": type(exc).__name__, "evalue": str(exc)[:500]},
        "cells": [],
        "widget_models": 0,
        "seconds": round(time.perf_counter() - start, 3),
        "environment": None,
    }
