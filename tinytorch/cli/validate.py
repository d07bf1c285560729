"""The CLI's argument validators, in one place: every `tito` command parses numbers through these,
so a bad value is a usage error (exit 2) that names what was expected."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def positive(
    kind: type = float, expected: str = "a number", unit: str = ""
) -> Callable[[str], int | float]:
    """An argparse `type` that accepts a number of `kind` greater than 0."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0{unit}, got {text!r}")
        return value

    return parse


positive_seconds = positive(float, "seconds", " seconds")
megabytes = positive(int, "whole megabytes", " MB")
