"""`tito bench`: the C++ kernels vs OpenBLAS and torch, per ISA, beside this machine's ceilings.

Each ISA runs in its own child (`python -m tinytorch.bench.native`) with
TINYTORCH_SIMD_ISA set, so the C++ build for that path is the one loaded. For the AVX2 path on an
AVX-512 CPU the child also gets OPENBLAS_CORETYPE=Haswell before NumPy loads, so OpenBLAS is held
to its own AVX2 kernels (like for like); threadpoolctl then reports which kernels it picked.
Without --isa: the native path, plus the AVX2 path when the CPU has AVX-512 (the AVX2 table is
always there on x86).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tinytorch.machine import cpu_flags
from tinytorch.profiling.credible import busy_trust
from tinytorch.profiling.load import NOISY_LOAD

ISAS = ("native", "avx2", "avx512", "scalar")
CHILD_TIMEOUT_S = 3600


def plan(isa: str | None, flags: set[str], machine: str | None = None) -> list[str]:
    """Which ISA paths to benchmark: the one asked for, or native (+ avx2 on an AVX-512 CPU)."""
    if isa is not None:
        return [isa]
    machine = machine or platform.machine()
    if machine in ("x86_64", "AMD64") and "avx512f" in flags:
        return ["avx512", "avx2"]
    if machine in ("x86_64", "AMD64") and "avx2" in flags:
        return ["avx2"]
    return ["native"]


def child_env(isa: str, flags: set[str]) -> dict[str, str]:
    """The child's environment: the ISA, and OpenBLAS held to AVX2 kernels for a like-for-like ratio."""
    env = dict(os.environ, TINYTORCH_SIMD_ISA=isa)
    env.pop("OPENBLAS_CORETYPE", None)
    if isa == "avx2" and "avx512f" in flags:
        env["OPENBLAS_CORETYPE"] = "Haswell"
    return env


def run_isa(isa: str, flags: set[str], quick: bool, rounds: int | None) -> dict[str, Any]:
    """One child for one ISA; its JSON report, with the OpenBLAS kernel check added."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "tinytorch.bench.native", "--out", str(out)]
        cmd += ["--quick"] if quick else []
        cmd += ["--rounds", str(rounds)] if rounds else []
        env = child_env(isa, flags)
        try:
            proc = subprocess.run(cmd, env=env, timeout=CHILD_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return {
                "isa_requested": isa,
                "error": f"benchmark child gave no report in {CHILD_TIMEOUT_S} s",
                "checks": [],
            }
        if not out.exists():
            return {
                "isa_requested": isa,
                "error": f"benchmark child exited {proc.returncode} without a report",
                "checks": [],
            }
        report = json.loads(out.read_text())
    want = env.get("OPENBLAS_CORETYPE")
    if want:
        archs = [lib.get("architecture") for lib in report.get("blas", [])]
        held = bool(archs) and all(str(a).lower() == want.lower() for a in archs)
        report["coretype_check"] = {"wanted": want, "seen": archs, "ok": held}
        if not held:  # the ratios compare this path with other OpenBLAS kernels: no target met
            for target in report.get("targets", []):
                if "OpenBLAS" in target["target"]:
                    target["met"] = False
                    target["note"] = f"not like for like: OpenBLAS ran {archs}, not {want}"
    return report


# ---- rendering ----------------------------------------------------------------------------------
def table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Right-aligned columns sized to their widest cell, separated by ' | '."""
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)
    ]

    def fmt(cells: Sequence[str]) -> str:
        return " | ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))

    return [fmt(head), "-+-".join("-" * w for w in widths), *(fmt(r) for r in rows)]


def _fig(value: float | None, frac: float | None = None) -> str:
    """'40.5 (0.44)': a figure and its fraction of the ceiling; '-' when not measured."""
    if value is None:
        return "-"
    return f"{value:.1f}" + (f" ({frac:.2f})" if frac is not None else "")


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _cell(row: dict[str, Any], key: str, frac_key: str | None = None) -> str:
    """A figure with its fraction, or "withheld" when it was impossible (the reason is listed)."""
    if key in (row.get("withheld") or {}):
        return "withheld"
    if frac_key is None:
        return _ratio(row.get(key))
    return _fig(row.get(key), row.get(frac_key))


def _row_notes(rows: Sequence[dict[str, Any]], label: str) -> list[str]:
    """Under a table: each withheld figure with why, each same-rounds ceiling that moved."""
    lines = []
    for r in rows:
        for key, why in (r.get("withheld") or {}).items():
            lines.append(f"  withheld, {label(r)} {key}: {why}")
        for key in r.get("moved") or []:
            lines.append(
                f"  moved, {label(r)}: the {key} ceiling timed in this row's rounds differs from "
                "the ceilings above beyond the noise rule: the machine changed during the run"
            )
    return lines


BUSY_TRUST = busy_trust("the correctness checks", "the ratio columns")


def _ceiling_line(c: dict[str, Any]) -> list[str]:
    """The ceilings block: each figure per thread count, "withheld" where it was impossible."""

    def per_thread(prefix: str, digits: int) -> str:
        cells = []
        for t in (1, 2):
            key = f"{prefix}_{t}t"
            where = f"on {t} thread{'s' if t > 1 else ''}"
            value = "withheld" if key not in c else f"{c[key]:.{digits}f}"
            cells.append(f"{value} {where}")
        return ", ".join(cells)

    fma, copy = per_thread("fma_gflops", 0), per_thread("copy_gbs", 1)
    lines = [f"this machine: FMA peak {fma} (GFLOP/s); copy bandwidth {copy} (GB/s)"]
    lines += [f"  withheld {key}: {why}" for key, why in (c.get("withheld") or {}).items()]
    if c.get("moved"):
        lines.append(
            f"  moved: {', '.join(c['moved'])}: their rounds disagree beyond the noise rule; "
            "each is the best of its rounds"
        )
    return lines


def _kernel_line(report: dict[str, Any]) -> str:
    b, k = report.get("build", {}), report.get("kernel", {})
    blocks = k.get("blocks")
    block_text = (
        " ".join(f"{key}={val}" for key, val in blocks.items())
        if isinstance(blocks, dict)
        else "not reported by this build"
    )
    asked, isa = report.get("isa_requested"), k.get("isa") or b.get("isa")
    lines = [
        f"ISA asked: {asked} | built: {isa} | OpenMP: {b.get('openmp')} | {b.get('compiler_version')}",
        f"micro-kernel: {k.get('microkernel') or 'not reported by this build'} | blocks: {block_text}",
    ]
    if asked not in (None, "native") and isa and asked not in str(isa):
        lines.append(
            f"NOTE: asked for the {asked} path but this build loaded {isa}: it does not honour "
            "TINYTORCH_SIMD_ISA (or the CPU lacks that ISA), so this table is the native path"
        )
    return "\n".join(lines)


def render_run(report: dict[str, Any]) -> str:
    lines = [f"== C++ path {report.get('isa_requested')} ==", _kernel_line(report)]
    for lib in report.get("blas", []):
        lines.append(
            f"BLAS: {lib.get('internal_api')} {lib.get('version')}, kernels {lib.get('architecture')}"
        )
    cc = report.get("coretype_check")
    if cc:
        lines.append(
            f"OPENBLAS_CORETYPE={cc['wanted']}: threadpoolctl saw {cc['seen']} ({'held' if cc['ok'] else 'NOT held: ratio is not like for like'})"
        )
    torch = report.get("torch", {})
    has_torch = bool(torch.get("available"))
    lines.append(f"torch: {torch.get('reason', 'not measured')}")
    if "error" in report:
        lines.append(f"ERROR: {report['error']}")
        return "\n".join(lines)
    lines += _ceiling_line(report["ceilings"])
    uk = report.get("ukernel")
    if uk and uk.get("A in L1"):
        lines.append(
            f"micro-kernel alone, 1 thread, KC={uk['kc']}: {_fig(uk['A in L1'], uk['A in L1 / peak'])} "
            f"GFLOP/s with A in L1, {_fig(uk['A from L2'], uk['A from L2 / peak'])} with a block of "
            f"{uk['slivers']} A slivers from L2 (fraction of the FMA peak): what the GEMM rows lose "
            "beyond this is packing, caches and threads"
        )
    lines += [
        "",
        "GEMM n x n x n, GFLOP/s (fraction of the FMA peak at the same thread count); each ratio is the median of the rounds' own ratios, both samples of a round taken moments apart; 'C++ 1t / FMA': over the 1-thread FMA peak timed in the same rounds",
    ]
    if cc and not cc["ok"]:
        lines.append(
            f"NOT LIKE FOR LIKE: OpenBLAS was asked for its {cc['wanted']} kernels but ran {cc['seen']}, so the ratio columns compare this path with other kernels; the ratio targets are not met"
        )
    head = ["n", "C++ 1t", "OpenBLAS 1t", "ratio", "C++ 2t", "OpenBLAS 2t", "ratio"]
    head += ["C++ 2t/1t", "C++ 1t / FMA"] + (["torch 2t"] if has_torch else [])
    rows = []
    for r in report["gemm"]:
        cells = [str(r["n"])]
        for t in (1, 2):
            cells += [
                _cell(r, f"c++ {t}t", f"c++ {t}t / peak"),
                _cell(r, f"numpy {t}t", f"numpy {t}t / peak"),
                _ratio(r.get(f"ratio {t}t")),
            ]
        cells += [_cell(r, "c++ 2t / 1t"), _cell(r, "c++ 1t / fma 1t")]
        if has_torch:
            cells.append(_cell(r, "torch 2t", "torch 2t / peak"))
        rows.append(cells)
    lines += table(head, rows)
    lines += _row_notes(report["gemm"], lambda r: f"n={r['n']}")
    lines += [
        "",
        "bias+GELU y = gelu(x + bias), GB/s (fraction of the copy bandwidth); 'copy 2t': the copy kernel on the same array in the same rounds, C++/copy the median of the rounds' ratios; 'alloc': a new output per call",
    ]
    head = ["shape", "C++ 1t", "C++ 2t", "copy 2t", "C++/copy", "NumPy", "C++ 2t alloc"] + (
        ["torch 2t", "C++/torch", "torch 2t alloc", "C++/torch alloc"] if has_torch else []
    )
    rows = []
    for r in report["bias_gelu"]:
        cells = [r["shape"]] + [_cell(r, k, f"{k} / copy") for k in ("c++ 1t", "c++ 2t")]
        cells += [
            _fig(r.get("copy 2t"), r.get("copy 2t / copy")),
            _ratio(r.get("c++ 2t / copy 2t")),
        ]
        cells += [_cell(r, k, f"{k} / copy") for k in ("numpy", "c++ 2t alloc")]
        if has_torch:
            cells += [
                _cell(r, "torch 2t", "torch 2t / copy"),
                _ratio(r.get("c++ / torch")),
                _cell(r, "torch 2t alloc", "torch 2t alloc / copy"),
                _ratio(r.get("c++ / torch alloc")),
            ]
        rows.append(cells)
    lines += table(head, rows)
    lines += _row_notes(report["bias_gelu"], lambda r: r["shape"])
    lines += [
        "",
        "fused C = gelu(A @ B + bias) vs GEMM then bias+GELU (C++), GFLOP/s (fraction of the FMA peak at the same thread count)",
    ]
    rows = [
        [
            str(r["n"]),
            str(r["threads"]),
            _cell(r, "fused", "fused / peak"),
            _cell(r, "gemm then bias+gelu", "gemm then bias+gelu / peak"),
            _ratio(r.get("speedup")),
        ]
        for r in report["fused"]
    ]
    lines += table(["n", "threads", "fused", "unfused", "speedup"], rows)
    lines += _row_notes(report["fused"], lambda r: f"n={r['n']}")
    tc = report.get("threads_check", {})
    if tc:
        rates = [k for k in tc if k.startswith(("alone ", "beside torch ")) and "/" not in k]
        lines += [
            "",
            f"thread check, C++ GEMM {tc['n']}, GFLOP/s (fraction of the FMA peak): alone vs beside torch's libgomp",
        ]
        lines += table(rates, [[_cell(tc, k, f"{k} / peak") for k in rates]])
        lines += _row_notes([tc], lambda r: "thread check")
        if "team_size_asked_2" in tc:
            lines.append(
                f"OpenMP team beside torch after torch.set_num_threads(1), asking for 2: {tc['team_size_asked_2']}"
            )
    bad = [c for c in report["checks"] if not c["ok"]]
    lines += [
        "",
        f"correctness checks: {len(report['checks']) - len(bad)}/{len(report['checks'])} passed",
    ]
    lines += [
        f"  FAILED {c['check']}: max err {c['max_abs_err']:.2e} > {c['atol']:.1e}" for c in bad
    ]
    lines += ["", "targets, as information about this machine and this run:"]
    for t in report.get("targets", []):
        # Truncated, not rounded, to 3 decimals: 0.8496 against 0.85 reads 0.849, never 0.85 "below".
        value = (
            "not measured" if t["value"] is None else f"{math.floor(t['value'] * 1000) / 1000:.3f}"
        )
        note = f"  ({t['note']})" if t.get("note") else ""
        lines.append(
            f"  {'met  ' if t['met'] else 'below'}  {value:>12} (want >= {t['want']:g})  {t['target']}{note}"
        )
    loads = [r.get("load") for k in ("gemm", "bias_gelu", "fused") for r in report.get(k, [])]
    busiest = max((v for v in loads if v is not None), default=None)
    if busiest is not None and busiest > NOISY_LOAD:
        lines.append(
            f"WARNING: the machine was busy: other processes kept up to {busiest:.1f} cores busy "
            "during the timings, so these figures are noisy: rerun on a quiet machine. "
            + BUSY_TRUST
        )
    la, lb = report.get("loadavg_before"), report.get("loadavg_after")
    if la and lb:
        lines.append(
            f"load average before {la[0]:.2f}, after {lb[0]:.2f}: other work on the machine lowers every figure"
        )
    return "\n".join(lines)


def render(doc: dict[str, Any]) -> str:
    return "\n\n".join(render_run(r) for r in doc["runs"])


def _run(args: argparse.Namespace) -> int:
    from tinytorch.profiling.environment import environment

    if args.rounds is not None and args.rounds < 1:
        print(f"tito bench: --rounds must be an int >= 1, got {args.rounds}", file=sys.stderr)
        return 2
    flags = cpu_flags()
    runs = [run_isa(isa, flags, args.quick, args.rounds) for isa in plan(args.isa, flags)]
    command = (
        "tito bench"
        + (" --quick" if args.quick else "")
        + (f" --rounds {args.rounds}" if args.rounds else "")
    )
    command += f" --isa {args.isa}" if args.isa else ""
    doc = {"command": command, "environment": environment(), "runs": runs}
    print(render(doc))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2, default=str))
        print(f"wrote {args.json}")
    if any("error" in r for r in runs):
        return 1
    return 0 if all(c["ok"] for r in runs for c in r["checks"]) else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench", help="time the C++ kernels against NumPy/OpenBLAS and torch, with ceilings"
    )
    p.add_argument("--json", metavar="PATH", help="also write the full report as JSON")
    p.add_argument("--quick", action="store_true", help="one small size per section (seconds)")
    p.add_argument(
        "--rounds", type=int, help="interleaved rounds per figure (default 9, 3 with --quick)"
    )
    p.add_argument(
        "--isa",
        choices=ISAS,
        help="benchmark this C++ path only (default: native, plus avx2 on AVX-512 CPUs)",
    )
    p.set_defaults(func=_run)
