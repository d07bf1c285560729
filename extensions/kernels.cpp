// TinyTorch native reference kernels: a BLIS-style SGEMM, a fused bias+GELU and the fused
// GEMM+bias+GELU epilogue. Built on first use by extensions/build.py and bound with ctypes.
//
// ISA paths, chosen at compile time from the flags build.py probed (TINYTORCH_SIMD_ISA picks them):
//   __AVX512F__ (+AVX2, FMA) -> 14x32 micro-kernel in 28 zmm accumulators, 16-lane GELU
//   __AVX2__ && __FMA__      -> 6x16 micro-kernel in 12 ymm accumulators (inline asm), AVX2 GELU
//   __ARM_NEON               -> 6x16 micro-kernel in 24 q-register accumulators
//   otherwise                -> portable scalar loops (the compiler may still auto-vectorise them)
// tt_isa() and tt_microkernel() report which one this library was built with.
// tests/test_ext_isa_paths.py builds and checks each path (NEON under qemu-aarch64), and
// tests/test_ext_codegen.py disassembles the x86 micro-kernels: their inner loops must take B from
// registers, never as a memory operand of every FMA (what gcc's -funroll-loops did to the AVX2
// intrinsics with 16 ymm registers, at 0.6x OpenBLAS).
//
// OpenMP: every parallel region passes num_threads explicitly. torch's bundled libgomp.so.1 and
// the system one share a soname, so a process holds one runtime and torch.set_num_threads()
// moves its default; an explicit num_threads is immune to that.
//
// All matrices are row-major float32. Indices and sizes are size_t; the Python side (simd.py)
// checks dtype, contiguity and shapes, so the pointers here are trusted.

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

// ---------------------------------------------------------------------------------------------
// Blocking parameters (BLIS names).
//   MR x NR : register tile of C held in accumulators by the micro-kernel. AVX2: 6 rows x 16
//             columns = 6 x 2 ymm = 12 accumulators + 2 B vectors + 2 broadcasts = all 16 ymm.
//             AVX-512: 14 x 32 = 28 zmm accumulators + 2 B vectors + 1 broadcast = 31 of 32.
//   KC      : depth of one rank-KC update; the KC x NR sliver of B stays in L1 while the
//             micro-kernel sweeps the MR x KC slivers of A past it.
//   MC      : rows of A per work tile; the MC x KC block of A stays in L2.
//   NC      : columns of B per packed panel; one K block's KC x NC slice of it lives in L3.
// KC, MC and NC are set at run time from the running CPU's cache sizes (simd.py calls
// tt_set_blocks with what simd.gemm_blocks derives from sysfs/sysconf); the defaults below are
// what a library nobody configured uses: the same rules applied to 32 KiB L1d, 512 KiB L2 and
// 8 MiB L3 (build.DEFAULT_CACHE_SIZES).
// ---------------------------------------------------------------------------------------------
#if TT_AVX512
constexpr size_t MR = 14;
constexpr size_t NR = 32;
#else
constexpr size_t MR = 6;
constexpr size_t NR = 16;
#endif
struct Blocks {
    size_t kc, mc, nc;  // mc a multiple of MR, nc a multiple of NR
};
#if TT_AVX512
Blocks g_blocks{512, 56, 1024};
#else
Blocks g_blocks{256, 126, 2048};
#endif

inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
inline size_t round_up(size_t a, size_t b) { return ceil_div(a, b) * b; }

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

int clamp_threads(int threads) {
#if defined(_OPENMP)
    return threads < 1 ? 1 : threads;
#else
    (void)threads;
    return 1;
#endif
}

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

// ---------------------------------------------------------------------------------------------
// Write-back of a micro-kernel's MR x NR accumulator tile into C (see micro_kernel below).
// ---------------------------------------------------------------------------------------------
struct Epilogue {
    bool accumulate;     // add to what C already holds (K blocks after the first)
    const float* bias;   // non-null on the last K block of a fused GEMM+bias+GELU: bias[j]
};

void write_back_scalar(const float* acc, float* C, size_t ldc, size_t mr, size_t nr, Epilogue ep) {
    for (size_t i = 0; i < mr; ++i) {
        for (size_t j = 0; j < nr; ++j) {
            float v = acc[i * NR + j];
            if (ep.accumulate) v += C[i * ldc + j];
            if (ep.bias) v = gelu_scalar(v + ep.bias[j]);
            C[i * ldc + j] = v;
        }
    }
}

// The micro-kernels proper: acc (MR x NR, row-major, 64-byte aligned) = Ap sliver @ Bp sliver.
// They are separate, never-inlined functions so that the epilogue's register use cannot leak into
// the inner loop, and so tests/test_ext_codegen.py can find and disassemble them by name.
#if TT_AVX512
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
#elif TT_AVX2
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
#elif TT_NEON
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
#else
void ukernel_scalar(size_t kc, const float* Ap, const float* Bp, float* acc) {
    for (size_t i = 0; i < MR * NR; ++i) acc[i] = 0.0f;
    for (size_t k = 0; k < kc; ++k) {
        for (size_t i = 0; i < MR; ++i) {
            float a = Ap[k * MR + i];
            for (size_t j = 0; j < NR; ++j) acc[i * NR + j] += a * Bp[k * NR + j];
        }
    }
}
#endif

#if TT_AVX512
#define TT_UKERNEL ukernel_avx512_14x32
#define TT_UKERNEL_NAME "14x32 avx512f"
#elif TT_AVX2
#define TT_UKERNEL ukernel_avx2_6x16
#define TT_UKERNEL_NAME "6x16 avx2+fma asm"
#elif TT_NEON
#define TT_UKERNEL ukernel_neon_6x16
#define TT_UKERNEL_NAME "6x16 neon"
#else
#define TT_UKERNEL ukernel_scalar
#define TT_UKERNEL_NAME "6x16 scalar"
#endif

// One MR x NR tile of C: the micro-kernel, then the write-back
//   C  = acc            (first K block)          or   C += acc   (later K blocks)
//   C  = gelu(C + bias) (last K block, fused)    applied on the registers before the store,
// so the fused epilogue costs no extra pass over C. Ragged tiles (mr < MR or nr < NR) take the
// scalar write-back of only their valid part.
void micro_kernel(size_t kc, const float* Ap, const float* Bp, float* C, size_t ldc, size_t mr,
                  size_t nr, Epilogue ep) {
    alignas(64) float acc[MR * NR];
#if TT_AVX2
    // C is only touched after the K loop: start fetching its rows now so the write-back does
    // not wait on memory.
    for (size_t i = 0; i < mr; ++i) {
        _mm_prefetch(reinterpret_cast<const char*>(C + i * ldc), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(C + i * ldc + NR - 1), _MM_HINT_T0);
    }
#endif
#if TT_AVX2 && !TT_AVX512
    if (mr == MR && nr == NR && !ep.bias) {  // the asm writes C itself
        ukernel_avx2_6x16(kc, Ap, Bp, acc, C, ldc, ep.accumulate ? 2 : 1);
        return;
    }
    ukernel_avx2_6x16(kc, Ap, Bp, acc, C, ldc, 0);
#else
    TT_UKERNEL(kc, Ap, Bp, acc);
#endif
#if TT_AVX512
    if (mr == MR && nr == NR) {
        __m512 bias0 = _mm512_setzero_ps(), bias1 = _mm512_setzero_ps();
        if (ep.bias) {
            bias0 = _mm512_loadu_ps(ep.bias);
            bias1 = _mm512_loadu_ps(ep.bias + 16);
        }
        for (size_t i = 0; i < MR; ++i) {
            float* c = C + i * ldc;
            __m512 v0 = _mm512_load_ps(acc + i * NR), v1 = _mm512_load_ps(acc + i * NR + 16);
            if (ep.accumulate) {
                v0 = _mm512_add_ps(v0, _mm512_loadu_ps(c));
                v1 = _mm512_add_ps(v1, _mm512_loadu_ps(c + 16));
            }
            if (ep.bias) {
                v0 = gelu_avx512(_mm512_add_ps(v0, bias0));
                v1 = gelu_avx512(_mm512_add_ps(v1, bias1));
            }
            _mm512_storeu_ps(c, v0);
            _mm512_storeu_ps(c + 16, v1);
        }
        return;
    }
#elif TT_AVX2
    if (mr == MR && nr == NR) {
        __m256 bias0 = _mm256_setzero_ps(), bias1 = _mm256_setzero_ps();
        if (ep.bias) {
            bias0 = _mm256_loadu_ps(ep.bias);
            bias1 = _mm256_loadu_ps(ep.bias + 8);
        }
        for (size_t i = 0; i < MR; ++i) {
            float* c = C + i * ldc;
            __m256 v0 = _mm256_load_ps(acc + i * NR), v1 = _mm256_load_ps(acc + i * NR + 8);
            if (ep.accumulate) {
                v0 = _mm256_add_ps(v0, _mm256_loadu_ps(c));
                v1 = _mm256_add_ps(v1, _mm256_loadu_ps(c + 8));
            }
            if (ep.bias) {
                v0 = gelu_avx2(_mm256_add_ps(v0, bias0));
                v1 = gelu_avx2(_mm256_add_ps(v1, bias1));
            }
            _mm256_storeu_ps(c, v0);
            _mm256_storeu_ps(c + 8, v1);
        }
        return;
    }
#endif
    write_back_scalar(acc, C, ldc, mr, nr, ep);
}

// Grow-only per-thread scratch: packing buffers are reused across calls instead of being
// re-allocated (and re-faulted) on every GEMM.
float* scratch(size_t count, int which) {
    thread_local float* bufs[2] = {nullptr, nullptr};
    thread_local size_t caps[2] = {0, 0};
    if (caps[which] < count) {
        std::free(bufs[which]);
        // Large buffers are 2 MiB aligned and asked to be backed by huge pages (as NumPy does
        // for its arrays): the packed panels span tens of MiB.
        const size_t huge = size_t{2} << 20;
        const size_t align = count * sizeof(float) >= 2 * huge ? huge : 64;
        size_t bytes = round_up(count * sizeof(float), align);
        bufs[which] = static_cast<float*>(std::aligned_alloc(align, bytes));
        caps[which] = bufs[which] ? count : 0;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        if (bufs[which] && align == huge) madvise(bufs[which], bytes, MADV_HUGEPAGE);
#endif
    }
    return bufs[which];
}

// ---------------------------------------------------------------------------------------------
// The blocked GEMM, C(M x N) = A(M x K) @ B(K x N) [then gelu(C + bias) if bias], in pseudo-code
// for two or more threads (one thread: see the end of this comment):
//
//   pack all of A -> Ap, as [K block][MR sliver][kc][MR]     # once per call
//   for jc in 0..N step nc:                                  # B panel columns (usually one)
//     pack B[:, jc:jc+nc] -> Bp, as [K block][NR sliver][kc][NR]
//     barrier                                                # the only one per panel
//     for (pc, ic, jt) in K blocks x tiles of MC rows x NT cols, handed out in this order:
//       wait until tile (ic, jt) of K block pc-1 is done     # almost never waits
//       for jr in jt..jt+NT step NR:                         # KC x NR sliver of Bp   (L1)
//         for ir in ic..ic+MC step MR:                       # MC x KC block of Ap    (L2)
//           micro_kernel(Ap[pc][ir], Bp[pc][jr]) -> C[ir:+MR, jc+jr:+NR]
//             first pc: store; later pc: accumulate; last pc and fused: gelu(acc + bias)
//       mark tile (ic, jt) of K block pc done
//
// Work items are taken from one atomic counter, so they are handed out in order, and threads
// never meet at a barrier between K blocks: on a shared machine one thread can lose its core for
// a while, and the other keeps taking work instead of waiting for it. The only wait is for the
// previous K block of the same C tile (its accumulator), which was handed out a whole sweep of
// tiles earlier. Consecutive items share ic, so a thread's MC x KC block of A stays in its L2.
// Within a row of tiles the columns go 0, h, 1, h + 1, ... (h = half the tiles, rounded up), so
// the two items running at once are half a row apart, never side by side: C from NumPy starts 16
// bytes past a page, so the cache line at a tile's edge holds columns of both tiles, and two
// threads writing neighbouring tiles passed it back and forth on every write-back (on 2 threads at
// 1024-2048, Zen 3, benchmarks/bench_kernel_change.py: 1.08-1.11x against the plain order).
// One thread keeps the plain order, which reads the B panel front to back (0.98x otherwise).
// One thread packs as it goes instead, as OpenBLAS and BLIS do: a K block's KC x nc slice of B
// just before that block's first tile, and a row of tiles' MC x KC block of A just before that
// row, each into one buffer that every K block and tile row reuses. The A block is then in L2
// when the micro-kernel reads it, and both buffers stay cached from one call to the next; packed
// up front, all of A had gone on to L3 or DRAM, and every packing store missed. Paired against
// packing up front, with pack_b_rows' vector moves (benchmarks/bench_kernel_change.py, Zen 5,
// 11 rounds, 1 thread, n = 256, 512, 1024, 2048): AVX-512 1.06x, 1.01x, 1.05x, 1.04x; AVX2
// 1.01x, 1.01x, 1.03x, 1.02x. Two threads keep the up-front packing: it needs no wait between
// K blocks.
// ---------------------------------------------------------------------------------------------
constexpr size_t NT = 4 * NR;                       // columns per work tile: 64 (AVX-512: 128)
constexpr size_t B_ROWS = 8;                        // rows of B per packing task
size_t g_panel_bytes = size_t{64} << 20;  // cap on packed A (M x K) and a B panel (K x nc)

inline void cpu_relax(unsigned spins) {
#if TT_AVX2
    _mm_pause();
#endif
    if (spins % 256 == 255) std::this_thread::yield();  // oversubscribed: let the other run
}

int sgemm_panel(const float* A, const float* B, float* C, size_t M, size_t N, size_t K,
                size_t lda, size_t ldb, size_t ldc, const float* bias, int threads);

// Rows of C are independent: a GEMM whose packed A (M x K) would pass g_panel_bytes runs as
// several row panels, so the packing buffers stay bounded whatever the shape.
int sgemm_blocked(const float* A, const float* B, float* C, size_t M, size_t N, size_t K,
                  size_t lda, size_t ldb, size_t ldc, const float* bias, int threads) {
    size_t rows = std::max(MR, g_panel_bytes / (std::max<size_t>(K, 1) * sizeof(float)) / MR * MR);
    for (size_t i0 = 0; i0 < M; i0 += rows) {
        int rc = sgemm_panel(A + i0 * lda, B, C + i0 * ldc, std::min(rows, M - i0), N, K, lda,
                             ldb, ldc, bias, threads);
        if (rc != 0) return rc;
    }
    return 0;
}

int sgemm_panel(const float* A, const float* B, float* C, size_t M, size_t N, size_t K,
                size_t lda, size_t ldb, size_t ldc, const float* bias, int threads) {
    if (M == 0 || N == 0) return 0;
    if (K == 0) {  // empty sum: C = 0, then the epilogue
        for (size_t i = 0; i < M; ++i)
            for (size_t j = 0; j < N; ++j) C[i * ldc + j] = bias ? gelu_scalar(bias[j]) : 0.0f;
        return 0;
    }
    int nt = clamp_threads(threads);
    const size_t KC = std::min(g_blocks.kc, K);
    // Rows per work tile: at most g_blocks.mc, evened out so the last tile is not a sliver
    // (M = 256, mc = 126: 3 tiles of 90, 90, 76 rows instead of 126, 126, 4).
    const size_t MC = round_up(ceil_div(M, ceil_div(M, g_blocks.mc)), MR);
    // Panel width: g_blocks.nc, less if the packed K x nc panel would pass g_panel_bytes.
    size_t nc_cap = g_panel_bytes / (K * sizeof(float)) / NT * NT;
    const size_t NC = std::max(NT, std::min(g_blocks.nc, nc_cap));
    const size_t m_pad = round_up(M, MR);
    const size_t nc_max = std::min(round_up(NC, NR), round_up(N, NR));
    const size_t k_blocks = ceil_div(K, KC);
    float* Ap = scratch(m_pad * K, 1);
    float* Bp = scratch(nc_max * K, 0);
    if (!Bp || !Ap) return 1;
    const size_t a_slivers = m_pad / MR;
    const size_t m_tiles = ceil_div(M, MC);
    const size_t max_tiles = m_tiles * ceil_div(std::min(N, NC), NT);
    std::unique_ptr<std::atomic<size_t>[]> done(new (std::nothrow) std::atomic<size_t>[max_tiles]);
    if (!done) return 1;
    // Small problems: fewer threads than tiles would leave some idle anyway.
    if (max_tiles < static_cast<size_t>(nt)) nt = static_cast<int>(max_tiles);
    (void)nt;
    const bool spread = nt > 1;  // the column order below; one thread takes B slivers in order
    const bool lazy = nt == 1;

    for (size_t jc = 0; jc < N; jc += NC) {
        const size_t nc = std::min(NC, N - jc);
        const size_t nc_pad = round_up(nc, NR);
        const size_t n_tiles = ceil_div(nc, NT);
        const size_t tiles = m_tiles * n_tiles;
        for (size_t t = 0; t < tiles; ++t) done[t].store(0, std::memory_order_relaxed);
        const size_t a_tasks = jc == 0 ? a_slivers : 0;  // A is packed once
        const size_t b_chunks = ceil_div(KC, B_ROWS);     // per K block (the last may need fewer)
        const size_t pack_tasks = a_tasks + b_chunks * k_blocks;
        std::atomic<size_t> next{0};
        // Where the packed sliver of A rows ir.. (in the tile row from ic) and the packed B of
        // K block p live. Up front, each K block has its own place. One thread packs as it goes
        // into one MC x KC block of A and one KC x nc slice of B, reused by every tile row and K
        // block, so they stay in L2 and L3 from one use (and one call) to the next.
        auto a_at = [&](size_t p, size_t ic, size_t ir, size_t kc) {
            return lazy ? Ap + (ir - ic) * kc : Ap + p * KC * m_pad + ir * kc;
        };
        auto b_at = [&](size_t p) { return lazy ? Bp : Bp + p * KC * nc_pad; };
        auto pack_a_sliver = [&](size_t p, size_t ic, size_t i0) {  // rows i0..+MR, K block p
            const size_t pc = p * KC, kc = std::min(KC, K - pc);
            pack_a(A + i0 * lda + pc, lda, std::min(MR, M - i0), kc, a_at(p, ic, i0, kc));
        };
        auto pack_b_chunk = [&](size_t p, size_t k0) {  // rows k0..k0+B_ROWS of K block p
            const size_t pc = p * KC, kc = std::min(KC, K - pc);
            if (k0 < kc)
                pack_b_rows(B + (pc + k0) * ldb + jc, ldb, std::min(B_ROWS, kc - k0), nc, kc,
                            b_at(p) + k0 * NR);
        };
#if defined(_OPENMP)
#pragma omp parallel num_threads(nt)
#endif
        {
            if (!lazy) {
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, 4)
#endif
                for (size_t task = 0; task < pack_tasks; ++task) {
                    if (task < a_tasks) {  // one sliver of A, every K block: its rows read in order
                        const size_t i0 = task * MR;
                        for (size_t p = 0; p < k_blocks; ++p) pack_a_sliver(p, 0, i0);
                    } else {  // B_ROWS rows of one K block across the panel
                        const size_t bt = task - a_tasks;
                        pack_b_chunk(bt / b_chunks, (bt % b_chunks) * B_ROWS);
                    }
                }  // implicit barrier: Ap and this panel's Bp are complete
            }
            for (;;) {
                const size_t item = next.fetch_add(1, std::memory_order_relaxed);
                if (item >= k_blocks * tiles) break;
                const size_t p = item / tiles, t = item % tiles;
                for (unsigned spins = 0; done[t].load(std::memory_order_acquire) < p; ++spins)
                    cpu_relax(spins);
                const size_t pc = p * KC, kc = std::min(KC, K - pc);
                const size_t j = t % n_tiles, half = (n_tiles + 1) / 2;
                const size_t ic = (t / n_tiles) * MC, jt = (spread ? j % 2 * half + j / 2 : j) * NT;
                const size_t mcb = std::min(MC, M - ic), ntb = std::min(NT, nc - jt);
                if (lazy) {
                    if (t == 0)
                        for (size_t k0 = 0; k0 < kc; k0 += B_ROWS) pack_b_chunk(p, k0);
                    if (j == 0)
                        for (size_t i0 = ic; i0 < ic + mcb; i0 += MR) pack_a_sliver(p, ic, i0);
                }
                Epilogue ep{p > 0, nullptr};
                for (size_t jr = jt; jr < jt + ntb; jr += NR) {
                    const size_t nr = std::min(NR, nc - jr);
                    Epilogue e = ep;
                    if (p + 1 == k_blocks && bias) e.bias = bias + jc + jr;
#if TT_AVX2 && !TT_AVX512
                    // The next sliver of this K block's B panel, into L2, a share of its lines
                    // before each call: otherwise its first call waits on L3 for it. Zen 3, a
                    // paired A/B of the two libraries: 1.01-1.05x on 1 thread at 1024 and 2048,
                    // 1.01x on 2. The AVX-512 path goes without: on Zen 5 (before one thread
                    // packed as it goes) it ran 0.93-0.98x with it at 512-2048.
                    const uintptr_t next = reinterpret_cast<uintptr_t>(b_at(p) + (jr + NR) * kc);
                    const size_t lines = jr + NR < nc_pad ? kc * NR / 16 : 0;
                    const size_t per = ceil_div(lines, ceil_div(mcb, MR));
                    size_t line = 0;
#endif
                    for (size_t ir = ic; ir < ic + mcb; ir += MR) {
#if TT_AVX2 && !TT_AVX512
                        for (size_t l = 0; l < per && line < lines; ++l, ++line)
                            _mm_prefetch(reinterpret_cast<const char*>(next + line * 64), _MM_HINT_T1);
#endif
                        micro_kernel(kc, a_at(p, ic, ir, kc), b_at(p) + jr * kc,
                                     C + ir * ldc + jc + jr, ldc, std::min(MR, M - ir), nr, e);
                    }
                }
                done[t].store(p + 1, std::memory_order_release);
            }
        }  // end of the parallel region: nobody still reads Bp when the next panel is packed
    }
    return 0;
}


}  // namespace

extern "C" {

// Which ISA path this library was compiled with.
const char* tt_isa(void) {
#if TT_AVX512
    return "avx512f";
#elif TT_AVX2
    return "avx2+fma";
#elif TT_NEON
    return "neon";
#else
    return "scalar";
#endif
}

int tt_openmp(void) {
#if defined(_OPENMP)
    return 1;
#else
    return 0;
#endif
}

// Threads a parallel region asking for `threads` really gets. torch shares (or brings) libgomp and
// sets its ICVs, so this is how the benchmark checks our regions still get what they ask for.
int tt_team_size(int threads) {
    int got = 1;
#if defined(_OPENMP)
#pragma omp parallel num_threads(clamp_threads(threads))
    {
#pragma omp single
        got = omp_get_num_threads();
    }
#else
    (void)threads;
#endif
    return got;
}

int tt_mr(void) { return static_cast<int>(MR); }
int tt_nr(void) { return static_cast<int>(NR); }

// "6x16 avx2+fma asm", "14x32 avx512f", ...: the register tile and how it is written.
const char* tt_microkernel(void) { return TT_UKERNEL_NAME; }

// GEMM cache blocks. tt_set_blocks rounds mc up to a multiple of MR and nc to one of NR and
// returns 0, or 1 (nothing changed) when a size is 0. Not thread-safe against a running GEMM:
// simd.py sets them once, right after loading the library.
int tt_set_blocks(size_t kc, size_t mc, size_t nc) {
    if (kc == 0 || mc == 0 || nc == 0) return 1;
    g_blocks = Blocks{kc, round_up(mc, MR), round_up(nc, NR)};
    return 0;
}

// Cap on the packing buffers (default 64 MiB): larger GEMMs run in row panels and narrower B
// panels. Tests set it small to exercise those paths; returns the previous value.
size_t tt_set_panel_bytes(size_t bytes) {
    size_t old = g_panel_bytes;
    if (bytes > 0) g_panel_bytes = bytes;
    return old;
}

// 0: KC, 1: MC, 2: NC (what the GEMM uses now); -1 for any other index.
long tt_block(int which) {
    switch (which) {
        case 0: return static_cast<long>(g_blocks.kc);
        case 1: return static_cast<long>(g_blocks.mc);
        case 2: return static_cast<long>(g_blocks.nc);
        default: return -1;
    }
}

// C = A @ B (bias == NULL) or C = gelu(A @ B + bias) (bias of length N). Returns 0, or 1 when
// a packing buffer could not be allocated (C is then unspecified).
int tt_sgemm(const float* A, const float* B, float* C, size_t M, size_t N, size_t K, size_t lda,
             size_t ldb, size_t ldc, const float* bias, int threads) {
    try {
        return sgemm_blocked(A, B, C, M, N, K, lda, ldb, ldc, bias, threads);
    } catch (...) {
        return 1;
    }
}

// Y(rows x cols) = gelu(X + bias[None, :]), X and Y contiguous; they may alias.
// Traffic: read 4*rows*cols + 4*cols bytes, write 4*rows*cols.
// The streaming loop prefetches X this many floats (2 KiB) ahead, one cache line per 16 floats.
// The hardware prefetcher alone leaves the core waiting on loads between the long GELU chains: on
// Zen 3 at 4096 x 4096, 2 threads, a 4 KiB lead moved bias+GELU from 0.75 to 0.82-0.86 of the copy
// bandwidth. On Zen 4 (benchmarks/bench_kernel_change.py, paired, 2 threads), 2 KiB beat 4 KiB by
// 1.1-1.2x on the AVX2 path and reached 0.94 of the copy on the AVX-512 path; 1 KiB and no
// prefetch were slower. A prefetch past the end of X is harmless (prefetches never fault); the address is
// computed as an integer so that no out-of-range pointer is ever formed.
constexpr size_t kStreamPrefetch = 512;
#if TT_AVX2
inline void prefetch_ahead(const float* p) {
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + kStreamPrefetch * sizeof(float)),
                 _MM_HINT_T0);
}

// y[0:16] = gelu(x[0:16] + b[0:16]) with non-temporal stores; y is 64-byte aligned.
inline void gelu16_stream(const float* x, const float* b, float* y) {
#if TT_AVX512
    _mm512_stream_ps(y, gelu_avx512(_mm512_add_ps(_mm512_loadu_ps(x), _mm512_loadu_ps(b))));
#else
    _mm256_stream_ps(y, gelu_avx2(_mm256_add_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(b))));
    _mm256_stream_ps(y + 8, gelu_avx2(_mm256_add_ps(_mm256_loadu_ps(x + 8), _mm256_loadu_ps(b + 8))));
#endif
}

// Outputs far larger than the caches: Y is written with non-temporal stores (no read-for-ownership
// of Y, so 8 instead of 12 bytes of traffic per element), over the FLAT index range of the
// contiguous rows x cols arrays, in whole 64-byte lines of Y. Row ends do not cut the loop: only the
// first lines before Y's first 64-byte boundary and the last partial line are written by ordinary
// stores, once per call. (Peeling every row instead, as this loop once did, mixes ordinary and
// non-temporal stores in the cache line at each row boundary whenever Y is not 64-byte aligned;
// NumPy's large arrays sit 16 bytes past a page boundary, and that cost 0.66 vs 0.78 of the copy
// bandwidth on 2 threads at 4096 x 4096.) A line that crosses the end of a row takes its bias from
// a small wrapped copy. Work items are 64K floats (256 KiB of Y), as in tt_copy: each item starts
// a new stream that neither prefetcher is ahead on yet, and on Zen 3 (2 threads, 4096 x 4096) 64K
// ran 1.03-1.07x faster than 16K (paired); 128K gave nothing more.
static void bias_gelu_stream(const float* X, const float* bias, float* Y, size_t rows, size_t cols, int nt) {
    const size_t total = rows * cols;
    size_t lead = ((64 - (reinterpret_cast<uintptr_t>(Y) & 63)) & 63) / sizeof(float);
    lead = std::min(lead, total);
    for (size_t i = 0; i < lead; ++i) Y[i] = gelu_scalar(X[i] + bias[i % cols]);
    const size_t body = (total - lead) / 16 * 16;
    const size_t item = size_t{1} << 16;
    const size_t items = ceil_div(body, item);
    (void)nt;
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
#endif
    for (size_t t = 0; t < items; ++t) {
        size_t i = lead + t * item;
        const size_t end = lead + std::min(body, (t + 1) * item);
        size_t col = i % cols;
        alignas(64) float wrapped[16];
        while (i < end) {
            // the lines that end inside this row, with no check per line, then the one that
            // crosses the row's end (if any) with its bias wrapped
            const size_t stop = std::min(end, i + (cols - col) / 16 * 16);
            const float* b = bias + col;
            for (; i < stop; i += 16, b += 16) {
                prefetch_ahead(X + i);
                gelu16_stream(X + i, b, Y + i);
            }
            col = static_cast<size_t>(b - bias);
            if (col == cols) col = 0;
            if (i < end && col + 16 > cols) {
                for (size_t l = 0; l < 16; ++l) wrapped[l] = bias[(col + l) % cols];
                prefetch_ahead(X + i);
                gelu16_stream(X + i, wrapped, Y + i);
                i += 16;
                col += 16;
                while (col >= cols) col -= cols;
            }
        }
        _mm_sfence();  // streamed stores are weakly ordered: publish before the region ends
    }
    for (size_t i = lead + body; i < total; ++i) Y[i] = gelu_scalar(X[i] + bias[i % cols]);
}
#endif

int tt_bias_gelu(const float* X, const float* bias, float* Y, size_t rows, size_t cols,
                 int threads) {
    if (rows == 0 || cols == 0) return 0;
    int nt = clamp_threads(threads);
#if TT_AVX2
    // Far larger than the caches (and Y float-aligned, as NumPy's arrays always are): streaming.
    // Smaller outputs stay in cache for whoever reads them next.
    if (rows * cols * sizeof(float) >= (size_t{32} << 20) && reinterpret_cast<uintptr_t>(Y) % sizeof(float) == 0) {
        bias_gelu_stream(X, bias, Y, rows, cols, nt);
        return 0;
    }
#endif
    // Tiles of whole rows (or row pieces when a row alone is large) of ~16K floats, handed out
    // dynamically; inside a tile the column index is the bias index: no modulo in the inner loop.
    const size_t tile = size_t{1} << 14;
    size_t col_tile = std::min(cols, tile);
    size_t col_tiles = ceil_div(cols, col_tile);
    size_t row_tile = std::max<size_t>(1, tile / col_tile);
    size_t row_tiles = ceil_div(rows, row_tile);
    size_t tiles = row_tiles * col_tiles;
    if (tiles < 4) nt = 1;  // under ~64K floats a parallel region costs more than it saves
    (void)nt;
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
#endif
    for (size_t t = 0; t < tiles; ++t) {
        size_t r0 = (t / col_tiles) * row_tile, c0 = (t % col_tiles) * col_tile;
        size_t r1 = std::min(rows, r0 + row_tile), c1 = std::min(cols, c0 + col_tile);
        for (size_t i = r0; i < r1; ++i) {
            const float* x = X + i * cols;
            float* y = Y + i * cols;
            size_t j = c0;
#if TT_AVX512
            for (; j + 16 <= c1; j += 16)
                _mm512_storeu_ps(y + j, gelu_avx512(_mm512_add_ps(_mm512_loadu_ps(x + j),
                                                                  _mm512_loadu_ps(bias + j))));
            if (j < c1) {
                __mmask16 m = static_cast<__mmask16>((1u << (c1 - j)) - 1u);
                __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + j), _mm512_maskz_loadu_ps(m, bias + j));
                _mm512_mask_storeu_ps(y + j, m, gelu_avx512(v));
                j = c1;
            }
#elif TT_AVX2
            for (; j + 8 <= c1; j += 8)
                _mm256_storeu_ps(y + j, gelu_avx2(_mm256_add_ps(_mm256_loadu_ps(x + j),
                                                                _mm256_loadu_ps(bias + j))));
#endif
            for (; j < c1; ++j) y[j] = gelu_scalar(x[j] + bias[j]);
        }
    }
    return 0;
}

// Parallel copy, the bandwidth ceiling that bias+GELU (read n, write n floats) is measured against.
// Copies far larger than the caches use the same non-temporal stores as bias+GELU (AVX-512 and
// AVX2 builds alike; measured on an AVX-512 machine: 48 GB/s on 2 threads vs 43 for memcpy);
// anything else is memcpy in 256 KiB chunks.
int tt_copy(const float* src, float* dst, size_t n, int threads) {
    int nt = clamp_threads(threads);
    (void)nt;
    const size_t chunk = 1 << 16;
    size_t nchunks = ceil_div(n, chunk);
    const bool stream = n * sizeof(float) >= (size_t{32} << 20);
    (void)stream;
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
#endif
    for (size_t c = 0; c < nchunks; ++c) {
        size_t lo = c * chunk, hi = std::min(n, lo + chunk);
#if TT_AVX512
        if (stream) {
            while (lo < hi && (reinterpret_cast<uintptr_t>(dst + lo) & 63)) {
                dst[lo] = src[lo];
                ++lo;
            }
            for (; lo + 16 <= hi; lo += 16) _mm512_stream_ps(dst + lo, _mm512_loadu_ps(src + lo));
            _mm_sfence();
        }
#elif TT_AVX2
        if (stream) {
            while (lo < hi && (reinterpret_cast<uintptr_t>(dst + lo) & 31)) {
                dst[lo] = src[lo];
                ++lo;
            }
            for (; lo + 8 <= hi; lo += 8) _mm256_stream_ps(dst + lo, _mm256_loadu_ps(src + lo));
            _mm_sfence();
        }
#endif
        if (lo < hi) std::memcpy(dst + lo, src + lo, (hi - lo) * sizeof(float));
    }
    return 0;
}

// FMA peak: each thread runs `iters` rounds of 12 independent vector FMA chains (enough to cover
// FMA latency x throughput), on zmm in an AVX-512 build and ymm otherwise: the vector width the GEMM
// micro-kernel uses. Returns GFLOP/s over all threads.
double tt_fma_peak(size_t iters, int threads) {
    int nt = clamp_threads(threads);
    (void)nt;
    double sink = 0.0;
    auto t0 = std::chrono::steady_clock::now();
#if defined(_OPENMP)
#pragma omp parallel num_threads(nt) reduction(+ : sink)
#endif
    {
#if TT_AVX512
        __m512 acc[12];
        for (int r = 0; r < 12; ++r) acc[r] = _mm512_set1_ps(0.001f * r);
        const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
        for (size_t it = 0; it < iters; ++it)
            for (int r = 0; r < 12; ++r) acc[r] = _mm512_fmadd_ps(acc[r], m, a);
        for (int r = 1; r < 12; ++r) acc[0] = _mm512_add_ps(acc[0], acc[r]);
        alignas(64) float out[16];
        _mm512_store_ps(out, acc[0]);
        sink += out[0];
#elif TT_AVX2
        __m256 acc[12];
        for (int r = 0; r < 12; ++r) acc[r] = _mm256_set1_ps(0.001f * r);
        const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
        for (size_t it = 0; it < iters; ++it)
            for (int r = 0; r < 12; ++r) acc[r] = _mm256_fmadd_ps(acc[r], m, a);
        float out[8];
        for (int r = 1; r < 12; ++r) acc[0] = _mm256_add_ps(acc[0], acc[r]);
        _mm256_storeu_ps(out, acc[0]);
        sink += out[0];
#else
        float acc[12][8];
        for (int r = 0; r < 12; ++r)
            for (int l = 0; l < 8; ++l) acc[r][l] = 0.001f * r;
        for (size_t it = 0; it < iters; ++it)
            for (int r = 0; r < 12; ++r)
                for (int l = 0; l < 8; ++l) acc[r][l] = acc[r][l] * 0.999999f + 1e-7f;
        for (int r = 0; r < 12; ++r) sink += acc[r][0];
#endif
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int used = 1;
#if defined(_OPENMP)
    used = nt;
#endif
    if (sink == 12345.678) secs += 1e-12;  // keeps `sink` alive
#if TT_AVX512
    const double lanes = 16.0;  // the 14x32 GEMM runs on zmm, so its ceiling is the zmm FMA rate
#else
    const double lanes = 8.0;
#endif
    return 2.0 * lanes * 12.0 * static_cast<double>(iters) * used / secs / 1e9;
}

// The micro-kernel alone, apart from packing, blocking and threads: `slivers` packed MR x kc
// slivers of A (1: all in L1; MC / MR of them: one MC x KC block, streaming from L2, as in the
// GEMM) swept `reps` times past one kc x NR sliver of B, every full tile written to C by the same
// micro_kernel the GEMM calls. GFLOP/s on the calling thread; 0 when out of memory. `tito bench`
// divides it by the FMA peak: what the GEMM loses beyond this is packing, caches and threads.
double tt_ukernel_gflops(size_t kc, size_t slivers, size_t reps) {
    kc = std::max<size_t>(kc, 1);
    slivers = std::max<size_t>(slivers, 1);
    const size_t a_n = round_up(MR * kc * slivers, 16), b_n = round_up(NR * kc, 16);
    const size_t ldc = NR;
    float* A = static_cast<float*>(std::aligned_alloc(64, a_n * sizeof(float)));
    float* B = static_cast<float*>(std::aligned_alloc(64, b_n * sizeof(float)));
    float* C = static_cast<float*>(std::aligned_alloc(64, round_up(MR * ldc * slivers, 16) * sizeof(float)));
    if (!A || !B || !C) {
        std::free(A);
        std::free(B);
        std::free(C);
        return 0.0;
    }
    for (size_t i = 0; i < a_n; ++i) A[i] = 0.5f;
    for (size_t i = 0; i < b_n; ++i) B[i] = 0.25f;
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t r = 0; r < reps; ++r)
        for (size_t s = 0; s < slivers; ++s)
            micro_kernel(kc, A + s * MR * kc, B, C + s * MR * ldc, ldc, MR, NR, Epilogue{false, nullptr});
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double sink = C[0];
    std::free(A);
    std::free(B);
    std::free(C);
    if (sink == 12345.678) return 0.0;  // keeps the stores alive
    return 2.0 * MR * NR * static_cast<double>(kc) * slivers * reps / secs / 1e9;
}

}  // extern "C"
