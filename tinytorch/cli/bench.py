"""`tito bench`: native kernels vs NumPy/OpenBLAS and torch, beside the machine's measured ceilings."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _fmt(value: Any, spec: str = "7.1f") -> str:
    return "n/a".rjust(len(format(0.0, spec))) if value is None else format(value, spec)


def render(report: dict[str, Any]) -> str:
    """The report as plain-text tables (figures, then the fraction of the ceiling in brackets)."""
    lines: list[str] = []
    b = report.get("build", {})
    lines.append(
        f"C++ kernels: {b.get('isa')} | OpenMP {b.get('openmp')} | {b.get('compiler_version')}"
    )
    lines.append(f"torch: {report.get('torch', {}).get('reason', 'n/a')}")
    if "error" in report:
        lines.append(f"ERROR: {report['error']}")
        return "\n".join(lines)
    c = report["ceilings"]
    lines.append(
        f"Ceilings: FMA peak {c['fma_gflops_1t']:.0f} GFLOP/s (1 thread), "
        f"{c['fma_gflops_2t']:.0f} (2 threads); copy {c['copy_gbs_1t']:.1f} GB/s (1t), "
        f"{c['copy_gbs_2t']:.1f} (2t), NumPy copyto {c['copy_gbs_numpy']:.1f}"
    )
    lines.append("")
    lines.append("GEMM n x n x n, GFLOP/s (fraction of FMA peak at the same thread count)")
    head = f"{'n':>5} | {'C++ 1t':>13} | {'OpenBLAS 1t':>13} | {'ratio':>5} | "
    head += f"{'C++ 2t':>13} | {'OpenBLAS 2t':>13} | {'ratio':>5} | {'torch 2t':>13}"
    lines.append(head)
    for r in report["gemm"]:

        def cell(key: str, r: dict[str, Any] = r) -> str:
            frac = r.get(f"{key} / peak")
            return f"{_fmt(r.get(key))} ({_fmt(frac, '.2f') if frac else ' n/a'})"

        lines.append(
            f"{r['n']:>5} | {cell('c++ 1t')} | {cell('numpy 1t')} | {r['ratio 1t']:5.2f} | "
            f"{cell('c++ 2t')} | {cell('numpy 2t')} | {r['ratio 2t']:5.2f} | {cell('torch 2t')}"
        )
    lines.append("")
    lines.append(
        "bias+GELU y = gelu(x + bias), GB/s (fraction of copy bandwidth); "
        "'alloc' = a new output per call"
    )
    lines.append(
        f"{'shape':>9} | {'C++ 1t':>13} | {'C++ 2t':>13} | {'NumPy':>13} | "
        f"{'torch 2t':>13} | C++/torch | {'C++ 2t alloc':>13} | {'torch 2t alloc':>14} | C++/torch"
    )
    for r in report["bias_gelu"]:

        def gcell(key: str, r: dict[str, Any] = r) -> str:
            frac = r.get(f"{key} / copy")
            return f"{_fmt(r.get(key))} ({_fmt(frac, '.2f') if frac else ' n/a'})"

        lines.append(
            f"{r['shape']:>9} | {gcell('c++ 1t')} | {gcell('c++ 2t')} | {gcell('numpy')} | "
            f"{gcell('torch 2t')} | {_fmt(r.get('c++ / torch'), '8.1f')}x | "
            f"{gcell('c++ 2t alloc')} | {gcell('torch 2t alloc')} | "
            f"{_fmt(r.get('c++ / torch alloc'), '8.1f')}x"
        )
    lines.append("")
    lines.append("Fused C = gelu(A @ B + bias) vs GEMM then bias+GELU (C++), GFLOP/s")
    for r in report["fused"]:
        lines.append(
            f"{r['n']:>5} ({r['threads']}t) fused {r['fused']:7.1f} | unfused "
            f"{r['gemm then bias+gelu']:7.1f} | speedup {r['speedup']:.2f}x"
        )
    tc = report.get("threads_check", {})
    if tc:
        lines.append("")
        lines.append(f"Thread check, C++ GEMM {tc['n']} GFLOP/s: alone vs beside torch's libgomp")
        rates = {k: v for k, v in tc.items() if k not in ("n", "team_size_asked_2")}
        lines.append("  " + " | ".join(f"{k} {_fmt(v, '.1f')}" for k, v in rates.items()))
        lines.append(
            "  OpenMP team beside torch after torch.set_num_threads(1), asking for 2: "
            f"{tc.get('team_size_asked_2')}"
        )
    lines.append("")
    bad = [c for c in report["checks"] if not c["ok"]]
    lines.append(
        f"Correctness checks: {len(report['checks']) - len(bad)}/{len(report['checks'])} passed"
        + "".join(f"\n  FAILED {c['check']}: max err {c['max_abs_err']:.2e}" for c in bad)
    )
    for t in report.get("targets", []):
        mark = "met    " if t["met"] else "NOT met"
        lines.append(f"  {mark} {t['target']}: {_fmt(t['value'], '.2f')}")
    la, lb = report.get("loadavg_before"), report.get("loadavg_after")
    if la and lb:
        lines.append(
            f"Load average before {la[0]:.2f}, after {lb[0]:.2f} (other work skews timings)"
        )
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    from tinytorch.cli.info import environment
    from tinytorch.extensions import benchmark

    if args.rounds is not None and args.rounds < 1:
        print("tito bench: --rounds must be >= 1", file=sys.stderr)
        return 2
    report = benchmark.run(
        quick=args.quick,
        rounds=args.rounds,
        progress=lambda m: print(f"... {m}", file=sys.stderr),
    )
    report["environment"] = environment()
    report["command"] = (
        "tito bench"
        + (" --quick" if args.quick else "")
        + (f" --rounds {args.rounds}" if args.rounds else "")
    )
    print(render(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
        print(f"wrote {args.json}")
    if "error" in report:
        return 1
    return 0 if all(c["ok"] for c in report["checks"]) else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench", help="time the C++ kernels against NumPy/OpenBLAS and torch, with ceilings"
    )
    p.add_argument("--json", metavar="PATH", help="also write the full report as JSON")
    p.add_argument("--quick", action="store_true", help="one small size per section (seconds)")
    p.add_argument(
        "--rounds", type=int, help="interleaved rounds per figure (default 9, 3 with --quick)"
    )
    p.set_defaults(func=_run)
