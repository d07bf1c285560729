"""`tito info`: the environment that timings and grades depend on."""

from __future__ import annotations

import argparse
import json
import platform
import sys
from typing import Any

import numpy as np

from tinytorch import __version__


def blas_info() -> list[dict[str, Any]]:
    """The BLAS/OpenMP libraries NumPy has loaded, with their thread counts (threadpoolctl)."""
    from threadpoolctl import threadpool_info

    return [
        {
            "api": lib.get("user_api"),
            "library": lib.get("internal_api"),
            "version": lib.get("version"),
            "threads": lib.get("num_threads"),
            "arch": lib.get("architecture"),
            "path": lib.get("filepath"),
        }
        for lib in threadpool_info()
    ]


def backend_report() -> list[dict[str, Any]]:
    """One row per optional backend: name, available, reason."""
    try:
        from tinytorch import extensions

        return [dict(row) for row in extensions.backend_status()]
    except Exception as exc:  # noqa: BLE001 -- a broken backend must not take `tito info` down
        reason = f"backend probe failed: {type(exc).__name__}: {exc}"
        return [{"name": "extensions", "available": False, "reason": reason}]


def environment() -> dict[str, Any]:
    """Everything `tito info` prints, as a dict (the milestone and grader embed it in JSON)."""
    return {
        "tinytorch": __version__,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "numpy": np.__version__,
        "blas": blas_info(),
        "backends": backend_report(),
    }


def _run(args: argparse.Namespace) -> int:
    env = environment()
    if args.json:
        print(json.dumps(env, indent=2))
        return 0
    print(f"tinytorch {env['tinytorch']}  Python {env['python']}  numpy {env['numpy']}")
    print(f"platform  {env['platform']} ({env['machine']})")
    if not env["blas"]:
        print("BLAS      none reported by threadpoolctl")
    for lib in env["blas"]:
        print(
            f"{lib['api']:<9} {lib['library']} {lib['version']} ({lib['arch']}), {lib['threads']} threads"
        )
    for row in env["backends"]:
        mark = "yes" if row["available"] else "no "
        print(f"{row['name']:<9} {mark}  {row['reason']}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="print Python, NumPy, BLAS, compiler and GPU backends")
    p.add_argument("--json", action="store_true", help="print the same facts as JSON")
    p.set_defaults(func=_run)
