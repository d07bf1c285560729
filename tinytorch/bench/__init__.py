"""Timing kernels: Part B of the milestone, `tito bench` and the notebook's timings.

    part_b.py        Part B: the student's kernels, NumPy, torch and the native kernels, in
                     three child processes, each row with its spread, load and flags
    tasks.py         what those children run (registered in TASKS)
    report.py        Part B in words: its table, one progress line per row, the busy sentence
    native.py        `tito bench`'s per-ISA run of the C++ kernels against OpenBLAS and torch
    torch_worker.py  torch in a child of its own (its OpenMP runtime stays out of ours)

The timing policy, ceilings, problems and the rules for which figures can be believed
(profiling/credible.py) live in tinytorch.profiling.
"""
