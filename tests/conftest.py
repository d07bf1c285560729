"""Shared pytest setup: one hypothesis profile for every test file.

No deadline: two shared cores make per-example timings noisy, and timing is not what we test.
Under CI (the CI variable set, as .ci/run does) examples are derandomised, so a red run repeats.
HYPOTHESIS_PROFILE=thorough runs 300 examples per test locally.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "tinytorch",
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "tinytorch-ci", parent=settings.get_profile("tinytorch"), derandomize=True, database=None
)
settings.register_profile("thorough", parent=settings.get_profile("tinytorch"), max_examples=300)
default = "tinytorch-ci" if os.environ.get("CI") else "tinytorch"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", default))
