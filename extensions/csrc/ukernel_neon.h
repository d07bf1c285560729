// The NEON micro-kernel, 6 x 16 (kernels.cpp includes it when TT_NEON).
// Part of kernels.cpp's one translation unit (see its file map); not compiled on its own.

#pragma once

#include "blocking.h"

namespace {

// 6 x 16 on q registers: 24 accumulators + 4 B vectors of the 32 AArch64 vector registers.
__attribute__((noinline)) void ukernel_neon_6x16(size_t kc, const float* Ap, const float* Bp,
                                                 float* acc) {
    float32x4_t c[MR][4];
    for (size_t i = 0; i < MR; ++i)
        for (size_t q = 0; q < 4; ++q) c[i][q] = vdupq_n_f32(0.0f);
    for (size_t k = 0; k < kc; ++k) {
        float32x4_t b0 = vld1q_f32(Bp), b1 = vld1q_f32(Bp + 4);
        float32x4_t b2 = vld1q_f32(Bp + 8), b3 = vld1q_f32(Bp + 12);
        for (size_t i = 0; i < MR; ++i) {
            float a = Ap[i];
            c[i][0] = vfmaq_n_f32(c[i][0], b0, a);
            c[i][1] = vfmaq_n_f32(c[i][1], b1, a);
            c[i][2] = vfmaq_n_f32(c[i][2], b2, a);
            c[i][3] = vfmaq_n_f32(c[i][3], b3, a);
        }
        Ap += MR;
        Bp += NR;
    }
    for (size_t i = 0; i < MR; ++i)
        for (size_t q = 0; q < 4; ++q) vst1q_f32(acc + i * NR + 4 * q, c[i][q]);
}

}  // namespace
