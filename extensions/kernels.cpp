// TinyTorch native reference kernels: a BLIS-style SGEMM, a fused bias+GELU and the fused
// GEMM+bias+GELU epilogue. Built on first use by extensions/build.py and bound with ctypes.
//
// ISA paths, chosen at compile time from the flags build.py probed for the running CPU:
//   __AVX2__ && __FMA__  -> 6x16 micro-kernel in 12 ymm accumulators, AVX2 exp for GELU
//     + __AVX512F__      -> the streaming bias+GELU (not the GEMM) on 16 lanes with masked tails
//   __ARM_NEON           -> 6x16 micro-kernel in 24 q-register accumulators
//   otherwise            -> portable scalar loops (the compiler may still auto-vectorise them)
// tt_isa() reports which one this library was built with. tests/test_ext_isa_paths.py builds
// and checks each path (NEON under qemu-aarch64).
//
// OpenMP: every parallel region passes num_threads explicitly. torch's bundled libgomp.so.1 and
// the system one share a soname, so a process holds one runtime and torch.set_num_threads()
// moves its default; an explicit num_threads is immune to that.
//
// All matrices are row-major float32. Indices and sizes are size_t; the Python side (simd.py)
// checks dtype, contiguity and shapes, so the pointers here are trusted.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(_OPENMP)
#include <omp.h>
#endif

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define TT_AVX2 1
#elif defined(__ARM_NEON) || defined(__ARM_NEON__)
#include <arm_neon.h>
#define TT_NEON 1
#endif

namespace {

// ---------------------------------------------------------------------------------------------
// Blocking parameters (BLIS names).
//   MR x NR : register tile of C held in accumulators by the micro-kernel (6 rows x 16 columns:
//             AVX2 uses 6 x 2 ymm = 12 accumulators + 2 B vectors + 1 broadcast = 15 of 16 regs).
//   KC      : depth of one rank-KC update; an MR x KC sliver of A (12 KiB) and a KC x NR sliver of
//             B (32 KiB) stay in L1 while the micro-kernel streams through them.
//   MC      : rows of A packed per block; the MC x KC block of A (144 KiB) stays in L2.
//   NC      : columns of B packed per block; the KC x NC panel of B (6 MiB) lives in L3.
// ---------------------------------------------------------------------------------------------
#ifndef TT_KC
#define TT_KC 512
#endif
#ifndef TT_MC
#define TT_MC 72
#endif
constexpr size_t MR = 6;
constexpr size_t NR = 16;
constexpr size_t KC = TT_KC;
constexpr size_t MC = TT_MC;  // a multiple of MR
constexpr size_t NC = 3072;   // a multiple of NR

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

inline float gelu_scalar(float y) {
    if (y < kGeluFlush) return 0.0f;
    float u = kSqrt2OverPi * (y + kGeluCubic * y * y * y);
    float e = std::exp(std::min(std::max(-2.0f * u, -88.0f), 88.0f));
    return y / (1.0f + e);
}

#if TT_AVX2
// exp(x) for x already clamped to [-88, 88]: Cephes expf. x = n ln2 + r, |r| <= ln2/2,
// exp(r) by a degree-5 polynomial, 2^n built in the exponent bits. Max rel error ~2 ulp.
inline __m256 exp_avx2(__m256 x) {
    const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
    const __m256 ln2_hi = _mm256_set1_ps(0.693359375f);
    const __m256 ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, ln2_hi, x);
    r = _mm256_fnmadd_ps(n, ln2_lo, r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    __m256 r2 = _mm256_mul_ps(r, r);
    p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

inline __m256 gelu_avx2(__m256 y) {
    const __m256 c = _mm256_set1_ps(kSqrt2OverPi);
    const __m256 k = _mm256_set1_ps(kGeluCubic);
    __m256 y2 = _mm256_mul_ps(y, y);
    __m256 u = _mm256_mul_ps(c, _mm256_fmadd_ps(_mm256_mul_ps(k, y2), y, y));
    __m256 t = _mm256_mul_ps(_mm256_set1_ps(-2.0f), u);
    // max/min return the second operand when the first is NaN, so a NaN y stays NaN below via y/...
    t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-88.0f)), _mm256_set1_ps(88.0f));
    __m256 g = _mm256_div_ps(y, _mm256_add_ps(_mm256_set1_ps(1.0f), exp_avx2(t)));
    __m256 flush = _mm256_cmp_ps(y, _mm256_set1_ps(kGeluFlush), _CMP_LT_OQ);
    return _mm256_andnot_ps(flush, g);
}
#endif

#if TT_AVX2 && defined(__AVX512F__)
#define TT_AVX512 1
// The same exp and GELU on 16 lanes, for the streaming bias+GELU kernel only (the GEMM stays on
// the 6x16 AVX2 tile). Masked loads/stores handle the ragged tail without a scalar loop.
inline __m512 exp_avx512(__m512 x) {
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

inline __m512 gelu_avx512(__m512 y) {
    __m512 y2 = _mm512_mul_ps(y, y);
    __m512 u = _mm512_mul_ps(_mm512_set1_ps(kSqrt2OverPi),
                             _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(kGeluCubic), y2), y, y));
    __m512 t = _mm512_mul_ps(_mm512_set1_ps(-2.0f), u);
    t = _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(-88.0f)), _mm512_set1_ps(88.0f));
    __m512 g = _mm512_div_ps(y, _mm512_add_ps(_mm512_set1_ps(1.0f), exp_avx512(t)));
    __mmask16 keep = _mm512_cmp_ps_mask(y, _mm512_set1_ps(kGeluFlush), _CMP_NLT_UQ);  // NaN kept
    return _mm512_maskz_mov_ps(keep, g);
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
void pack_a(const float* A, size_t lda, size_t mc, size_t kc, float* Ap) {
    for (size_t i0 = 0; i0 < mc; i0 += MR) {
        size_t mr = std::min(MR, mc - i0);
        float* dst = Ap + i0 * kc;  // sliver i0/MR starts at (i0/MR) * MR * kc
        for (size_t k = 0; k < kc; ++k) {
            size_t i = 0;
            for (; i < mr; ++i) dst[k * MR + i] = A[(i0 + i) * lda + k];
            for (; i < MR; ++i) dst[k * MR + i] = 0.0f;
        }
    }
}

void pack_b_sliver(const float* B, size_t ldb, size_t kc, size_t nr, float* dst) {
    if (nr == NR) {
        for (size_t k = 0; k < kc; ++k) std::memcpy(dst + k * NR, B + k * ldb, NR * sizeof(float));
        return;
    }
    for (size_t k = 0; k < kc; ++k) {
        size_t j = 0;
        for (; j < nr; ++j) dst[k * NR + j] = B[k * ldb + j];
        for (; j < NR; ++j) dst[k * NR + j] = 0.0f;
    }
}

// ---------------------------------------------------------------------------------------------
// Micro-kernel: acc(MR x NR) = Ap(MR x kc sliver) @ Bp(kc x NR sliver), then write back to C:
//   C  = acc            (first K block)          or   C += acc   (later K blocks)
//   C  = gelu(C + bias) (last K block, fused)    applied on the registers before the store,
// so the fused epilogue costs no extra pass over C. Ragged tiles (mr < MR or nr < NR) go through
// a small MR x NR buffer and a scalar write-back.
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

#if TT_AVX2
void micro_kernel(size_t kc, const float* Ap, const float* Bp, float* C, size_t ldc, size_t mr,
                  size_t nr, Epilogue ep) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    // C is only touched after the K loop: start fetching its 6 rows now so the write-back
    // does not wait on memory.
    for (size_t i = 0; i < mr; ++i) {
        _mm_prefetch(reinterpret_cast<const char*>(C + i * ldc), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(C + i * ldc + NR - 1), _MM_HINT_T0);
    }
    for (size_t k = 0; k < kc; ++k) {
        _mm_prefetch(reinterpret_cast<const char*>(Ap + 8 * MR), _MM_HINT_T0);
        __m256 b0 = _mm256_loadu_ps(Bp);
        __m256 b1 = _mm256_loadu_ps(Bp + 8);
        __m256 a;
        a = _mm256_broadcast_ss(Ap + 0); c00 = _mm256_fmadd_ps(a, b0, c00); c01 = _mm256_fmadd_ps(a, b1, c01);
        a = _mm256_broadcast_ss(Ap + 1); c10 = _mm256_fmadd_ps(a, b0, c10); c11 = _mm256_fmadd_ps(a, b1, c11);
        a = _mm256_broadcast_ss(Ap + 2); c20 = _mm256_fmadd_ps(a, b0, c20); c21 = _mm256_fmadd_ps(a, b1, c21);
        a = _mm256_broadcast_ss(Ap + 3); c30 = _mm256_fmadd_ps(a, b0, c30); c31 = _mm256_fmadd_ps(a, b1, c31);
        a = _mm256_broadcast_ss(Ap + 4); c40 = _mm256_fmadd_ps(a, b0, c40); c41 = _mm256_fmadd_ps(a, b1, c41);
        a = _mm256_broadcast_ss(Ap + 5); c50 = _mm256_fmadd_ps(a, b0, c50); c51 = _mm256_fmadd_ps(a, b1, c51);
        Ap += MR;
        Bp += NR;
    }
    __m256 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    if (mr == MR && nr == NR) {
        __m256 bias0 = _mm256_setzero_ps(), bias1 = _mm256_setzero_ps();
        if (ep.bias) {
            bias0 = _mm256_loadu_ps(ep.bias);
            bias1 = _mm256_loadu_ps(ep.bias + 8);
        }
        for (size_t i = 0; i < MR; ++i) {
            float* c = C + i * ldc;
            __m256 v0 = acc[i][0], v1 = acc[i][1];
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
    alignas(32) float buf[MR * NR];
    for (size_t i = 0; i < MR; ++i) {
        _mm256_store_ps(buf + i * NR, acc[i][0]);
        _mm256_store_ps(buf + i * NR + 8, acc[i][1]);
    }
    write_back_scalar(buf, C, ldc, mr, nr, ep);
}
#elif TT_NEON
void micro_kernel(size_t kc, const float* Ap, const float* Bp, float* C, size_t ldc, size_t mr,
                  size_t nr, Epilogue ep) {
    float32x4_t acc[MR][4];
    for (size_t i = 0; i < MR; ++i)
        for (size_t q = 0; q < 4; ++q) acc[i][q] = vdupq_n_f32(0.0f);
    for (size_t k = 0; k < kc; ++k) {
        float32x4_t b0 = vld1q_f32(Bp), b1 = vld1q_f32(Bp + 4);
        float32x4_t b2 = vld1q_f32(Bp + 8), b3 = vld1q_f32(Bp + 12);
        for (size_t i = 0; i < MR; ++i) {
            float a = Ap[i];
            acc[i][0] = vfmaq_n_f32(acc[i][0], b0, a);
            acc[i][1] = vfmaq_n_f32(acc[i][1], b1, a);
            acc[i][2] = vfmaq_n_f32(acc[i][2], b2, a);
            acc[i][3] = vfmaq_n_f32(acc[i][3], b3, a);
        }
        Ap += MR;
        Bp += NR;
    }
    alignas(16) float buf[MR * NR];
    for (size_t i = 0; i < MR; ++i)
        for (size_t q = 0; q < 4; ++q) vst1q_f32(buf + i * NR + 4 * q, acc[i][q]);
    write_back_scalar(buf, C, ldc, mr, nr, ep);
}
#else
void micro_kernel(size_t kc, const float* Ap, const float* Bp, float* C, size_t ldc, size_t mr,
                  size_t nr, Epilogue ep) {
    float buf[MR * NR] = {0.0f};
    for (size_t k = 0; k < kc; ++k) {
        for (size_t i = 0; i < MR; ++i) {
            float a = Ap[k * MR + i];
            for (size_t j = 0; j < NR; ++j) buf[i * NR + j] += a * Bp[k * NR + j];
        }
    }
    write_back_scalar(buf, C, ldc, mr, nr, ep);
}
#endif

// Grow-only per-thread scratch: packing buffers are reused across calls instead of being
// re-allocated (and re-faulted) on every GEMM.
float* scratch(size_t count, int which) {
    thread_local float* bufs[2] = {nullptr, nullptr};
    thread_local size_t caps[2] = {0, 0};
    if (caps[which] < count) {
        std::free(bufs[which]);
        size_t bytes = round_up(count * sizeof(float), 64);
        bufs[which] = static_cast<float*>(std::aligned_alloc(64, bytes));
        caps[which] = bufs[which] ? count : 0;
    }
    return bufs[which];
}

// ---------------------------------------------------------------------------------------------
// The blocked GEMM, C(M x N) = A(M x K) @ B(K x N) [then gelu(C + bias) if bias], in pseudo-code:
//
//   for pc in 0..K step KC:                          # one rank-KC update
//     pack A[:, pc:pc+KC] -> Ap                      # threads split the MR slivers
//     for jc in 0..N step NC:                        # B panel columns            (L3)
//       pack B[pc:pc+KC, jc:jc+NC] -> Bp             # threads split the NR slivers
//       barrier
//       for (ic, jt) in tiles of MC rows x NT cols (dynamic, one tile per grab):
//         for jr in jt..jt+NT step NR:               # KC x NR sliver of Bp       (L1)
//           for ir in ic..ic+MC step MR:             # MC x KC block of Ap        (L2)
//             micro_kernel(Ap[ir], Bp[jr]) -> C[ir:+MR, jc+jr:+NR]
//               first pc: store; later pc: accumulate; last pc and fused: gelu(acc + bias)
//       barrier                                      # Bp, Ap are reused by the next pc
//
// Tiles are handed out dynamically rather than split M-wise up front: on a shared machine one
// thread can lose its core for a while, and a static split would make the other one wait.
// ---------------------------------------------------------------------------------------------
constexpr size_t NT = 4 * NR;  // columns per work tile: 64

int sgemm_blocked(const float* A, const float* B, float* C, size_t M, size_t N, size_t K,
                  size_t lda, size_t ldb, size_t ldc, const float* bias, int threads) {
    if (M == 0 || N == 0) return 0;
    if (K == 0) {  // empty sum: C = 0, then the epilogue
        for (size_t i = 0; i < M; ++i)
            for (size_t j = 0; j < N; ++j) C[i * ldc + j] = bias ? gelu_scalar(bias[j]) : 0.0f;
        return 0;
    }
    int nt = clamp_threads(threads);
    size_t m_pad = round_up(M, MR);
    size_t kc_max = std::min(KC, K);
    size_t nc_max = std::min(NC, round_up(N, NR));
    float* Bp = scratch(kc_max * nc_max, 0);
    float* Ap = scratch(m_pad * kc_max, 1);
    if (!Bp || !Ap) return 1;
    size_t a_slivers = m_pad / MR;
    size_t m_tiles = ceil_div(M, MC);
    // Small problems: fewer threads than tiles would leave some idle anyway.
    size_t min_tiles = m_tiles * ceil_div(std::min(N, NC), NT);
    if (min_tiles < static_cast<size_t>(nt)) nt = static_cast<int>(min_tiles);
    (void)nt;

#if defined(_OPENMP)
#pragma omp parallel num_threads(nt)
#endif
    {
        for (size_t pc = 0; pc < K; pc += KC) {
            size_t kc = std::min(KC, K - pc);
            Epilogue ep{pc > 0, nullptr};
            bool last_k = pc + kc == K;
#if defined(_OPENMP)
#pragma omp for schedule(static) nowait
#endif
            for (size_t s = 0; s < a_slivers; ++s) {
                size_t i0 = s * MR;
                pack_a(A + i0 * lda + pc, lda, std::min(MR, M - i0), kc, Ap + i0 * kc);
            }
            for (size_t jc = 0; jc < N; jc += NC) {
                size_t nc = std::min(NC, N - jc);
                size_t b_slivers = ceil_div(nc, NR);
                size_t n_tiles = ceil_div(nc, NT);
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
                for (size_t s = 0; s < b_slivers; ++s) {
                    size_t j0 = s * NR;
                    pack_b_sliver(B + pc * ldb + jc + j0, ldb, kc, std::min(NR, nc - j0),
                                  Bp + s * NR * kc);
                }  // implicit barrier: Bp and (first jc) Ap are complete
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, 1)
#endif
                for (size_t t = 0; t < m_tiles * n_tiles; ++t) {
                    size_t ic = (t / n_tiles) * MC, jt = (t % n_tiles) * NT;
                    size_t mcb = std::min(MC, M - ic), ntb = std::min(NT, nc - jt);
                    for (size_t jr = jt; jr < jt + ntb; jr += NR) {
                        size_t nr = std::min(NR, nc - jr);
                        Epilogue e = ep;
                        if (last_k && bias) e.bias = bias + jc + jr;
                        for (size_t ir = ic; ir < ic + mcb; ir += MR) {
                            micro_kernel(kc, Ap + ir * kc, Bp + jr * kc, C + ir * ldc + jc + jr,
                                         ldc, std::min(MR, M - ir), nr, e);
                        }
                    }
                }  // implicit barrier: nobody still reads Bp (next jc) or Ap (next pc)
            }
        }
    }
    return 0;
}

}  // namespace

extern "C" {

// Which ISA path this library was compiled with.
const char* tt_isa(void) {
#if TT_AVX512
    return "avx2+fma, avx512f bias+gelu";
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

// Y(rows x cols) = gelu(X + bias[None, :]). Work is cut into tiles of whole rows (or row pieces
// when a row alone is large) of ~16K floats, handed out dynamically; inside a tile the column
// index is the bias index, so there is no modulo in the inner loop. X and Y may alias.
// Traffic: read 4*rows*cols + 4*cols bytes, write 4*rows*cols.
int tt_bias_gelu(const float* X, const float* bias, float* Y, size_t rows, size_t cols,
                 int threads) {
    if (rows == 0 || cols == 0) return 0;
    const size_t tile = size_t{1} << 14;
    size_t col_tile = std::min(cols, tile);
    size_t col_tiles = ceil_div(cols, col_tile);
    size_t row_tile = std::max<size_t>(1, tile / col_tile);
    size_t row_tiles = ceil_div(rows, row_tile);
    size_t tiles = row_tiles * col_tiles;
    int nt = clamp_threads(threads);
    if (tiles < 4) nt = 1;  // under ~64K floats a parallel region costs more than it saves
    (void)nt;
    // Outputs far larger than the caches are written with non-temporal stores: no read-for-
    // ownership of Y, so 8 instead of 12 bytes of traffic per element. Smaller outputs stay in
    // cache for whoever reads them next.
    const bool stream = rows * cols * sizeof(float) >= (size_t{32} << 20);
    (void)stream;
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
            if (stream) {
                // Peel to a 64-byte boundary, then stream whole cache lines past the caches.
                size_t lead = ((64 - (reinterpret_cast<uintptr_t>(y + j) & 63)) & 63) / sizeof(float);
                lead = std::min(lead, c1 - j);
                if (lead) {
                    __mmask16 m = static_cast<__mmask16>((1u << lead) - 1u);
                    __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + j), _mm512_maskz_loadu_ps(m, bias + j));
                    _mm512_mask_storeu_ps(y + j, m, gelu_avx512(v));
                    j += lead;
                }
                for (; j + 16 <= c1; j += 16)
                    _mm512_stream_ps(y + j, gelu_avx512(_mm512_add_ps(_mm512_loadu_ps(x + j),
                                                                      _mm512_loadu_ps(bias + j))));
            }
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
#if TT_AVX512
        if (stream) _mm_sfence();  // streamed stores are weakly ordered: publish before returning
#endif
    }
    return 0;
}

// Parallel copy, the bandwidth ceiling that bias+GELU (read n, write n floats) is measured against.
// Copies far larger than the caches use the same non-temporal stores as bias+GELU (measured here:
// 48 GB/s on 2 threads vs 43 for memcpy); anything else is memcpy in 256 KiB chunks.
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
#endif
        if (lo < hi) std::memcpy(dst + lo, src + lo, (hi - lo) * sizeof(float));
    }
    return 0;
}

// FMA peak: each thread runs `iters` rounds of 12 independent vector FMA chains (the micro-kernel's
// accumulator count, enough to cover FMA latency x throughput). Returns GFLOP/s over all threads.
double tt_fma_peak(size_t iters, int threads) {
    int nt = clamp_threads(threads);
    (void)nt;
    double sink = 0.0;
    auto t0 = std::chrono::steady_clock::now();
#if defined(_OPENMP)
#pragma omp parallel num_threads(nt) reduction(+ : sink)
#endif
    {
#if TT_AVX2
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
    return 2.0 * 8.0 * 12.0 * static_cast<double>(iters) * used / secs / 1e9;
}

}  // extern "C"
