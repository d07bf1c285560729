"""The machine-readable result (`--json PATH`): what graders read. Bump SCHEMA_VERSION on change."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from tinytorch.milestone07.cases import FUNCTIONS, HIDDEN_GROUPS
from tinytorch.milestone07.diagnose import diagnose_result
from tinytorch.milestone07.results import (
    BENCH_STATUSES,
    CASE_STATUSES,
    CHECK_STATUSES,
    VERDICTS,
    PartAResult,
    PartBResult,
)

SCHEMA_VERSION = 3  # 2: grading, hidden_cases, isolation, warnings; verdict ERROR. 3: status protocol, group im2col

_NUM = {"type": ["number", "null"]}
_STR = {"type": "string"}
_CASE = {
    "type": "object",
    "required": ["name", "group", "title", "status", "max_error", "where", "detail", "lesson", "seconds", "blame"],
    "properties": {
        "name": _STR,
        "group": {"enum": list(HIDDEN_GROUPS)},  # im2col: hidden cases only
        "title": _STR,
        "status": {"enum": list(CASE_STATUSES)},
        "max_error": _NUM,
        "where": {"type": ["array", "null"], "items": {"type": "integer"}},
        "detail": _STR,
        "lesson": _STR,
        "seconds": {"type": "number", "minimum": 0},
        "blame": {"type": "array", "items": {"enum": list(FUNCTIONS)}},
        "evidence": {"type": ["object", "null"]},
    },
}  # fmt: skip
_CHECK = {
    "type": "object",
    "required": ["name", "status", "detail", "lesson", "blame"],
    "properties": {
        "name": _STR,
        "status": {"enum": list(CHECK_STATUSES)},
        "detail": _STR,
        "lesson": _STR,
        "blame": {"type": "array", "items": {"enum": list(FUNCTIONS)}},
        "evidence": {"type": ["object", "null"]},
        "names_cause": {"type": "boolean"},
    },
}
_DIAGNOSIS = {
    "type": "object",
    "required": ["root_causes", "lessons", "cause_of", "lesson_of", "not_run"],
    "properties": {
        "root_causes": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["check", "status", "detail", "lesson", "blame", "groups", "cases"],
            },
        },
        "lessons": {
            "type": "array",
            "items": {"type": "object", "required": ["text", "cases", "group"]},
        },
        "cause_of": {"type": "object", "additionalProperties": _STR},
        "lesson_of": {"type": "object", "additionalProperties": _STR},
        "not_run": {"type": "array", "items": _STR},
        "consequence_of": {"type": "object", "additionalProperties": _STR},
    },
}
_ROW = {
    "type": "object",
    "required": ["problem", "kind", "backend", "status", "ms", "gflops", "gbps", "detail"],
    "properties": {
        "problem": _STR,
        "kind": {"enum": ["gemm", "bias_gelu", "gelu"]},
        "backend": _STR,
        "status": {"enum": list(BENCH_STATUSES)},
        "ms": _NUM,
        "gflops": _NUM,
        "gbps": _NUM,
        "detail": _STR,
        "min_ms": _NUM,
        "samples": {"type": "integer", "minimum": 0},
        "flags": {"type": "array", "items": {"enum": ["noisy", "not_credible", "incorrect"]}},
        "spread": _NUM,
        "load": _NUM,
        "flops": _NUM,
        "bytes": _NUM,
        "pass_ms": _NUM,  # optional (an addition within version 3): one pass, same rounds
    },
}
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "TinyTorch Milestone 07 result",
    "type": "object",
    "required": ["schema_version", "milestone", "verdict", "impl", "seed", "summary", "missing", "cases", "checks", "part_b", "environment", "grading", "hidden_cases", "isolation", "warnings"],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "milestone": {"const": "07"},
        "verdict": {"enum": list(VERDICTS)},
        "impl": _STR,
        "seed": {"type": "integer"},
        "timeout_s": {"type": "number"},
        "seconds": {"type": "number"},
        "summary": {
            "type": "object",
            "required": ["cases_passed", "cases_total", "checks_passed", "checks_total"],
            "properties": {k: {"type": "integer", "minimum": 0} for k in ("cases_passed", "cases_total", "checks_passed", "checks_total")},
        },
        "missing": {"type": "array", "items": _STR},
        "cases": {"type": "array", "items": _CASE},
        "grading": {"type": "boolean"},
        "hidden_cases": {"type": "array", "items": _CASE},
        "isolation": {
            "type": "object",
            "additionalProperties": {"type": "object", "required": ["active", "why"], "properties": {"active": {"type": "boolean"}, "why": _STR}},
        },
        "warnings": {"type": "array", "items": _STR},
        "error": {"type": ["string", "null"]},
        "checks": {"type": "array", "items": _CHECK},
        "diagnosis": _DIAGNOSIS,
        "part_b": {
            "type": ["object", "null"],
            "required": ["rows", "backends", "seconds"],
            "properties": {
                "rows": {"type": "array", "items": _ROW},
                "backends": {"type": "array", "items": {"type": "object", "required": ["name", "available", "reason"]}},
                "seconds": {"type": "number"},
                "warnings": {"type": "array", "items": _STR},
                "ceilings": {"type": ["object", "null"]},
            },
        },
        "environment": {"type": ["object", "null"]},
    },
}  # fmt: skip


def _finite(value: Any) -> Any:
    """JSON has no NaN/inf: they become null (a max_error is never NaN, but a timing might be)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def to_json(a: PartAResult, b: PartBResult | None, env: dict | None = None) -> dict[str, Any]:
    """The result as a JSON-ready dict (schema_version SCHEMA_VERSION; see SCHEMA)."""
    doc = {
        "schema_version": SCHEMA_VERSION,
        "milestone": "07",
        "verdict": a.verdict,
        "impl": a.impl,
        "graded_file": a.impl.replace("\\", "/").rsplit("/", 1)[-1] if a.impl else "",
        "seed": a.seed,
        "timeout_s": a.timeout,
        "seconds": a.seconds,
        "summary": {
            "cases_passed": a.passed(),
            "cases_total": len(a.cases),
            "checks_passed": sum(c.ok for c in a.checks),
            "checks_total": len(a.checks),
        },
        "missing": list(a.missing),
        "cases": [dataclasses.asdict(c) for c in a.cases],
        "grading": a.grading,
        "hidden_cases": [dataclasses.asdict(c) for c in a.hidden],
        "isolation": dict(a.isolation),
        "warnings": list(a.warnings),
        "error": a.error,
        "checks": [dataclasses.asdict(c) for c in a.checks],
        "diagnosis": diagnose_result(a).to_dict(),
        "part_b": None
        if b is None
        else {
            "rows": [dataclasses.asdict(r) for r in b.rows],
            "backends": list(b.backends),
            "seconds": b.seconds,
            "warnings": list(b.warnings),
            "ceilings": b.ceilings,
        },
        "environment": env,
    }
    return _finite(doc)


def validate(doc: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError if `doc` does not match SCHEMA (needs jsonschema)."""
    import jsonschema

    jsonschema.validate(doc, SCHEMA)
