"""Milestone 07 (2024): Custom Kernels. A thin entry point: the milestone lives in tinytorch.milestone07.

    python milestones/07_2024_kernels/01_custom_kernels.py [--impl MODULE_OR_PATH] [--json PATH]
        [--seed N] [--no-part-b] [--timeout S]

Same as `tito milestone run 07`. Part A checks YOUR Module 17 kernels (tinytorch.perf.acceleration
by default) on 30 cases and decides the result; Part B times them beside NumPy, torch and the
bundled C++ SIMD / MPS / Triton kernels. Exit status 0 PASS, 1 NOT PASSED or INCOMPLETE, 2 usage.
"""

import sys

from tinytorch.cli.milestone import main_run

if __name__ == "__main__":
    sys.exit(main_run(sys.argv[1:]))
