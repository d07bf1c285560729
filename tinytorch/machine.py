"""Facts about this machine's CPU and BLAS, read in one place (`tito info`, `tito bench`, the
C++ build and Part B all ask here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo's "flags" (x86) or "Features" (Arm) line, or
    from the given text; empty where there is none."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return set()
    for line in cpuinfo.splitlines():
        key = line.split(":", 1)[0].strip().lower()
        if key in ("flags", "features") and ":" in line:
            return set(line.split(":", 1)[1].split())
    return set()


def blas_libraries() -> list[dict[str, Any]]:
    """The BLAS and OpenMP libraries loaded in this process, as threadpoolctl reports them."""
    from threadpoolctl import threadpool_info

    return list(threadpool_info())
