"""Compile kernels.cpp (and the parts in csrc/ it includes) on first use; cache the library, load it.

Flags are probed one by one (a flag the compiler rejects is dropped, not fatal); ISA flags are only
tried when the running CPU has the feature. $TINYTORCH_SIMD_ISA picks the path: native (default,
-march=native), avx2 (x86-64-v3 without AVX-512, the path an AVX-2-only CPU runs), avx512 or scalar;
asking for one the CPU lacks is a BuildError saying so. The cache key hashes the sources + flags +
compiler version + CPU features + that choice, so a different machine, compiler or ISA never loads a
stale library. The cache lives in $TINYTORCH_CACHE_DIR, else ~/.cache/tinytorch (never
site-packages, which may be read-only).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tinytorch.machine import cpu_flags

SOURCE = Path(__file__).with_name("kernels.cpp")  # the one translation unit
PARTS = "csrc"  # beside the source: the headers it includes (the micro-kernels, GELU, packing, ...)
CACHE_ENV = "TINYTORCH_CACHE_DIR"
ISA_ENV = "TINYTORCH_SIMD_ISA"
ISAS = ("native", "avx2", "avx512", "scalar")
# x86 ISA choices: the CPU features each needs, then flag sets to try in order (first accepted wins).
# x86-64-v3/v4 need every feature of that level; the explicit -m flags are the fallback for a CPU
# (or compiler) that has only the core ones.
X86_LEVEL_FEATURES = {
    "avx2": ("avx2", "fma", "bmi1", "bmi2", "f16c", "movbe", "abm"),
    "avx512": ("avx2", "fma", "bmi1", "bmi2", "f16c", "movbe", "abm", "avx512f", "avx512bw",
               "avx512cd", "avx512dq", "avx512vl"),
}  # fmt: skip
ISA_FLAGS = {
    "avx2": (["-march=x86-64-v3", "-mno-avx512f"], ["-mavx2", "-mfma", "-mno-avx512f"]),
    "avx512": (["-march=x86-64-v4"], ["-mavx2", "-mfma", "-mavx512f"]),
}
ISA_NEEDS = {"avx2": ("avx2", "fma"), "avx512": ("avx2", "fma", "avx512f")}
COMPILER_CANDIDATES = ("c++", "g++", "clang++")
BASE_FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC")
OPTIONAL_FLAGS = ("-fno-math-errno", "-funroll-loops")
_PROBE_SOURCE = "int tt_probe(void) { return 0; }\n"
_OPENMP_PROBE = (
    "#include <omp.h>\n"
    'extern "C" int tt_probe(void) {\n'
    "  int n = 0;\n"
    "#pragma omp parallel num_threads(2) reduction(+ : n)\n"
    "  n += 1;\n"
    "  return n + omp_get_max_threads();\n"
    "}\n"
)


class BuildError(RuntimeError):
    """The kernels could not be compiled or loaded; the message says why."""


@dataclass
class BuildResult:
    """What was built and how: recorded for build_info(), `tito info` and the benchmark JSON."""

    library: Path | None = None
    compiler: list[str] = field(default_factory=list)
    compiler_version: str = ""
    flags: list[str] = field(default_factory=list)
    cpu_features: list[str] = field(default_factory=list)  # the ISA features that pick a code path
    machine_key: str = (
        ""  # hash of compiler, machine and EVERY CPU feature (-march=native sees all)
    )
    isa: str = "native"  # what $TINYTORCH_SIMD_ISA asked for (part of the cache key)
    openmp: bool = False
    openmp_reason: str = ""
    cached: bool = False
    notes: list[str] = field(default_factory=list)


def cache_dir() -> Path:
    """$TINYTORCH_CACHE_DIR, else $XDG_CACHE_HOME/tinytorch, else ~/.cache/tinytorch."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "tinytorch"


def requested_isa() -> str:
    """$TINYTORCH_SIMD_ISA (native when unset); BuildError naming the variable if it is unknown."""
    isa = os.environ.get(ISA_ENV, "").strip().lower() or "native"
    if isa not in ISAS:
        raise BuildError(f"{ISA_ENV}={isa!r} is not one of {', '.join(ISAS)}")
    return isa


SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


def _sysfs_cache_sizes(root: Path = SYSFS_CACHE) -> dict[str, int]:
    """L1d, L2, L3 sizes in bytes of cpu0 from /sys/devices/system/cpu/cpu0/cache (Linux)."""
    sizes: dict[str, int] = {}
    for index in sorted(root.glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            text = (index / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        number, unit = (text[:-1], units[text[-1]]) if text[-1:] in units else (text, 1)
        if not number.isdigit() or kind == "Instruction":
            continue
        name = "l1d" if level == 1 else f"l{level}"
        if name in ("l1d", "l2", "l3"):
            sizes[name] = int(number) * unit
    return sizes


def _sysconf_cache_sizes() -> dict[str, int]:
    """The same from sysconf (glibc) or, on macOS, sysctl hw.*cachesize; absent ones are left out."""
    sizes: dict[str, int] = {}
    names = {"l1d": "SC_LEVEL1_DCACHE_SIZE", "l2": "SC_LEVEL2_CACHE_SIZE",
             "l3": "SC_LEVEL3_CACHE_SIZE"}  # fmt: skip
    for key, name in names.items():
        if name in getattr(os, "sysconf_names", {}):
            with contextlib.suppress(OSError, ValueError):
                value = os.sysconf(name)
                if value > 0:
                    sizes[key] = value
    if sys.platform == "darwin":
        for key, name in (("l1d", "hw.l1dcachesize"), ("l2", "hw.l2cachesize"),
                          ("l3", "hw.l3cachesize")):  # fmt: skip
            with contextlib.suppress(OSError, subprocess.SubprocessError, ValueError):
                out = subprocess.run(
                    ["sysctl", "-n", name], capture_output=True, text=True, timeout=10, check=False
                )
                if out.returncode == 0 and int(out.stdout.strip() or 0) > 0:
                    sizes.setdefault(key, int(out.stdout.strip()))
    return sizes


DEFAULT_CACHE_SIZES = {"l1d": 32 << 10, "l2": 512 << 10, "l3": 8 << 20}


def cache_sizes() -> dict[str, tuple[int, str]]:
    """{"l1d"|"l2"|"l3": (bytes, source)}: sysfs, else sysconf/sysctl, else DEFAULT_CACHE_SIZES."""
    found = {k: (v, "sysfs") for k, v in _sysfs_cache_sizes().items()}
    for key, value in _sysconf_cache_sizes().items():
        found.setdefault(key, (value, "sysconf"))
    for key, value in DEFAULT_CACHE_SIZES.items():
        found.setdefault(key, (value, "default"))
    return found


def find_compiler() -> list[str] | None:
    """$CXX (split like a command line, e.g. "ccache g++"), else the first of c++, g++, clang++."""
    env = os.environ.get("CXX", "").strip()
    if env:
        import shlex

        parts = shlex.split(env)
        exe = shutil.which(parts[0]) if parts else None
        return [exe, *parts[1:]] if exe else None
    for name in COMPILER_CANDIDATES:
        exe = shutil.which(name)
        if exe:
            return [exe]
    return None


def compiler_version(cxx: list[str]) -> str:
    """First line of `cxx --version` (part of the cache key)."""
    try:
        out = subprocess.run(
            [*cxx, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else ""


def cpu_features() -> set[str]:
    """SIMD features of the running CPU: /proc/cpuinfo on Linux, sysctl on macOS."""
    feats: set[str] = set()
    machine = platform.machine().lower()
    if machine in ("arm64", "aarch64"):
        feats.add("neon")  # Advanced SIMD is mandatory on AArch64
    feats.update(cpu_flags())
    if sys.platform == "darwin" and machine == "x86_64":
        for key in ("machdep.cpu.features", "machdep.cpu.leaf7_features"):
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                out = subprocess.run(
                    ["sysctl", "-n", key], capture_output=True, text=True, timeout=10, check=False
                )
                feats.update(w.lower() for w in out.stdout.split())
    return feats


def _compile(cxx: list[str], flags: list[str], source: str, workdir: Path) -> tuple[bool, str]:
    """Compile `source` into a shared library in workdir with the given flags; (ok, stderr)."""
    src = workdir / "probe.cpp"
    src.write_text(source)
    out = workdir / "probe.so"
    try:
        proc = subprocess.run(
            [*cxx, *flags, str(src), "-o", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return False, str(exc)
    return proc.returncode == 0, proc.stderr


def _isa_flags(
    cxx: list[str], feats: set[str], workdir: Path, res: BuildResult, isa: str = "native"
) -> list[str]:
    """ISA flags the compiler accepts AND the running CPU supports (never an unconditional -mavx2).

    native: -march=native where the CPU has AVX2+FMA (or on AArch64), else the scalar path.
    avx2 / avx512: that x86 path, or a BuildError saying what the CPU (or compiler) lacks.
    scalar: no ISA flags.
    """
    machine = platform.machine().lower()
    base = list(BASE_FLAGS)
    x86 = machine in ("x86_64", "amd64", "i686", "x86")
    if isa == "scalar":
        res.notes.append(f"{ISA_ENV}=scalar: portable scalar path")
        return []
    if isa in ISA_FLAGS:
        if not x86:
            raise BuildError(f"{ISA_ENV}={isa}: not an x86 CPU ({platform.machine()})")
        missing = [f for f in ISA_NEEDS[isa] if f not in feats]
        if missing:
            raise BuildError(f"{ISA_ENV}={isa}: the CPU lacks {', '.join(missing).upper()}")
        full, fallback = ISA_FLAGS[isa]
        level = set(X86_LEVEL_FEATURES[isa]) <= feats
        for cand in (full, fallback) if level else (fallback,):
            if _compile(cxx, base + cand, _PROBE_SOURCE, workdir)[0]:
                return list(cand)
        raise BuildError(f"{ISA_ENV}={isa}: the compiler accepts none of {ISA_FLAGS[isa]}")
    if x86:
        if {"avx2", "fma"} <= feats:
            # -march=native describes exactly this CPU; explicit flags are the fallback for
            # compilers without it.
            for cand in (["-march=native"], ["-mavx2", "-mfma"]):
                if _compile(cxx, base + cand, _PROBE_SOURCE, workdir)[0]:
                    return cand
            res.notes.append("CPU has AVX2+FMA but the compiler accepts no flag for it: scalar")
        else:
            res.notes.append("CPU lacks AVX2/FMA: portable scalar path")
        return []
    if machine in ("arm64", "aarch64"):
        for cand in (["-mcpu=native"], ["-march=native"]):
            if _compile(cxx, base + cand, _PROBE_SOURCE, workdir)[0]:
                return cand
        return []  # NEON is on by default for AArch64 compilers
    res.notes.append(f"no SIMD path for machine {machine!r}: portable scalar path")
    return []


def _openmp_flags(cxx: list[str], workdir: Path, res: BuildResult) -> list[str]:
    """-fopenmp when it compiles and links; Apple clang needs -Xpreprocessor -fopenmp -lomp."""
    base = list(BASE_FLAGS)
    for cand in (["-fopenmp"], ["-Xpreprocessor", "-fopenmp", "-lomp"]):
        ok, _ = _compile(cxx, base + cand, _OPENMP_PROBE, workdir)
        if ok:
            res.openmp, res.openmp_reason = True, " ".join(cand) + " links"
            return cand
    res.openmp_reason = "OpenMP does not link with this compiler: kernels run on 1 thread"
    return []


def configure(
    cxx: list[str], workdir: Path, directory: Path | None = None, isa: str | None = None
) -> BuildResult:
    """Probe flags for this compiler, CPU and ISA choice (default: $TINYTORCH_SIMD_ISA); the
    answer is cached next to the libraries. BuildError when that ISA cannot be built here."""
    isa = requested_isa() if isa is None else isa
    if isa not in ISAS:
        raise BuildError(f"isa must be one of {', '.join(ISAS)}, got {isa!r}")
    res = BuildResult(compiler=list(cxx), compiler_version=compiler_version(cxx), isa=isa)
    feats = cpu_features()
    res.cpu_features = sorted(f for f in feats if f in ("avx2", "fma", "avx512f", "neon", "asimd"))
    res.machine_key = hashlib.sha256(
        "\0".join([*cxx, res.compiler_version, platform.machine(), *sorted(feats)]).encode()
    ).hexdigest()[:20]
    probe_name = f"probe_{isa}_{res.machine_key}.json"
    probe_file = directory / probe_name if directory is not None else None
    if probe_file is not None and probe_file.is_file():
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            saved = json.loads(probe_file.read_text())
            res.flags = [str(f) for f in saved["flags"]]
            res.openmp, res.openmp_reason = bool(saved["openmp"]), str(saved["openmp_reason"])
            res.notes = [str(n) for n in saved["notes"]]
            return res
    flags = list(BASE_FLAGS)
    for flag in OPTIONAL_FLAGS:
        if _compile(cxx, [*flags, flag], _PROBE_SOURCE, workdir)[0]:
            flags.append(flag)
    flags += _isa_flags(cxx, feats, workdir, res, isa)
    flags += _openmp_flags(cxx, workdir, res)
    res.flags = flags
    if probe_file is not None:
        payload = {k: getattr(res, k) for k in ("flags", "openmp", "openmp_reason", "notes")}
        _atomic_write(probe_file, json.dumps(payload).encode())
    return res


def _atomic_write(path: Path, data: bytes) -> None:
    """Write to a unique temp file in the same directory, then rename over `path`."""
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def source_bytes(source: Path) -> bytes:
    """The translation unit and every header of its parts folder, named, in a stable order."""
    files = [source, *sorted((source.parent / PARTS).glob("*.h"))]
    return b"".join(f.name.encode() + b"\0" + f.read_bytes() + b"\0" for f in files)


def _cache_key(source: bytes, res: BuildResult) -> str:
    h = hashlib.sha256()
    for part in (
        source,
        " ".join(res.compiler).encode(),
        res.compiler_version.encode(),
        " ".join(res.flags).encode(),
        platform.machine().encode(),
        res.machine_key.encode(),  # two CPUs that differ in any feature get two libraries
        res.isa.encode(),  # TINYTORCH_SIMD_ISA: one library per path asked for
    ):
        h.update(part)
        h.update(b"\0")
    return h.hexdigest()[:20]


def _try_load(path: Path) -> ctypes.CDLL | None:
    """Load a cached library and check it exports tt_isa; None if missing, corrupt or unloadable."""
    if not path.is_file():
        return None
    try:
        lib = ctypes.CDLL(str(path))
        lib.tt_isa.restype = ctypes.c_char_p
        lib.tt_isa()
    except (OSError, AttributeError):
        return None
    return lib


def build(
    source: Path = SOURCE, directory: Path | None = None, isa: str | None = None
) -> tuple[ctypes.CDLL, BuildResult]:
    """Build (or reuse) the kernels library for `isa` (default: $TINYTORCH_SIMD_ISA, else native)
    and load it. Raises BuildError with the reason (no compiler, an ISA the CPU lacks, ...)."""
    try:
        return _build(source, directory, isa)
    except OSError as exc:  # read-only or full cache dir, vanished temp files, ...
        where = directory if directory is not None else cache_dir()
        raise BuildError(
            f"cannot build in {where}: {exc} (set {CACHE_ENV} to a writable dir)"
        ) from exc


def _build(
    source: Path, directory: Path | None, isa: str | None
) -> tuple[ctypes.CDLL, BuildResult]:
    cxx = find_compiler()
    if cxx is None:
        raise BuildError(
            "no C++ compiler found: set CXX or install c++/g++/clang++ "
            "(Debian/Ubuntu: apt install g++; macOS: xcode-select --install)"
        )
    if not source.is_file():
        raise BuildError(f"kernel source missing: {source}")
    directory = Path(directory) if directory is not None else cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(f"cannot create cache dir {directory}: {exc} (set {CACHE_ENV})") from exc
    code = source_bytes(source)
    with tempfile.TemporaryDirectory(prefix="tt-probe-", dir=directory) as tmp:
        res = configure(cxx, Path(tmp), directory, isa)
        suffix = ".dll" if sys.platform == "win32" else ".so"
        target = directory / f"tt_kernels_{_cache_key(code, res)}{suffix}"
        lib = _try_load(target)
        if lib is not None:
            res.library, res.cached = target, True
            return lib, res
        if target.exists():
            res.notes.append(f"cached library {target.name} was unloadable: rebuilt")
        # Unique temp name in the same directory, then an atomic rename: two processes building at
        # once each write their own file and the last rename wins with a complete library.
        fd, tmp_name = tempfile.mkstemp(
            prefix=target.stem + ".", suffix=".tmp" + suffix, dir=directory
        )
        os.close(fd)
        tmp_lib = Path(tmp_name)
        cmd = [*cxx, *res.flags, str(source), "-o", str(tmp_lib)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            tmp_lib.unlink(missing_ok=True)
            raise BuildError(f"compiler failed to run: {exc}") from exc
        if proc.returncode != 0:
            tmp_lib.unlink(missing_ok=True)
            raise BuildError(f"compile failed ({' '.join(cmd)}):\n{proc.stderr.strip()[-2000:]}")
        os.replace(tmp_lib, target)
    lib = _try_load(target)
    if lib is None:
        raise BuildError(f"built {target} but it does not load")
    res.library = target
    return lib, res
