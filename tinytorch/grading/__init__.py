"""Headless grading of the milestone notebook with nbclient (`tito grade`)."""

from tinytorch.grading.collect import collect
from tinytorch.grading.execute import Execution, execute, inject_parameters
from tinytorch.grading.grade import DEFAULT_NOTEBOOK, UsageError, grade

__all__ = [
    "DEFAULT_NOTEBOOK",
    "Execution",
    "UsageError",
    "collect",
    "execute",
    "grade",
    "inject_parameters",
]
