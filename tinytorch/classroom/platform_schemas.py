"""JSON schemas of the platforms' result files, written from their documentation.

Gradescope: "Autograder Specifications", Output format (gradescope-autograders.readthedocs.io/
en/latest/specs/). PrairieLearn: "External Grading", Grading results (docs.prairielearn.com/
externalGrading/). Only the fields the documentation lists are allowed, so a typo fails.
"""

from __future__ import annotations

from typing import Any

_VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
_FORMAT = {"enum": ["text", "html", "simple_format", "md", "ansi"]}
_NUMBER = {"type": "number"}
_STRING = {"type": "string"}

GRADESCOPE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Gradescope autograder results.json",
    "type": "object",
    "additionalProperties": False,
    "anyOf": [
        {"required": ["score"]},
        {"properties": {"tests": {"items": {"required": ["score"]}}}, "required": ["tests"]},
    ],
    "properties": {
        "score": _NUMBER,
        "execution_time": _NUMBER,
        "output": _STRING,
        "output_format": _FORMAT,
        "test_output_format": _FORMAT,
        "test_name_format": _FORMAT,
        "visibility": _VISIBILITY,
        "stdout_visibility": _VISIBILITY,
        "extra_data": {"type": "object"},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "score": _NUMBER,
                    "max_score": _NUMBER,
                    "status": {"enum": ["passed", "failed"]},
                    "name": _STRING,
                    "name_format": _FORMAT,
                    "number": _STRING,
                    "output": _STRING,
                    "output_format": _FORMAT,
                    "tags": {"type": "array", "items": _STRING},
                    "visibility": _VISIBILITY,
                    "extra_data": {"type": "object"},
                },
            },
        },
        "leaderboard": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "value"],
                "properties": {
                    "name": _STRING,
                    "value": {"type": ["number", "string"]},
                    "order": {"enum": ["asc", "desc"]},
                },
            },
        },
    },
}

PRAIRIELEARN_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "PrairieLearn external grader results.json",
    "type": "object",
    "additionalProperties": False,
    "required": ["gradable"],
    "if": {"properties": {"gradable": {"const": True}}},
    "then": {"required": ["score"]},
    "properties": {
        "gradable": {"type": "boolean"},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "message": _STRING,
        "output": _STRING,
        "format_errors": {"type": ["object", "array", "string"]},
        "images": {"type": "array"},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "max_points"],
                "properties": {
                    "name": _STRING,
                    "description": _STRING,
                    "points": {"type": "number", "minimum": 0},
                    "max_points": {"type": "number", "minimum": 0},
                    "message": _STRING,
                    "output": _STRING,
                    "images": {"type": "array"},
                },
            },
        },
    },
}


def validate_gradescope(doc: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError unless `doc` is a documented Gradescope results.json."""
    import jsonschema

    jsonschema.validate(doc, GRADESCOPE_SCHEMA)
    for test in doc.get("tests", []):  # a relation JSON Schema cannot state
        if "max_score" in test and test.get("score", 0) > test["max_score"]:
            raise jsonschema.ValidationError(f"test {test.get('name')!r}: score > max_score")


def validate_prairielearn(doc: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError unless `doc` is a documented PrairieLearn results.json."""
    import jsonschema

    jsonschema.validate(doc, PRAIRIELEARN_SCHEMA)
    for test in doc.get("tests", []):
        if test.get("points", 0) > test["max_points"]:
            raise jsonschema.ValidationError(f"test {test['name']!r}: points > max_points")
