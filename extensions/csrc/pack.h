// Packing A and B into the slivers the micro-kernel reads (ISA-specific fast paths for full slivers).
// Part of kernels.cpp's one translation unit (see its file map); not compiled on its own.

#pragma once

#include "blocking.h"

namespace {

// ---------------------------------------------------------------------------------------------
// Packing. A block (mc x kc, row-major, lda) -> ceil(mc/MR) slivers, each kc columns of MR
// contiguous values; rows past mc are zero. B panel (kc x nc, ldb) -> ceil(nc/NR) slivers, each
// kc rows of NR contiguous values; columns past nc are zero. Zero padding lets the micro-kernel
// always run a full MR x NR tile; only the write-back is ragged.
// ---------------------------------------------------------------------------------------------
#if TT_AVX2 && !TT_AVX512
// Packs a full 6-row sliver 8 k at a time: the 6 rows (plus 2 zero rows) are loaded as 8 x 8 and
// transposed in registers, and column k (6 values and 2 junk lanes) is stored at dst + 6k with an
// 8-wide store; the junk lanes land where column k+1 goes and are overwritten by it, in order.
// Stops while at least one k is left, so the caller's scalar tail overwrites the last junk and no
// store passes the sliver's end. Returns how many k it packed. Strided scalar loads of 6 rows 4 KiB
// apart ran at ~3 cycles per float here; this is several times faster.
size_t pack_a_6x8(const float* A, size_t lda, size_t kc, float* dst) {
    size_t k = 0;
    const __m256 z = _mm256_setzero_ps();
    for (; k + 8 < kc; k += 8) {
        __m256 r0 = _mm256_loadu_ps(A + 0 * lda + k), r1 = _mm256_loadu_ps(A + 1 * lda + k);
        __m256 r2 = _mm256_loadu_ps(A + 2 * lda + k), r3 = _mm256_loadu_ps(A + 3 * lda + k);
        __m256 r4 = _mm256_loadu_ps(A + 4 * lda + k), r5 = _mm256_loadu_ps(A + 5 * lda + k);
        // 8 x 8 transpose (rows 6, 7 zero): unpack pairs, shuffle quads, swap 128-bit halves.
        __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
        __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
        __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
        __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
        __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
        __m256 u4 = _mm256_shuffle_ps(t4, z, 0x44), u5 = _mm256_shuffle_ps(t4, z, 0xEE);
        __m256 u6 = _mm256_shuffle_ps(t5, z, 0x44), u7 = _mm256_shuffle_ps(t5, z, 0xEE);
        float* d = dst + k * MR;
        _mm256_storeu_ps(d + 0 * MR, _mm256_permute2f128_ps(u0, u4, 0x20));
        _mm256_storeu_ps(d + 1 * MR, _mm256_permute2f128_ps(u1, u5, 0x20));
        _mm256_storeu_ps(d + 2 * MR, _mm256_permute2f128_ps(u2, u6, 0x20));
        _mm256_storeu_ps(d + 3 * MR, _mm256_permute2f128_ps(u3, u7, 0x20));
        _mm256_storeu_ps(d + 4 * MR, _mm256_permute2f128_ps(u0, u4, 0x31));
        _mm256_storeu_ps(d + 5 * MR, _mm256_permute2f128_ps(u1, u5, 0x31));
        _mm256_storeu_ps(d + 6 * MR, _mm256_permute2f128_ps(u2, u6, 0x31));
        _mm256_storeu_ps(d + 7 * MR, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
    return k;
}
#endif

#if TT_AVX512
// The same for a full 14-row sliver, 16 k at a time: 14 rows (plus 2 zero rows) loaded as 16 x 16
// and transposed in registers (pairs, quads, then 128-bit lanes twice), column k stored by a
// 14-lane masked store. Returns how many k it packed; the caller's scalar loop does the rest.
// The scalar loop alone took 0.62 ms for a 1024 x 1024 A on Zen 4, 3% of a 1-thread GEMM; this
// takes 0.21.
size_t pack_a_14x16(const float* A, size_t lda, size_t kc, float* dst) {
    static_assert(MR == 14, "two zero rows pad the sliver to 16");
    const __mmask16 rows = static_cast<__mmask16>((1u << MR) - 1u);
    size_t k = 0;
    for (; k + 16 <= kc; k += 16) {
        __m512 r[16], t[16];
        for (size_t i = 0; i < MR; ++i) r[i] = _mm512_loadu_ps(A + i * lda + k);
        r[14] = r[15] = _mm512_setzero_ps();
        for (int i = 0; i < 16; i += 2) {
            t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
            t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
        }
        for (int i = 0; i < 16; i += 4) {
            r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
            r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
            r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
            r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
        }
        for (int i = 0; i < 4; ++i) {
            t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
            t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
            t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
            t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
        }
        for (int i = 0; i < 8; ++i) {
            r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
            r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
        }
        for (size_t j = 0; j < 16; ++j) _mm512_mask_storeu_ps(dst + (k + j) * MR, rows, r[j]);
    }
    return k;
}
#endif

void pack_a(const float* A, size_t lda, size_t mc, size_t kc, float* Ap) {
    for (size_t i0 = 0; i0 < mc; i0 += MR) {
        size_t mr = std::min(MR, mc - i0);
        float* dst = Ap + i0 * kc;  // sliver i0/MR starts at (i0/MR) * MR * kc
        if (mr == MR) {  // full sliver
            size_t k = 0;
#if TT_AVX512
            k = pack_a_14x16(A + i0 * lda, lda, kc, dst);
#elif TT_AVX2
            k = pack_a_6x8(A + i0 * lda, lda, kc, dst);
#endif
            for (; k < kc; ++k)  // a constant trip count the compiler unrolls
                for (size_t i = 0; i < MR; ++i) dst[k * MR + i] = A[(i0 + i) * lda + k];
            continue;
        }
        for (size_t k = 0; k < kc; ++k) {
            size_t i = 0;
            for (; i < mr; ++i) dst[k * MR + i] = A[(i0 + i) * lda + k];
            for (; i < MR; ++i) dst[k * MR + i] = 0.0f;
        }
    }
}

// Rows [k0, k0 + rows) of one K block of B (kc x nc, row stride ldb) into its slivers: row k of
// sliver s lands at dst + s * kc * NR + k * NR, columns past nc zero. A few rows across the whole
// panel at a time: each row of B is read front to back (the prefetchers follow it), and each
// sliver gets `rows` x NR contiguous floats. Packing one sliver at a time instead reads B down a
// column, a page per row, and ran 2-3x slower (1024 x 1024: 2.5 ms against 0.8 ms).
// Within the rows, sliver by sliver: each sliver's rows x NR floats are written in one run. Row by
// row, the writes went to nc / NR places kc * NR * 4 bytes apart, a multiple of 4 KiB for any kc
// divisible by 64, so all of them fell in one L1 set: 3.5x slower on Zen 5 (512 x 512, kc 256,
// B in cache: 86 us against 24 us, 3.5% of the 1-thread GEMM against 1.0%).
void pack_b_rows(const float* B, size_t ldb, size_t rows, size_t nc, size_t kc, float* dst) {
    const size_t full = nc / NR, tail = nc % NR;
    for (size_t s = 0; s < full; ++s) {
        float* d = dst + s * kc * NR;
        const float* src = B + s * NR;
        for (size_t k = 0; k < rows; ++k) {
#if TT_AVX2
            // Vector moves, and the row's lines 4 slivers ahead prefetched (as an integer: no
            // pointer past B is formed). gcc's memcpy of 64 bytes is 4 xmm moves; B packed from
            // L3 (512 x 512, kc 384, Zen 5) took 60-80 us this way against 97-160 us.
            const uintptr_t ahead = reinterpret_cast<uintptr_t>(src + k * ldb) + 4 * NR * sizeof(float);
            _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
#if TT_AVX512
            static_assert(NR == 32, "two zmm per row of a sliver");
            _mm512_storeu_ps(d + k * NR, _mm512_loadu_ps(src + k * ldb));
            _mm512_storeu_ps(d + k * NR + 16, _mm512_loadu_ps(src + k * ldb + 16));
#else
            static_assert(NR == 16, "two ymm per row of a sliver");
            _mm256_storeu_ps(d + k * NR, _mm256_loadu_ps(src + k * ldb));
            _mm256_storeu_ps(d + k * NR + 8, _mm256_loadu_ps(src + k * ldb + 8));
#endif
#else
            std::memcpy(d + k * NR, src + k * ldb, NR * sizeof(float));
#endif
        }
    }
    if (tail) {
        float* d = dst + full * kc * NR;
        for (size_t k = 0; k < rows; ++k) {
            std::memcpy(d + k * NR, B + k * ldb + full * NR, tail * sizeof(float));
            std::memset(d + k * NR + tail, 0, (NR - tail) * sizeof(float));
        }
    }
}

}  // namespace
