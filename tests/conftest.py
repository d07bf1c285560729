"""Shared pytest setup: one hypothesis profile for every test file.

No deadline: two shared cores make per-example timings noisy, and timing is not what we test.
Set HYPOTHESIS_PROFILE=thorough for a longer local run.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "tinytorch",
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", parent=settings.get_profile("tinytorch"), max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "tinytorch"))
