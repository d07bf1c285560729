"""What the compiler made of the x86 GEMM micro-kernels, read back with objdump.

gcc 12 with -funroll-loops once turned the 6x16 AVX2 intrinsics into 12 FMAs per k step that each
reloaded B from memory (16 ymm registers were not enough for two interleaved k steps): 0.6x
OpenBLAS. The AVX2 inner loop is now inline asm, and these tests keep it honest under every flag
set the build can choose, plus -march targets and unrolling/-O2 variants: the AVX2 micro-kernel's
FMAs take B from registers (no memory operand), and the AVX-512 one takes at most its A
broadcasts ({1to16}) from memory and never spills to the stack, under the same kind of flag sets.
The AVX-512 kernel is only compiled and disassembled here; running it needs an AVX-512F CPU
(tests/test_ext_isa_paths.py).
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tinytorch.extensions import build, simd

CXX = build.find_compiler()
OBJDUMP = shutil.which("objdump")
X86 = platform.machine().lower() in ("x86_64", "amd64")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CXX is None, reason="no C++ compiler"),
    pytest.mark.skipif(OBJDUMP is None, reason="no objdump (binutils) to disassemble with"),
    pytest.mark.skipif(not X86, reason="the host compiler does not target x86-64"),
]

FMA = re.compile(r"\bvfn?m(?:add|sub)(?:132|213|231)ps\b(.*)")


def disassemble(library: Path, symbol: str) -> list[str]:
    """The instructions of the function whose demangled name contains `symbol(`."""
    assert OBJDUMP is not None
    out = subprocess.run(
        [OBJDUMP, "-d", "-C", "--no-show-raw-insn", str(library)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    lines: list[str] = []
    inside = False
    for line in out.splitlines():
        if line.endswith(">:"):
            inside = f"{symbol}(" in line
            continue
        if inside and line.strip():
            lines.append(line.split(":", 1)[-1].strip())
    assert lines, f"{symbol} not found in {library}"
    return lines


def compile_library(tmp_path: Path, flags: list[str]) -> Path:
    """kernels.cpp built as the build would (base + optional flags, -funroll-loops included)."""
    assert CXX is not None
    lib = tmp_path / "k.so"
    cmd = [*CXX, *build.BASE_FLAGS, *build.OPTIONAL_FLAGS, *flags, "-fopenmp", str(build.SOURCE)]
    proc = subprocess.run(
        [*cmd, "-o", str(lib)], capture_output=True, text=True, timeout=300, check=False
    )
    if proc.returncode != 0:
        pytest.skip(f"the compiler rejects {flags}: {proc.stderr.strip()[-300:]}")
    return lib


def fma_operands(lines: list[str]) -> list[str]:
    """The operand text of every vector FMA in `lines`."""
    return [m.group(1).strip() for line in lines if (m := FMA.search(line))]


AVX2_FLAG_SETS = [*build.ISA_FLAGS["avx2"], ["-march=haswell"], ["-march=znver3"]]
AVX512_FLAG_SETS = [
    *build.ISA_FLAGS["avx512"],  # the build's choice and its -m fallback
    ["-march=skylake-avx512"],
    ["-march=sapphirerapids"],
]
EXTRA_FLAGS = [[], ["-funroll-all-loops"], ["-O2"]]


def flag_matrix(flag_sets: list[list[str]]) -> list:
    """Each flag set, alone and with each of EXTRA_FLAGS: the same matrix for every micro-kernel."""
    return [
        pytest.param([*flags, *extra], id=" ".join([*flags, *extra]))
        for extra in EXTRA_FLAGS
        for flags in flag_sets
    ]


@pytest.mark.parametrize("flags", flag_matrix(AVX2_FLAG_SETS))
def test_avx2_micro_kernel_fmas_never_take_b_from_memory(tmp_path, flags: list[str]) -> None:
    lines = disassemble(compile_library(tmp_path, flags), "ukernel_avx2_6x16")
    ops = fma_operands(lines)
    assert len(ops) >= 12 * 4, f"expected the 4x-unrolled 6x16 loop, found {len(ops)} FMAs"
    memory = [op for op in ops if "(" in op]
    assert memory == [], f"memory-operand FMAs in the AVX2 micro-kernel: {memory[:4]}"
    # A comes in by broadcast, B by two plain loads per k step: 6 + 2 per step, 5 steps of code.
    assert sum("vbroadcastss" in line for line in lines) == 6 * 5


@pytest.mark.parametrize("flags", flag_matrix(AVX512_FLAG_SETS))
def test_avx512_micro_kernel_keeps_its_28_accumulators_in_registers(tmp_path, flags) -> None:
    lines = disassemble(compile_library(tmp_path, flags), "ukernel_avx512_14x32")
    ops = fma_operands(lines)
    assert len(ops) >= 28 and all("zmm" in op for op in ops), ops[:4]
    memory = [op for op in ops if "(" in op and "{1to16}" not in op]
    assert memory == [], f"non-broadcast memory-operand FMAs: {memory[:4]}"
    spills = [line for line in lines if "%rsp)" in line or "%rbp)" in line]
    assert spills == [], f"stack traffic (spilled accumulators) in the loop: {spills[:4]}"


def test_the_library_this_process_loaded_has_the_same_property() -> None:
    ok, why = simd.available()
    if not ok:
        pytest.skip(f"C++ kernels unavailable: {why}")
    info = simd.build_info()
    symbol = {"6x16 avx2+fma asm": "ukernel_avx2_6x16", "14x32 avx512f": "ukernel_avx512_14x32"}
    if info["microkernel"] not in symbol:
        pytest.skip(
            f"the loaded library runs the {info['microkernel']} micro-kernel, not an x86 one"
        )
    ops = fma_operands(disassemble(Path(info["library"]), symbol[info["microkernel"]]))
    assert ops and not [op for op in ops if "(" in op and "{1to16}" not in op]
