"""Every ISA path of kernels.cpp, not only the one this CPU builds: the scalar fallback and AVX2
without AVX-512 compiled with the host compiler, NEON cross-compiled and run under qemu-aarch64.

A small C++ driver checks GEMM (plain and fused, 1 and 2 threads, default and small cache blocks) on
ragged shapes against a float64 triple loop, and GELU against the float64 tanh formula plus its
infinities and float32 extremes (no NaN), streamed past 32 MiB too; it exits non-zero on a
mismatch. The AVX-512 path runs natively on a CPU with AVX-512F, and everywhere else with its
intrinsics emulated by SIMDe (tests/test_ext_codegen.py disassembles it everywhere).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from tinytorch.extensions import build

pytestmark = pytest.mark.slow

SOURCE = Path(build.__file__).with_name("kernels.cpp")
CXX = build.find_compiler()
DRIVER = r"""
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <vector>
#include <cstddef>
#include <cstdint>
extern "C" {
const char* tt_isa(void);
const char* tt_microkernel(void);
int tt_mr(void);
int tt_nr(void);
int tt_set_blocks(size_t, size_t, size_t);
size_t tt_set_panel_bytes(size_t);
int tt_sgemm(const float*, const float*, float*, size_t, size_t, size_t, size_t, size_t, size_t, const float*, int);
int tt_bias_gelu(const float*, const float*, float*, size_t, size_t, int);
}
static double gelu(double y){ return 0.5*y*(1+std::tanh(std::sqrt(2/M_PI)*(y+0.044715*y*y*y))); }
int main(){
  printf("isa %s\nmicrokernel %s\n", tt_isa(), tt_microkernel());
  size_t mr = tt_mr(), nr = tt_nr();
  // Straddling the 6x16 and 14x32 register tiles, and (with the small blocks) several K blocks,
  // N panels and M tiles.
  size_t shapes[][3]={{1,1,1},{7,5,3},{13,513,17},{73,1030,33},{6,16,16},{14,9,32},{15,40,33},
                      {29,300,65},{100,37,3100}};
  // Default blocks, then small ones: KC=16, MC=2 MR, NC=3 NR, 4 KiB packing buffers.
  size_t blocks[][3]={{256,120,4096},{16,2*mr,3*nr}};
  double worst=0;
  for (auto& s: shapes){
    size_t M=s[0],K=s[1],N=s[2];
    std::vector<float> A(M*K),B(K*N),C(M*N),bias(N);
    for(auto& v:A) v=(rand()/(float)RAND_MAX)-0.5f;
    for(auto& v:B) v=(rand()/(float)RAND_MAX)-0.5f;
    for(auto& v:bias) v=(rand()/(float)RAND_MAX)-0.5f;
    std::vector<double> R(M*N);
    for(size_t i=0;i<M;++i) for(size_t j=0;j<N;++j){ double r=0; for(size_t k=0;k<K;++k) r+=(double)A[i*K+k]*B[k*N+j]; R[i*N+j]=r; }
    for (auto& bl: blocks) for (int threads=1; threads<=2; ++threads) for (int fused=0; fused<2; ++fused){
      if (tt_set_blocks(bl[0],bl[1],bl[2])) return 2;
      tt_set_panel_bytes(bl[0] == 16 ? 4096 : (size_t{64} << 20));  // small: row and B panels
      tt_sgemm(A.data(),B.data(),C.data(),M,N,K,K,N,N,fused?bias.data():nullptr,threads);
      double err=0;
      for(size_t i=0;i<M;++i) for(size_t j=0;j<N;++j){ double r=R[i*N+j]; if(fused) r=gelu(r+bias[j]); err=std::fmax(err,std::fabs(r-C[i*N+j])); }
      printf("gemm %zux%zux%zu kc=%zu t=%d fused=%d err %.2e\n",M,K,N,bl[0],threads,fused,err); worst=std::fmax(worst,err);
    }
  }
  std::vector<float> x(100001), b(100001), y(100001);
  for(size_t i=0;i<x.size();++i){ x[i]=-20+40.0f*i/100000; b[i]=0; }
  tt_bias_gelu(x.data(),b.data(),y.data(),1,x.size(),2);
  double e=0; for(size_t i=0;i<x.size();++i) e=std::fmax(e,std::fabs(gelu(x[i])-y[i]));
  // Past 32 MiB the output is written with streaming stores after a peel to the vector alignment:
  // an odd row length puts every row's start at another offset, so peel, stream loop and tail all run.
  size_t sr=2048, sc=4099;
  std::vector<float> sx(sr*sc), sb(sc), sy(sr*sc);
  for(size_t i=0;i<sx.size();++i) sx[i]=-20+40.0f*((i*7919)%100003)/100003;
  for(size_t j=0;j<sc;++j) sb[j]=0.001f*(j%7);
  tt_bias_gelu(sx.data(),sb.data(),sy.data(),sr,sc,2);
  for(size_t i=0;i<sx.size();++i) e=std::fmax(e,std::fabs(gelu((double)(sx[i]+sb[i%sc]))-sy[i]));
  // Streamed with rows narrower than a cache line (every line wraps the bias several times), in
  // place (X == Y), from an output that starts 4 bytes past a 64-byte boundary.
  size_t wr=2796203, wc=3;
  std::vector<float> nx(wr*wc+16), nb={0.25f,-0.5f,1.0f};
  float* np_=nx.data()+1; while((reinterpret_cast<uintptr_t>(np_)&63)!=4) ++np_;
  std::vector<float> nsrc(wr*wc);
  for(size_t i=0;i<nsrc.size();++i) nsrc[i]=np_[i]=-20+40.0f*((i*104729)%100003)/100003;
  tt_bias_gelu(np_,nb.data(),np_,wr,wc,2);
  for(size_t i=0;i<nsrc.size();++i) e=std::fmax(e,std::fabs(gelu((double)(nsrc[i]+nb[i%wc]))-np_[i]));
  float sp[6]={-INFINITY, INFINITY, -3e38f, 3e38f, -3.4028235e38f, 3.4028235e38f}, z[6]={0,0,0,0,0,0}, o[6];
  tt_bias_gelu(sp,z,o,1,6,1);
  int nan=0; for(int i=0;i<6;++i) nan+=std::isnan(o[i]);
  printf("gelu err %.2e specials %g %g %g %g %g %g\n", e, o[0],o[1],o[2],o[3],o[4],o[5]);
  bool specials = o[0]==0 && o[1]==INFINITY && o[2]==0 && o[3]==3e38f && nan==0;
  return (worst<1e-3 && e<=1e-6 && specials) ? 0 : 1;
}
"""


def compile_and_run(tmp_path: Path, cxx: list[str], flags: list[str], runner: list[str]) -> str:
    driver = tmp_path / "driver.cpp"
    driver.write_text(DRIVER)
    exe = tmp_path / "driver"
    cmd = [*cxx, "-O2", "-std=c++17", *flags, str(driver), str(SOURCE), "-o", str(exe)]
    built = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stderr[-2000:]
    ran = subprocess.run(
        [*runner, str(exe)], capture_output=True, text=True, timeout=300, check=False
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return ran.stdout


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
@pytest.mark.parametrize("openmp", [True, False])
def test_scalar_fallback_path(tmp_path, openmp: bool) -> None:
    out = compile_and_run(tmp_path, CXX, ["-fopenmp"] if openmp else [], [])
    assert out.startswith("isa scalar\nmicrokernel 6x16 scalar\n")


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
@pytest.mark.skipif(not {"avx2", "fma"} <= build.cpu_features(), reason="CPU lacks AVX2/FMA")
@pytest.mark.parametrize("flags", build.ISA_FLAGS["avx2"], ids=" ".join)
def test_avx2_path_without_avx512(tmp_path, flags: list[str]) -> None:
    """TINYTORCH_SIMD_ISA=avx2's flags (x86-64-v3 without AVX-512, or the -m fallback)."""
    out = compile_and_run(tmp_path, CXX, [*flags, "-funroll-loops", "-fopenmp"], [])
    assert out.startswith("isa avx2+fma\nmicrokernel 6x16 avx2+fma asm\n")


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
@pytest.mark.skipif("avx512f" not in build.cpu_features(), reason="CPU lacks AVX-512F")
@pytest.mark.parametrize("flags", build.ISA_FLAGS["avx512"], ids=" ".join)
def test_avx512_path(tmp_path, flags: list[str]) -> None:
    """TINYTORCH_SIMD_ISA=avx512's flags: the 14x32 zmm micro-kernel and 16-lane GELU."""
    out = compile_and_run(tmp_path, CXX, [*flags, "-funroll-loops", "-fopenmp"], [])
    assert out.startswith("isa avx512f\nmicrokernel 14x32 avx512f\n")


SIMDE = Path("/usr/include/simde/x86/avx512.h")


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
@pytest.mark.skipif(not {"avx2", "fma"} <= build.cpu_features(), reason="CPU lacks AVX2/FMA")
@pytest.mark.skipif(not SIMDE.exists(), reason="no SIMDe headers (apt-get install libsimde-dev)")
def test_avx512_path_emulated_on_any_avx2_cpu(tmp_path) -> None:
    """The AVX-512 path's arithmetic on a CPU without AVX-512F: every _mm512_* intrinsic emulated by
    SIMDe (kernels.cpp's TT_EMULATE_AVX512 switch), so the 14x32 micro-kernel, its masked tails
    and the 16-lane streaming GELU are checked on every machine, not only on one that has AVX-512."""
    flags = [*build.ISA_FLAGS["avx2"][0], "-DTT_EMULATE_AVX512", "-Wno-psabi", "-fopenmp"]
    out = compile_and_run(tmp_path, CXX, flags, [])
    assert out.startswith("isa avx512f\nmicrokernel 14x32 avx512f\n")


CROSS = shutil.which("aarch64-linux-gnu-g++")
QEMU = shutil.which("qemu-aarch64")


@pytest.mark.skipif(not (CROSS and QEMU), reason="no aarch64 cross compiler and qemu-aarch64")
def test_neon_path_under_qemu(tmp_path) -> None:
    out = compile_and_run(tmp_path, [CROSS], ["-fopenmp", "-static"], [QEMU])
    assert out.startswith("isa neon\nmicrokernel 6x16 neon\n")
