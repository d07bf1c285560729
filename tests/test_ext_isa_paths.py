"""Every ISA path of kernels.cpp, not only the one this CPU builds: the scalar fallback and AVX2
without AVX-512 compiled with the host compiler, NEON cross-compiled and run under qemu-aarch64.

A small C++ driver checks GEMM (plain and fused) on ragged shapes against a float64 triple loop
and GELU against the float64 tanh formula; it exits non-zero on a mismatch.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from tinytorch.extensions import build

SOURCE = Path(build.__file__).with_name("kernels.cpp")
CXX = build.find_compiler()
DRIVER = r"""
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <vector>
#include <cstddef>
extern "C" {
const char* tt_isa(void);
int tt_sgemm(const float*, const float*, float*, size_t, size_t, size_t, size_t, size_t, size_t, const float*, int);
int tt_bias_gelu(const float*, const float*, float*, size_t, size_t, int);
}
static double gelu(double y){ return 0.5*y*(1+std::tanh(std::sqrt(2/M_PI)*(y+0.044715*y*y*y))); }
int main(){
  printf("isa %s\n", tt_isa());
  size_t shapes[][3]={{1,1,1},{7,5,3},{13,513,17},{73,1030,33},{6,16,16},{100,37,3100}};
  double worst=0;
  for (auto& s: shapes){
    size_t M=s[0],K=s[1],N=s[2];
    std::vector<float> A(M*K),B(K*N),C(M*N),bias(N);
    for(auto& v:A) v=(rand()/(float)RAND_MAX)-0.5f;
    for(auto& v:B) v=(rand()/(float)RAND_MAX)-0.5f;
    for(auto& v:bias) v=(rand()/(float)RAND_MAX)-0.5f;
    for (int fused=0; fused<2; ++fused){
      tt_sgemm(A.data(),B.data(),C.data(),M,N,K,K,N,N,fused?bias.data():nullptr,2);
      double err=0;
      for(size_t i=0;i<M;++i) for(size_t j=0;j<N;++j){ double r=0; for(size_t k=0;k<K;++k) r+=(double)A[i*K+k]*B[k*N+j]; if(fused) r=gelu(r+bias[j]); err=std::fmax(err,std::fabs(r-C[i*N+j])); }
      printf("gemm %zux%zux%zu fused=%d err %.2e\n",M,K,N,fused,err); worst=std::fmax(worst,err);
    }
  }
  std::vector<float> x(100001), b(100001), y(100001);
  for(size_t i=0;i<x.size();++i){ x[i]=-20+40.0f*i/100000; b[i]=0; }
  tt_bias_gelu(x.data(),b.data(),y.data(),1,x.size(),2);
  double e=0; for(size_t i=0;i<x.size();++i) e=std::fmax(e,std::fabs(gelu(x[i])-y[i]));
  float sp[4]={-INFINITY, INFINITY, -3e38f, 3e38f}, z[4]={0,0,0,0}, o[4];
  tt_bias_gelu(sp,z,o,1,4,1);
  printf("gelu err %.2e specials %g %g %g %g\n", e, o[0],o[1],o[2],o[3]);
  return (worst<1e-3 && e<=1e-6) ? 0 : 1;
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
    assert out.startswith("isa scalar")


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
@pytest.mark.skipif(not {"avx2", "fma"} <= build.cpu_features(), reason="CPU lacks AVX2/FMA")
def test_avx2_path_without_avx512(tmp_path) -> None:
    out = compile_and_run(tmp_path, CXX, ["-mavx2", "-mfma", "-fopenmp"], [])
    assert out.startswith("isa avx2+fma\n")


CROSS = shutil.which("aarch64-linux-gnu-g++")
QEMU = shutil.which("qemu-aarch64")


@pytest.mark.skipif(not (CROSS and QEMU), reason="no aarch64 cross compiler and qemu-aarch64")
def test_neon_path_under_qemu(tmp_path) -> None:
    out = compile_and_run(tmp_path, [CROSS], ["-fopenmp", "-static"], [QEMU])
    assert out.startswith("isa neon")
