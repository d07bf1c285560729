"""Build-on-first-use: compiler discovery, flag probing, the cache, corrupt libraries, races."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tinytorch.extensions import build

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


@needs_cxx
def test_build_caches_and_reuses(tmp_path) -> None:
    _, res = build.build(directory=tmp_path)
    assert res.library is not None and res.library.parent == tmp_path and not res.cached
    assert res.flags[:1] == ["-O3"]
    lib2, res2 = build.build(directory=tmp_path)
    assert res2.cached and res2.library == res.library
    assert lib2.tt_isa().split(b",")[0] in (b"avx2+fma", b"neon", b"scalar")


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
    assert lib.tt_isa().split(b",")[0] in (b"avx2+fma", b"neon", b"scalar")


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
