// The AVX2+FMA micro-kernel, 6 x 16 in inline asm (kernels.cpp includes it when TT_AVX2 without TT_AVX512).
// Part of kernels.cpp's one translation unit (see its file map); not compiled on its own.

#pragma once

#include "blocking.h"

namespace {

// 6 x 16 on ymm, in inline asm so that no compiler flag can change the register allocation:
// ymm4..ymm15 hold the 12 accumulators (row i in ymm(4+2i), ymm(5+2i)), ymm0/ymm1 the 16 B
// values of one k step, ymm2/ymm3 two broadcast A values. Per k step: 2 B loads, 6 broadcasts,
// 12 register-only FMAs. The k loop is unrolled 4x by hand; A is prefetched ~16 steps ahead.
#define TT_KSTEP(u)                                              \
    "vmovups " #u "*64(%[b]), %%ymm0\n\t"                        \
    "vmovups " #u "*64+32(%[b]), %%ymm1\n\t"                     \
    "vbroadcastss " #u "*24+0(%[a]), %%ymm2\n\t"                 \
    "vbroadcastss " #u "*24+4(%[a]), %%ymm3\n\t"                 \
    "vfmadd231ps %%ymm0, %%ymm2, %%ymm4\n\t"                     \
    "vfmadd231ps %%ymm1, %%ymm2, %%ymm5\n\t"                     \
    "vfmadd231ps %%ymm0, %%ymm3, %%ymm6\n\t"                     \
    "vfmadd231ps %%ymm1, %%ymm3, %%ymm7\n\t"                     \
    "vbroadcastss " #u "*24+8(%[a]), %%ymm2\n\t"                 \
    "vbroadcastss " #u "*24+12(%[a]), %%ymm3\n\t"                \
    "vfmadd231ps %%ymm0, %%ymm2, %%ymm8\n\t"                     \
    "vfmadd231ps %%ymm1, %%ymm2, %%ymm9\n\t"                     \
    "vfmadd231ps %%ymm0, %%ymm3, %%ymm10\n\t"                    \
    "vfmadd231ps %%ymm1, %%ymm3, %%ymm11\n\t"                    \
    "vbroadcastss " #u "*24+16(%[a]), %%ymm2\n\t"                \
    "vbroadcastss " #u "*24+20(%[a]), %%ymm3\n\t"                \
    "vfmadd231ps %%ymm0, %%ymm2, %%ymm12\n\t"                    \
    "vfmadd231ps %%ymm1, %%ymm2, %%ymm13\n\t"                    \
    "vfmadd231ps %%ymm0, %%ymm3, %%ymm14\n\t"                    \
    "vfmadd231ps %%ymm1, %%ymm3, %%ymm15\n\t"
// mode 0: the tile goes to acc (row-major MR x NR) for the C++ epilogue; for a full tile without
// bias it goes straight to C (rows ldc floats apart) from the registers: mode 1 stores, mode 2 adds
// to what C holds. That skips a round trip through acc (~3% of a 1024 GEMM here).
__attribute__((noinline)) void ukernel_avx2_6x16(size_t kc, const float* Ap, const float* Bp,
                                                 float* acc, float* C, size_t ldc, int mode) {
    size_t k4 = kc / 4, k1 = kc % 4;
    size_t ld = ldc * sizeof(float);
    float* C3 = C + 3 * ldc;
    size_t m = static_cast<size_t>(mode);
    __asm__ volatile(
        "vxorps %%ymm4, %%ymm4, %%ymm4\n\t"
        "vxorps %%ymm5, %%ymm5, %%ymm5\n\t"
        "vxorps %%ymm6, %%ymm6, %%ymm6\n\t"
        "vxorps %%ymm7, %%ymm7, %%ymm7\n\t"
        "vxorps %%ymm8, %%ymm8, %%ymm8\n\t"
        "vxorps %%ymm9, %%ymm9, %%ymm9\n\t"
        "vxorps %%ymm10, %%ymm10, %%ymm10\n\t"
        "vxorps %%ymm11, %%ymm11, %%ymm11\n\t"
        "vxorps %%ymm12, %%ymm12, %%ymm12\n\t"
        "vxorps %%ymm13, %%ymm13, %%ymm13\n\t"
        "vxorps %%ymm14, %%ymm14, %%ymm14\n\t"
        "vxorps %%ymm15, %%ymm15, %%ymm15\n\t"
        "test %[k4], %[k4]\n\t"
        "jz 2f\n\t"
        ".p2align 5\n"
        "1:\n\t"
        "prefetcht0 384(%[a])\n\t"
        "prefetcht0 448(%[a])\n\t"
        TT_KSTEP(0) TT_KSTEP(1) TT_KSTEP(2) TT_KSTEP(3)
        "add $96, %[a]\n\t"
        "add $256, %[b]\n\t"
        "dec %[k4]\n\t"
        "jnz 1b\n"
        "2:\n\t"
        "test %[k1], %[k1]\n\t"
        "jz 4f\n"
        "3:\n\t"
        TT_KSTEP(0)
        "add $24, %[a]\n\t"
        "add $64, %[b]\n\t"
        "dec %[k1]\n\t"
        "jnz 3b\n"
        "4:\n\t"
        "cmp $1, %[m]\n\t"
        "jb 5f\n\t"
        "je 6f\n\t"
        "vaddps (%[c0]), %%ymm4, %%ymm4\n\t"
        "vaddps 32(%[c0]), %%ymm5, %%ymm5\n\t"
        "vaddps (%[c0],%[ld],1), %%ymm6, %%ymm6\n\t"
        "vaddps 32(%[c0],%[ld],1), %%ymm7, %%ymm7\n\t"
        "vaddps (%[c0],%[ld],2), %%ymm8, %%ymm8\n\t"
        "vaddps 32(%[c0],%[ld],2), %%ymm9, %%ymm9\n\t"
        "vaddps (%[c3]), %%ymm10, %%ymm10\n\t"
        "vaddps 32(%[c3]), %%ymm11, %%ymm11\n\t"
        "vaddps (%[c3],%[ld],1), %%ymm12, %%ymm12\n\t"
        "vaddps 32(%[c3],%[ld],1), %%ymm13, %%ymm13\n\t"
        "vaddps (%[c3],%[ld],2), %%ymm14, %%ymm14\n\t"
        "vaddps 32(%[c3],%[ld],2), %%ymm15, %%ymm15\n"
        "6:\n\t"
        "vmovups %%ymm4, (%[c0])\n\t"
        "vmovups %%ymm5, 32(%[c0])\n\t"
        "vmovups %%ymm6, (%[c0],%[ld],1)\n\t"
        "vmovups %%ymm7, 32(%[c0],%[ld],1)\n\t"
        "vmovups %%ymm8, (%[c0],%[ld],2)\n\t"
        "vmovups %%ymm9, 32(%[c0],%[ld],2)\n\t"
        "vmovups %%ymm10, (%[c3])\n\t"
        "vmovups %%ymm11, 32(%[c3])\n\t"
        "vmovups %%ymm12, (%[c3],%[ld],1)\n\t"
        "vmovups %%ymm13, 32(%[c3],%[ld],1)\n\t"
        "vmovups %%ymm14, (%[c3],%[ld],2)\n\t"
        "vmovups %%ymm15, 32(%[c3],%[ld],2)\n\t"
        "jmp 7f\n"
        "5:\n\t"
        "vmovaps %%ymm4, 0(%[c])\n\t"
        "vmovaps %%ymm5, 32(%[c])\n\t"
        "vmovaps %%ymm6, 64(%[c])\n\t"
        "vmovaps %%ymm7, 96(%[c])\n\t"
        "vmovaps %%ymm8, 128(%[c])\n\t"
        "vmovaps %%ymm9, 160(%[c])\n\t"
        "vmovaps %%ymm10, 192(%[c])\n\t"
        "vmovaps %%ymm11, 224(%[c])\n\t"
        "vmovaps %%ymm12, 256(%[c])\n\t"
        "vmovaps %%ymm13, 288(%[c])\n\t"
        "vmovaps %%ymm14, 320(%[c])\n\t"
        "vmovaps %%ymm15, 352(%[c])\n"
        "7:\n\t"
        : [a] "+r"(Ap), [b] "+r"(Bp), [k4] "+r"(k4), [k1] "+r"(k1)
        : [c] "r"(acc), [c0] "r"(C), [c3] "r"(C3), [ld] "r"(ld), [m] "r"(m)
        : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
          "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}
#undef TT_KSTEP

}  // namespace
