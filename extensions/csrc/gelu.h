// GELU (tanh form), shared by the GEMM's fused epilogue and the streaming bias+GELU: scalar, AVX2, AVX-512.
// Part of kernels.cpp's one translation unit (see its file map); not compiled on its own.

#pragma once

#include "isa.h"

namespace {

// ---------------------------------------------------------------------------------------------
// GELU, tanh approximation, in the form y * sigmoid(2u) = y / (1 + exp(-2u)),
// u = sqrt(2/pi) * (y + 0.044715 y^3). Unlike 0.5*y*(1 + tanh u) this does not cancel for
// negative y. Below y = -9 the true value is under 1e-28 in magnitude, so it is flushed to zero;
// that guard also maps -inf to 0 (not -inf/inf = NaN). +inf gives exp(-inf) = 0, so y = +inf.
// ---------------------------------------------------------------------------------------------
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kGeluFlush = -9.0f;
// The vector paths (AVX2 and AVX-512) compute t = -2u / ln2 = y (kGeluTA y^2 + kGeluTB), with
// c = sqrt(2/pi), k = 0.044715: kGeluTA = -2ck / ln2, kGeluTB = -2c / ln2; t is clamped below at
// kExp2Floor; 2^r ~ 1 + C1 r + C2 r^2 + C3 r^3 + C4 r^4 on |r| <= 1/2.
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kGeluTA = -2.0f * kSqrt2OverPi * kGeluCubic * kLog2e;
constexpr float kGeluTB = -2.0f * kSqrt2OverPi * kLog2e;
constexpr float kExp2Floor = -126.0f;
constexpr float kExp2C4 = 9.585979395e-03f, kExp2C3 = 5.590778962e-02f, kExp2C2 = 2.402403206e-01f,
                kExp2C1 = 6.931239367e-01f;

inline float gelu_scalar(float y) {
    if (y < kGeluFlush) return 0.0f;
    float u = kSqrt2OverPi * (y + kGeluCubic * y * y * y);
    float e = std::exp(std::min(std::max(-2.0f * u, -88.0f), 88.0f));
    return y / (1.0f + e);
}

#if TT_AVX2
// GELU's exp on 8 lanes, 2^t for t = -2u / ln2 clamped below at -126 (anything above 128, NaN or
// inf gives garbage that gelu_avx2 flushes): t = n + r, |r| <= 1/2, 2^r by a degree-4
// polynomial fitted for relative error (2.9e-6), evaluated by Horner's rule; GELU's error from it
// is |y| s (1 - s) * 2.9e-6 <= 0.135 * 2.9e-6 = 3.9e-7 (s = sigmoid(2u)), inside the 1e-6
// budget (measured max over |x| <= 20 stays 5.2e-7, set by rounding near |x| = 20); 2^n is
// added into the exponent bits of 2^r as an integer (n = -126 and 2^r < 1 give a value in the
// subnormal range, still under 1.2e-38, which only ever meets 1 + e). Folding 1/ln2 into u's
// constants removes the range reduction's multiplies: its rounding error is that of u itself.
// Throughput, not latency, bounds this loop (iterations are independent and out-of-order cores
// overlap them), and it is the FMA/multiply pipes that saturate: Horner (4 FMAs) beats Estrin
// (5 ops) and t takes 3 ops instead of 4; measured on Zen 3, 2.8 vs 3.1 ns per 8 lanes in L1.
inline __m256 exp2_avx2(__m256 t) {
    __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_sub_ps(t, n);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(kExp2C4), r, _mm256_set1_ps(kExp2C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExp2C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExp2C1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
}

inline __m256 gelu_avx2(__m256 y) {
    __m256 t = _mm256_mul_ps(
        y, _mm256_fmadd_ps(_mm256_mul_ps(y, y), _mm256_set1_ps(kGeluTA), _mm256_set1_ps(kGeluTB)));
    // Only the lower clamp: t > 96 needs y < -9, which the flush below zeroes anyway. max returns
    // its second operand when the first is NaN, so a NaN y stays NaN below via y / ...
    t = _mm256_max_ps(t, _mm256_set1_ps(kExp2Floor));
    __m256 g = _mm256_div_ps(y, _mm256_add_ps(_mm256_set1_ps(1.0f), exp2_avx2(t)));
    __m256 flush = _mm256_cmp_ps(y, _mm256_set1_ps(kGeluFlush), _CMP_LT_OQ);
    return _mm256_andnot_ps(flush, g);
}
#endif

#if TT_AVX512
// The same GELU on 16 lanes, for the GEMM epilogue and the streaming bias+GELU kernel: the same t,
// clamped below at -126 as on AVX2 so that y = +inf gives a finite t (t = -inf would give r = NaN,
// which Zen 4's scalef turns into 0 and SIMDe's into NaN), the same degree-4 2^r, and 2^n applied
// by scalef. y < -9 is flushed by the division's own zero-mask; NaN stays NaN (max gives -126 and
// y / d is NaN). Masked loads/stores handle the ragged tail without a scalar loop. Measured on
// Zen 4, in L1: 1.74 ns per 8 lanes, against 4.1 for the earlier Cody-Waite exp with a degree-6
// polynomial and 1.82 with a separate blend for each tail, at the same measured error (5.2e-7 over
// |x| <= 20).
inline __m512 gelu_avx512(__m512 y) {
    __m512 t = _mm512_mul_ps(
        y, _mm512_fmadd_ps(_mm512_mul_ps(y, y), _mm512_set1_ps(kGeluTA), _mm512_set1_ps(kGeluTB)));
    t = _mm512_max_ps(t, _mm512_set1_ps(kExp2Floor));
    __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_sub_ps(t, n);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(kExp2C4), r, _mm512_set1_ps(kExp2C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExp2C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExp2C1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __mmask16 keep = _mm512_cmp_ps_mask(y, _mm512_set1_ps(kGeluFlush), _CMP_NLT_UQ);  // NaN kept
    return _mm512_maskz_div_ps(keep, y, _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_scalef_ps(p, n)));
}
#endif

}  // namespace
