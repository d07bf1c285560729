"""Build-on-first-use: compiler discovery, flag probing, the cache, corrupt libraries, races."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tinytorch.extensions import build, simd

CXX = build.find_compiler()
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler (set CXX or install g++)")


def test_cache_dir_follows_the_env_override(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TINYTORCH_CACHE_DIR", str(tmp_path / "here"))
    assert build.cache_dir() == tmp_path / "here"
    monkeypatch.delenv("TINYTORCH_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build.cache_dir() == tmp_path / "xdg" / "tinytorch"


def test_default_cache_is_never_inside_the_package(monkeypatch) -> None:
    monkeypatch.delenv("TINYTORCH_CACHE_DIR", raising=False)
    pkg = Path(build.__file__).resolve().parent
    assert pkg not in build.cache_dir().resolve().parents


def test_cxx_env_wins_and_a_missing_compiler_is_none(monkeypatch) -> None:
    monkeypatch.setenv("CXX", "definitely-not-a-compiler-xyz")
    assert build.find_compiler() is None
    monkeypatch.setenv("CXX", sys.executable + " --flag")
    assert build.find_compiler() == [sys.executable, "--flag"]


def test_no_compiler_gives_a_build_error_with_advice(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CXX", "definitely-not-a-compiler-xyz")
    with pytest.raises(build.BuildError, match="no C\\+\\+ compiler"):
        build.build(directory=tmp_path)


def test_simd_reports_unavailable_with_the_reason_in_a_fresh_process(tmp_path) -> None:
    code = (
        "from tinytorch.extensions import simd, backend_status\n"
        "ok, why = simd.available()\n"
        "assert not ok and 'no C++ compiler' in why, why\n"
        "info = simd.build_info()\n"
        "assert info['built'] is False and 'no C++ compiler' in info['error']\n"
        "rows = {r['name']: r for r in backend_status()}\n"
        "assert rows['c++ simd']['available'] is False\n"
        "try:\n"
        "    simd.matmul([[1.0]], [[1.0]])\n"
        "except RuntimeError as e:\n"
        "    assert 'no C++ compiler' in str(e)\n"
        "else:\n"
        "    raise AssertionError('matmul ran without a library')\n"
    )
    env = dict(os.environ, CXX="definitely-not-a-compiler-xyz", TINYTORCH_CACHE_DIR=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_cpu_features_never_claim_avx2_the_cpu_lacks() -> None:
    feats = build.cpu_features()
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        pytest.skip("no /proc/cpuinfo on this OS")
    if "avx2" in feats:
        assert " avx2" in flags


@pytest.mark.slow
@needs_cxx
def test_build_caches_and_reuses(tmp_path) -> None:
    _, res = build.build(directory=tmp_path)
    assert res.library is not None and res.library.parent == tmp_path and not res.cached
    assert res.flags[:1] == ["-O3"]
    lib2, res2 = build.build(directory=tmp_path)
    assert res2.cached and res2.library == res.library
    assert lib2.tt_isa() in (b"avx512f", b"avx2+fma", b"neon", b"scalar")


@pytest.mark.slow
@needs_cxx
def test_an_edit_to_a_part_in_csrc_is_compiled_not_served_stale(tmp_path) -> None:
    """kernels.cpp includes its parts from csrc/: the cache key covers them, so editing one (here,
    the GEMM driver) gives a new library with the edit in it, not the cached one."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(build.SOURCE, src / "kernels.cpp")
    shutil.copytree(build.SOURCE.parent / build.PARTS, src / build.PARTS)
    _, before = build.build(source=src / "kernels.cpp", directory=tmp_path / "cache")
    with (src / build.PARTS / "gemm.h").open("a") as f:
        f.write('\nextern "C" int tt_part_marker(void) { return 7; }\n')
    lib, after = build.build(source=src / "kernels.cpp", directory=tmp_path / "cache")
    assert not after.cached and after.library != before.library
    assert lib.tt_part_marker() == 7


@needs_cxx
def test_isa_flags_only_when_the_cpu_has_them(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(build, "cpu_features", lambda: set())
    res = build.configure(CXX, tmp_path)
    assert not any(f.startswith(("-mavx", "-mfma", "-march")) for f in res.flags)


def test_cpus_that_differ_in_any_feature_get_different_libraries(tmp_path, monkeypatch) -> None:
    """-march=native uses every feature, so a shared cache must not hand an AVX-512BW build to a
    CPU without AVX-512BW (an illegal instruction), even though both report avx2/fma/avx512f."""
    monkeypatch.setattr(build, "_compile", lambda *args, **kwargs: (True, ""))  # no compiler run
    base = {"avx2", "fma", "avx512f"}
    keys = []
    for extra in (set(), {"avx512bw"}):
        monkeypatch.setattr(build, "cpu_features", lambda extra=extra: base | extra)
        res = build.configure(["c++"], tmp_path)
        keys.append(build._cache_key(b"source", res))
    assert keys[0] != keys[1]


@pytest.mark.slow
@needs_cxx
def test_a_corrupt_cached_library_is_rebuilt(tmp_path) -> None:
    # Built by another process: dlopen() of a path this process already loaded would return the
    # old mapping without reading the file, which is not the case being tested.
    code = "from tinytorch.extensions import build; print(build.build()[1].library)"
    env = dict(os.environ, TINYTORCH_CACHE_DIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    library = Path(out.stdout.strip())
    assert library.is_file(), out.stderr
    library.write_bytes(b"not an ELF file")
    lib, res = build.build(directory=tmp_path)
    assert res.library == library and not res.cached
    assert any("unloadable" in n for n in res.notes)
    assert lib.tt_isa() in (b"avx512f", b"avx2+fma", b"neon", b"scalar")


@needs_cxx
def test_a_compile_error_is_reported_not_raised_as_a_crash(tmp_path) -> None:
    bad = tmp_path / "bad.cpp"
    bad.write_text('extern "C" int tt_isa( { syntax error\n')
    with pytest.raises(build.BuildError, match="compile failed"):
        build.build(source=bad, directory=tmp_path / "cache")
    leftovers = [p.name for p in (tmp_path / "cache").iterdir() if p.suffix == ".tmp"]
    assert leftovers == []


@needs_cxx
@pytest.mark.slow
def test_two_processes_building_at_once_both_load_a_complete_library(tmp_path) -> None:
    code = (
        "from tinytorch.extensions import simd\n"
        "import numpy as np\n"
        "a = np.arange(12, dtype=np.float32).reshape(3, 4)\n"
        "assert np.allclose(simd.matmul(a, a.T), a @ a.T), 'wrong result'\n"
        "print(simd.build_info()['library'])\n"
    )
    env = dict(os.environ, TINYTORCH_CACHE_DIR=str(tmp_path))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    libs = {out.strip() for out, _ in outs}
    assert len(libs) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp.so")]


@needs_cxx
def test_an_unwritable_cache_dir_is_a_build_error_naming_the_env_var(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache dir should be")
    with pytest.raises(build.BuildError, match="TINYTORCH_CACHE_DIR"):
        build.build(directory=blocker / "cache")


# ------------------------------------------------------------------ TINYTORCH_SIMD_ISA and blocks

LEVEL3 = set(build.X86_LEVEL_FEATURES["avx2"])
LEVEL4 = set(build.X86_LEVEL_FEATURES["avx512"])


@pytest.fixture
def fake_x86(monkeypatch):
    """configure() on a pretend x86-64 CPU whose compiler accepts every flag (nothing is run)."""
    monkeypatch.setattr(build, "_compile", lambda *args, **kwargs: (True, ""))
    monkeypatch.setattr(build.platform, "machine", lambda: "x86_64")
    monkeypatch.delenv(build.ISA_ENV, raising=False)

    def with_features(feats: set[str]) -> None:
        monkeypatch.setattr(build, "cpu_features", lambda: set(feats))

    return with_features


def test_unknown_isa_is_an_error_naming_the_variable(monkeypatch) -> None:
    monkeypatch.setenv("TINYTORCH_SIMD_ISA", "sse9")
    with pytest.raises(build.BuildError, match="TINYTORCH_SIMD_ISA='sse9' is not one of native"):
        build.requested_isa()
    monkeypatch.setenv("TINYTORCH_SIMD_ISA", " AVX2 ")
    assert build.requested_isa() == "avx2"
    monkeypatch.delenv("TINYTORCH_SIMD_ISA")
    assert build.requested_isa() == "native"


@pytest.mark.parametrize(
    "isa,feats,flags",
    [
        ("avx2", LEVEL3, ["-march=x86-64-v3", "-mno-avx512f"]),
        ("avx2", LEVEL4, ["-march=x86-64-v3", "-mno-avx512f"]),  # AVX-512 CPU, AVX2 path
        ("avx2", {"avx2", "fma"}, ["-mavx2", "-mfma", "-mno-avx512f"]),  # not all of v3
        ("avx512", LEVEL4, ["-march=x86-64-v4"]),
        ("avx512", {"avx2", "fma", "avx512f"}, ["-mavx2", "-mfma", "-mavx512f"]),
        ("native", LEVEL3, ["-march=native"]),
        ("scalar", LEVEL4, []),
    ],
)
def test_each_isa_gets_its_flags(tmp_path, fake_x86, isa, feats, flags) -> None:
    fake_x86(feats)
    res = build.configure(["c++"], tmp_path, isa=isa)
    isa_flags = [f for f in res.flags if f.startswith(("-m", "-march"))]
    assert isa_flags == flags and res.isa == isa


@pytest.mark.parametrize(
    "isa,feats,missing",
    [("avx512", LEVEL3, "AVX512F"), ("avx2", {"sse2", "avx"}, "AVX2, FMA")],
)
def test_an_isa_the_cpu_lacks_says_so(tmp_path, fake_x86, isa, feats, missing) -> None:
    fake_x86(feats)
    with pytest.raises(
        build.BuildError, match=f"TINYTORCH_SIMD_ISA={isa}: the CPU lacks {missing}"
    ):
        build.configure(["c++"], tmp_path, isa=isa)


def test_avx512_asked_on_this_cpu_is_unavailable_with_the_reason(tmp_path) -> None:
    if "avx512f" in build.cpu_features():
        pytest.skip("this CPU has AVX-512F")
    code = (
        "from tinytorch.extensions import simd\n"
        "ok, why = simd.available()\n"
        "assert not ok and 'TINYTORCH_SIMD_ISA=avx512' in why and 'AVX512F' in why, why\n"
        "info = simd.build_info()\n"
        "assert info['isa_requested'] == 'avx512' and info['built'] is False, info\n"
    )
    env = dict(os.environ, TINYTORCH_SIMD_ISA="avx512", TINYTORCH_CACHE_DIR=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_the_isa_choice_is_part_of_the_cache_key(tmp_path, fake_x86) -> None:
    fake_x86(LEVEL4)
    keys = {build._cache_key(b"src", build.configure(["c++"], tmp_path, tmp_path, isa=isa))
            for isa in build.ISAS}  # fmt: skip
    assert len(keys) == len(build.ISAS)
    # The probe results are cached per ISA too: asking again for avx2 does not get native's flags.
    again = build.configure(["c++"], tmp_path, tmp_path, isa="avx2")
    assert "-march=x86-64-v3" in again.flags and "-march=native" not in again.flags


def test_sysfs_cache_sizes_are_parsed(tmp_path) -> None:
    for index, (level, kind, size) in enumerate(
        [
            (1, "Data", "48K"),
            (1, "Instruction", "32K"),
            (2, "Unified", "2048K"),
            (3, "Unified", "32M"),
        ]
    ):
        d = tmp_path / f"index{index}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    assert build._sysfs_cache_sizes(tmp_path) == {"l1d": 48 << 10, "l2": 2 << 20, "l3": 32 << 20}


def test_cache_sizes_fall_back_to_documented_defaults(monkeypatch) -> None:
    monkeypatch.setattr(build, "_sysfs_cache_sizes", dict)
    monkeypatch.setattr(build, "_sysconf_cache_sizes", lambda: {"l2": 1 << 20})
    assert build.cache_sizes() == {
        "l1d": (32 << 10, "default"),
        "l2": (1 << 20, "sysconf"),
        "l3": (8 << 20, "default"),
    }


@pytest.mark.parametrize(
    "mr,nr,caches,expected",
    [
        # Zen 3: 32 KiB L1d, 512 KiB L2, 32 MiB L3, 6x16 AVX2 tile.
        (6, 16, (32 << 10, 512 << 10, 32 << 20), (256, 126, 8192)),
        # An AVX-512 server core: 48 KiB L1d, 2 MiB L2, 16 MiB L3, 14x32 tile: KC from L2, capped.
        (14, 32, (48 << 10, 2 << 20, 16 << 20), (1024, 126, 1024)),
        # Zen 4: 32 KiB L1d, 1 MiB L2: the 14x32 sliver streams from L2, so KC is an eighth of it.
        (14, 32, (32 << 10, 1 << 20, 32 << 20), (1024, 56, 2048)),
        # Zen 5: 48 KiB L1d, 1 MiB L2, 32 MiB L3; the 6x16 tile keeps L1's KC, the 14x32 L2's.
        (6, 16, (48 << 10, 1 << 20, 32 << 20), (384, 168, 5456)),
        (14, 32, (48 << 10, 1 << 20, 32 << 20), (1024, 56, 2048)),
        # A 512 KiB L2 (the library's default caches) gives the 14x32 tile its 16 NR floor.
        (14, 32, (32 << 10, 512 << 10, 8 << 20), (512, 56, 1024)),
        # Tiny caches hit the floors.
        (6, 16, (4 << 10, 16 << 10, 64 << 10), (256, 6, 128)),
    ],
)
def test_gemm_blocks_follow_the_cache_sizes(monkeypatch, mr, nr, caches, expected) -> None:
    monkeypatch.delenv(simd.BLOCKS_ENV, raising=False)
    sizes = {k: (v, "sysfs") for k, v in zip(("l1d", "l2", "l3"), caches, strict=True)}
    blocks = simd.gemm_blocks(mr, nr, sizes)
    assert (blocks["KC"], blocks["MC"], blocks["NC"]) == expected
    assert (blocks["MR"], blocks["NR"]) == (mr, nr) and "sysfs" in blocks["source"]


def test_gemm_blocks_env_override_and_its_errors(monkeypatch) -> None:
    sizes = {k: (32 << 10, "default") for k in ("l1d", "l2", "l3")}
    monkeypatch.setenv(simd.BLOCKS_ENV, "128, 60, 512")
    blocks = simd.gemm_blocks(6, 16, sizes)
    assert (blocks["KC"], blocks["MC"], blocks["NC"]) == (128, 60, 512)
    assert blocks["source"].startswith("TINYTORCH_GEMM_BLOCKS")
    monkeypatch.setenv(simd.BLOCKS_ENV, "128,0,512")
    with pytest.raises(RuntimeError, match="TINYTORCH_GEMM_BLOCKS must be three positive"):
        simd.gemm_blocks(6, 16, sizes)


@pytest.mark.slow
@needs_cxx
def test_the_library_defaults_are_the_blocks_of_the_default_cache_sizes(
    tmp_path, monkeypatch
) -> None:
    """An unconfigured library (the C++ test drivers) uses what gemm_blocks gives for
    build.DEFAULT_CACHE_SIZES; a fresh process, so simd has not set the blocks yet."""
    code = (
        "import json\n"
        "from tinytorch.extensions import build\n"
        "lib, _ = build.build()\n"
        "print(json.dumps([lib.tt_mr(), lib.tt_nr(), *(lib.tt_block(i) for i in range(3))]))\n"
    )
    env = dict(os.environ, TINYTORCH_CACHE_DIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    mr, nr, kc, mc, nc = json.loads(out.stdout)
    defaults = {k: (v, "default") for k, v in build.DEFAULT_CACHE_SIZES.items()}
    monkeypatch.delenv(simd.BLOCKS_ENV, raising=False)
    blocks = simd.gemm_blocks(mr, nr, defaults)
    assert (kc, mc, nc) == (blocks["KC"], blocks["MC"], blocks["NC"])
