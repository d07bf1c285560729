"""The native build's status for the notebook's last cell: compile (or load from cache), then report."""

from __future__ import annotations

import time
from typing import Any


def native_status() -> dict[str, Any]:
    """Build the C++ SIMD kernels if needed and return what was built, how, and every backend's status.

    Never raises: a missing extension or a failed build becomes a reason, as Part B shows it.
    """
    report: dict[str, Any] = {"simd": None, "build_seconds": None, "backends": []}
    try:
        from tinytorch import extensions
    except Exception as exc:  # noqa: BLE001  (any import failure is a reason to show)
        report["backends"] = [{"name": "extensions", "available": False, "reason": repr(exc)}]
        return report
    try:
        from tinytorch.extensions import simd

        t0 = time.perf_counter()
        ok, reason = simd.available()  # compiles on first use; later calls hit the cache
        report["build_seconds"] = time.perf_counter() - t0
        info = simd.build_info()
        report["simd"] = dict(info) if not isinstance(info, dict) else info
        report["simd"].update(available=ok, reason=reason)
    except Exception as exc:  # noqa: BLE001  (a failed build is shown, not raised)
        report["simd"] = {"available": False, "reason": f"{type(exc).__name__}: {exc}"}
    try:
        report["backends"] = [dict(row) for row in extensions.backend_status()]
    except Exception as exc:  # noqa: BLE001  (a failed build is shown, not raised)
        report["backends"] = [{"name": "extensions", "available": False, "reason": repr(exc)}]
    return report


def native_status_text(report: dict[str, Any]) -> str:
    """Readable lines: the C++ build (status, ISA, OpenMP, threads, compiler, flags) and each backend."""
    lines = []
    simd = report.get("simd") or {}
    if simd:
        state = "built" if simd.get("available") else "NOT available"
        lines.append(f"C++ SIMD: {state}: {simd.get('reason', '')}")
        for key in ("isa", "openmp", "threads", "compiler", "flags", "cache_path", "error"):
            if simd.get(key) not in (None, "", [], ()):
                value = simd[key]
                value = " ".join(map(str, value)) if isinstance(value, (list, tuple)) else value
                lines.append(f"  {key:<10} {value}")
        if report.get("build_seconds") is not None:
            lines.append(
                f"  ready in   {report['build_seconds']:.2f} s (compile on first use, then cached)"
            )
    for row in report.get("backends", []):
        mark = "yes" if row.get("available") else "no "
        lines.append(f"{row.get('name')!s:<10} {mark}  {row.get('reason', '')}")
    return "\n".join(lines)
