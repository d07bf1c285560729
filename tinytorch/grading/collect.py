"""Read back what an executed notebook recorded (see record.py): cases, checks, verdict."""

from __future__ import annotations

from typing import Any

from tinytorch.render.notebook_record import CASES_MIME, CHECKS_MIME, VERDICT_MIME


def _outputs(nb: Any):
    """Every display output of every code cell, with the cell index, in execution order."""
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") in ("display_data", "execute_result"):
                yield index, out.get("data", {})


def collect(nb: Any) -> dict[str, Any]:
    """{"verdict": payload or None, "cases": [...], "checks": [...]} from an executed notebook.

    Cases are keyed by name; a later record of the same case (the full gate run) replaces an
    earlier one (the walk group by group), so partial runs still report what they reached.
    """
    cases: dict[str, dict[str, Any]] = {}
    checks: list[dict[str, Any]] = []
    verdict: dict[str, Any] | None = None
    for index, data in _outputs(nb):
        if CASES_MIME in data:
            for case in data[CASES_MIME].get("cases", []):
                cases[case["name"]] = dict(case, cell=index, stage=data[CASES_MIME].get("stage"))
        if CHECKS_MIME in data:
            checks = list(data[CHECKS_MIME].get("checks", []))
        if VERDICT_MIME in data:
            verdict = data[VERDICT_MIME]
    if verdict is not None:  # the summary's own cases are the final word
        for case in verdict.get("cases", []):
            cases[case["name"]] = dict(cases.get(case["name"], {}), **case)
        checks = list(verdict.get("checks", checks))
    return {"verdict": verdict, "cases": list(cases.values()), "checks": checks}
