"""Points: the one home for scoring a milestone JSON doc (gradebook, Gradescope and PrairieLearn).

Default: 1 point per published case, 2 per deeper check, 1 per hidden case. An item earns its
points only when its status is "pass". Override with `--points FILE`, a TOML or JSON file:

    case = 1          # every published case
    check = 2         # every deeper check
    hidden_case = 1   # every hidden case (grading mode)
    [cases]           # optional per-name overrides, by case or check name
    "tiled_matmul/ragged_all_axes/tile7" = 3
    [checks]
    "tiling audit" = 4

The gradebook contract, the same for every route (CSV, Gradescope, PrairieLearn, nbgrader):
- one maximum per assignment: every item the assignment has (`assignment_items`) is scored,
  whatever the run reached; an item the doc lacks (a syntax error stops before the checks, a file
  that was not graded has no items at all) earns 0 of its points, with status "not_run";
- nothing earns points for a file that does no work: a check that holds of an empty or untouched
  file (VACUOUS_CHECKS) earns its points only when at least one case passed.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the tomli backport (a pyproject dependency there)
    import tomli as tomllib

DEFAULT_POINTS = {"case": 1.0, "check": 2.0, "hidden_case": 1.0}
# The checks after the registry's deeper checks (tinytorch.milestone07.checks.CHECKS), by the
# names their results carry: every run's, and grading mode's own. tests/test_grade.py pins them
# against a real grading run, so a rename there fails a test, not a gradebook.
MUTATION_CHECK = "inputs not mutated"
OWN_WORK_CHECK = "own work"
# Checks an empty or untouched file passes (nothing it wrote could be mutated or borrowed).
VACUOUS_CHECKS = (MUTATION_CHECK, OWN_WORK_CHECK)
NOT_GRADED = "not_run"  # the status of an item the run did not reach
_KINDS = {"case": "cases", "check": "checks", "hidden_case": "hidden_cases"}


@dataclass(frozen=True)
class Points:
    """Points per item kind, with per-name overrides."""

    case: float = DEFAULT_POINTS["case"]
    check: float = DEFAULT_POINTS["check"]
    hidden_case: float = DEFAULT_POINTS["hidden_case"]
    overrides: dict[str, float] = field(default_factory=dict)

    def of(self, kind: str, name: str) -> float:
        """The points `name` (a case, check or hidden case of `kind`) is worth."""
        return float(self.overrides.get(name, getattr(self, kind)))


@dataclass(frozen=True)
class Item:
    """One scored item: a published case, a deeper check or a hidden case."""

    kind: str  # "case" | "check" | "hidden_case"
    name: str
    status: str
    earned: float
    max_points: float
    detail: str
    lesson: str
    graded: bool = True  # False: the assignment's item that the doc lacks (0 points)

    @property
    def passed(self) -> bool:
        return self.status == "pass"


def _number(value: Any, where: str, path: Path) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"--points {path}: {where} must be a number >= 0, got {value!r}")
    return float(value)


def load_points(path: str | Path | None) -> Points:
    """Read a TOML (.toml) or JSON (.json) points file; None gives the documented default.

    Raises ValueError (bad file or values) or TypeError (a table where a number belongs, or not a
    table at all), each naming the file and the key.
    """
    if path is None:
        return Points()
    path = Path(path)
    if path.suffix not in (".toml", ".json"):
        raise ValueError(f"--points {path}: expected a .toml or .json file")
    try:
        if path.suffix == ".toml":
            with open(path, "rb") as fh:
                raw = tomllib.load(fh)
        else:
            with open(path, encoding="utf-8") as fh:
                raw = json.load(fh)
    except OSError as exc:
        raise ValueError(f"--points {path}: cannot read it ({exc.strerror})") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"--points {path}: not valid {path.suffix[1:].upper()}: {exc}") from None
    if not isinstance(raw, dict):
        raise TypeError(f"--points {path}: expected a table of points")
    known = {*DEFAULT_POINTS, "cases", "checks"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"--points {path}: unknown keys {unknown} (known: {sorted(known)})")
    base = {k: _number(raw[k], k, path) for k in DEFAULT_POINTS if k in raw}
    overrides: dict[str, float] = {}
    for table in ("cases", "checks"):
        entries = raw.get(table, {})
        if not isinstance(entries, dict):
            raise TypeError(f"--points {path}: [{table}] must be a table of name = points")
        overrides.update({n: _number(v, f"{table}.{n}", path) for n, v in entries.items()})
    return Points(**base, overrides=overrides)


def assignment_items(grading: bool = True) -> list[tuple[str, str]]:
    """(kind, name) of every item the assignment scores: the 30 published cases, the deeper
    checks, and in grading mode the own-work check and the hidden cases (drawn per run, so named
    here by group and number: their names in a doc carry the drawn shapes)."""
    from tinytorch.milestone07.cases import CASES, HIDDEN_COUNTS, HIDDEN_PREFIX
    from tinytorch.milestone07.checks import CHECKS

    out = [("case", c.name) for c in CASES]
    out += [("check", name) for name, _fn, _check in CHECKS]
    out += [("check", MUTATION_CHECK)] + ([("check", OWN_WORK_CHECK)] if grading else [])
    if grading:
        out += [
            ("hidden_case", f"{HIDDEN_PREFIX}{group}/{i}")
            for group, n in HIDDEN_COUNTS.items()
            for i in range(n)
        ]
    return out


def _hidden_slot(name: str) -> str:
    """A hidden case's place in assignment_items: `hidden/<group>/<i>/<shape...>` -> its first
    three parts."""
    return "/".join(name.split("/")[:3])


def score_items(doc: dict[str, Any], points: Points) -> list[Item]:
    """Every item of the assignment (assignment_items, in its order), scored from a milestone
    doc; the doc's own items that the assignment lacks come after (a run's extra cases)."""
    grading = bool(doc.get("grading", bool(doc.get("hidden_cases"))))  # a doc that says neither
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for kind, key in _KINDS.items():
        for entry in doc.get(key) or []:
            slot = _hidden_slot(entry["name"]) if kind == "hidden_case" else entry["name"]
            found.setdefault((kind, slot), entry)
    worked = any(e.get("status") == "pass" for (kind, _), e in found.items() if kind != "check")
    why = str(doc.get("error") or "") or "the run did not reach it"

    def scored(kind: str, slot: str, entry: dict[str, Any] | None) -> Item:
        if entry is None:
            worth = points.of(kind, slot)
            return Item(kind, slot, NOT_GRADED, 0.0, worth, f"not graded: {why}", "", graded=False)
        worth = points.of(kind, entry["name"])
        status = entry.get("status", "")
        vacuous = status == "pass" and kind == "check" and entry["name"] in VACUOUS_CHECKS
        vacuous = vacuous and not worked
        detail = entry.get("detail", "")
        if vacuous:
            detail += " (no points: no case passed, so there was no work of yours to check)"
        return Item(
            kind=kind,
            name=entry["name"],
            status=status,
            earned=worth if status == "pass" and not vacuous else 0.0,
            max_points=worth,
            detail=detail,
            lesson=entry.get("lesson", ""),
        )

    items = [
        scored(kind, slot, found.pop((kind, slot), None))
        for kind, slot in assignment_items(grading)
    ]
    # a doc's items the assignment does not list (none today) are kept, after the others
    return items + [scored(kind, slot, entry) for (kind, slot), entry in found.items()]


def graded(items: list[Item]) -> list[Item]:
    """The items the run itself reported (not the assignment's items it did not reach)."""
    return [i for i in items if i.graded]


def total(items: list[Item]) -> tuple[float, float]:
    """(earned, possible) over `items`."""
    return sum(i.earned for i in items), sum(i.max_points for i in items)
