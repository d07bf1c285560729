// The target of this build: system headers, the ISA macros (TT_AVX512, TT_AVX2, TT_NEON) that
// every other part branches on, and the thread count OpenMP (when present) will be asked for.
// Part of kernels.cpp's one translation unit (see its file map); not compiled on its own.

#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <thread>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

#if defined(TT_EMULATE_AVX512) && defined(__AVX2__) && defined(__FMA__)
// Tests only (tests/test_ext_isa_paths.py): the AVX-512 path on a CPU without AVX-512F, every
// _mm512_* intrinsic emulated by SIMDe (Debian's libsimde-dev) on AVX2. Correctness, not speed:
// a CPU that has no AVX-512 can still check the 14x32 micro-kernel, its masks and its tails.
#include <immintrin.h>
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <cmath>
#include <cstdint>
// SIMDe 0.7.4 lacks these four; without a macro the name would reach GCC's real intrinsic, which
// does not compile for a CPU without AVX-512. Lane by lane, with AVX-512's semantics (masked-off
// lanes are never read or written; out-of-range conversions give INT32_MIN).
inline simde__m512i tt_emu_cvtps_epi32(simde__m512 a) {
    float f[16];
    int32_t r[16];
    simde_mm512_storeu_ps(f, a);
    for (int i = 0; i < 16; ++i)
        r[i] = (f[i] >= -2147483648.0f && f[i] < 2147483648.0f) ? static_cast<int32_t>(std::nearbyint(f[i]))
                                                                 : INT32_MIN;
    return simde_mm512_loadu_si512(r);
}
inline simde__m512 tt_emu_maskz_loadu_ps(simde__mmask16 m, const float* p) {
    float f[16];
    for (int i = 0; i < 16; ++i) f[i] = ((m >> i) & 1) ? p[i] : 0.0f;
    return simde_mm512_loadu_ps(f);
}
inline void tt_emu_mask_storeu_ps(float* p, simde__mmask16 m, simde__m512 a) {
    float f[16];
    simde_mm512_storeu_ps(f, a);
    for (int i = 0; i < 16; ++i)
        if ((m >> i) & 1) p[i] = f[i];
}
#define _mm512_cvtps_epi32(a) tt_emu_cvtps_epi32(a)
#define _mm512_maskz_loadu_ps(m, p) tt_emu_maskz_loadu_ps((m), (p))
#define _mm512_mask_storeu_ps(p, m, a) tt_emu_mask_storeu_ps((p), (m), (a))
#define _mm512_stream_ps(p, a) simde_mm512_storeu_ps((p), (a))
// SIMDe has this one but no native alias for it.
#define _mm512_shuffle_f32x4(a, b, imm) simde_mm512_shuffle_f32x4((a), (b), (imm))
#define TT_AVX2 1
#define TT_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define TT_AVX2 1
#if defined(__AVX512F__)
#define TT_AVX512 1
#endif
#elif defined(__ARM_NEON) || defined(__ARM_NEON__)
#include <arm_neon.h>
#define TT_NEON 1
#endif

namespace {

int clamp_threads(int threads) {
#if defined(_OPENMP)
    return threads < 1 ? 1 : threads;
#else
    (void)threads;
    return 1;
#endif
}

}  // namespace
