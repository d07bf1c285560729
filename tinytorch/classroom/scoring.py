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


def score_items(doc: dict[str, Any], points: Points) -> list[Item]:
    """Every published case, deeper check and hidden case of a milestone doc, with its points."""
    items = []
    for kind, key in _KINDS.items():
        for entry in doc.get(key) or []:
            worth = points.of(kind, entry["name"])
            status = entry.get("status", "")
            items.append(
                Item(
                    kind=kind,
                    name=entry["name"],
                    status=status,
                    earned=worth if status == "pass" else 0.0,
                    max_points=worth,
                    detail=entry.get("detail", ""),
                    lesson=entry.get("lesson", ""),
                )
            )
    return items


def total(items: list[Item]) -> tuple[float, float]:
    """(earned, possible) over `items`."""
    return sum(i.earned for i in items), sum(i.max_points for i in items)
