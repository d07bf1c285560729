// The AVX-512 micro-kernel, 14 x 32 (kernels.cpp includes it when TT_AVX512).
// Part of kernels.cpp's one translation unit (see its file map); not compiled on its own.

#pragma once

#include "blocking.h"

namespace {

// 14 x 32 on zmm: 28 accumulators c<i>0, c<i>1 (columns 0-15, 16-31 of row i), 2 B vectors; each
// A value is broadcast straight from memory into the FMA ({1to16}). 30 of 32 zmm registers.
#define TT_ROWS14(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
#define TT_DECL(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = _mm512_setzero_ps();
#define TT_STEP(i)                                  \
    {                                               \
        const __m512 a = _mm512_set1_ps(Ap[i]);     \
        c##i##0 = _mm512_fmadd_ps(a, b0, c##i##0);  \
        c##i##1 = _mm512_fmadd_ps(a, b1, c##i##1);  \
    }
#define TT_STORE(i)                                 \
    _mm512_store_ps(acc + (i) * NR, c##i##0);       \
    _mm512_store_ps(acc + (i) * NR + 16, c##i##1);
__attribute__((noinline)) void ukernel_avx512_14x32(size_t kc, const float* Ap, const float* Bp,
                                                    float* acc) {
    TT_ROWS14(TT_DECL)
    for (size_t k = 0; k < kc; ++k) {
        const __m512 b0 = _mm512_load_ps(Bp);
        const __m512 b1 = _mm512_load_ps(Bp + 16);
        TT_ROWS14(TT_STEP)
        Ap += MR;
        Bp += NR;
    }
    TT_ROWS14(TT_STORE)
}
#undef TT_ROWS14
#undef TT_DECL
#undef TT_STEP
#undef TT_STORE

}  // namespace
