// The portable micro-kernel, 6 x 16 scalar loops (kernels.cpp includes it on any other target).
// Part of kernels.cpp's one translation unit (see its file map); not compiled on its own.

#pragma once

#include "blocking.h"

namespace {

void ukernel_scalar(size_t kc, const float* Ap, const float* Bp, float* acc) {
    for (size_t i = 0; i < MR * NR; ++i) acc[i] = 0.0f;
    for (size_t k = 0; k < kc; ++k) {
        for (size_t i = 0; i < MR; ++i) {
            float a = Ap[k * MR + i];
            for (size_t j = 0; j < NR; ++j) acc[i * NR + j] += a * Bp[k * NR + j];
        }
    }
}

}  // namespace
