// TinyTorch native reference kernels: a BLIS-style SGEMM, a fused bias+GELU and the fused
// GEMM+bias+GELU epilogue. Built on first use by extensions/build.py and bound with ctypes.
//
// One translation unit, in BLIS's layers (the parts in extensions/csrc/):
//   isa.h             the target: ISA macros (TT_AVX512, TT_AVX2, TT_NEON), OpenMP's thread count
//   blocking.h        the register tile MR x NR and the cache blocks KC, MC, NC
//   gelu.h            GELU, shared by the GEMM's fused epilogue and the streaming bias+GELU
//   pack.h            packing A and B into the micro-kernel's slivers
//   ukernel_<isa>.h   one micro-kernel per ISA: avx512, avx2, neon, scalar (picked below)
//   gemm.h            the write-back and its fused epilogue, and the blocked, threaded GEMM
//   this file         the C API (tt_*): GEMM, streaming bias+GELU, copy, FMA peak, build facts
// Each part holds only what it names; build.py hashes them all into its cache key.
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

#include "csrc/isa.h"
#include "csrc/blocking.h"
#include "csrc/gelu.h"
#include "csrc/pack.h"

// The micro-kernels proper: acc (MR x NR, row-major, 64-byte aligned) = Ap sliver @ Bp sliver.
// They are separate, never-inlined functions so that the epilogue's register use cannot leak into
// the inner loop, and so tests/test_ext_codegen.py can find and disassemble them by name.
#if TT_AVX512
#include "csrc/ukernel_avx512.h"
#define TT_UKERNEL ukernel_avx512_14x32
#define TT_UKERNEL_NAME "14x32 avx512f"
#elif TT_AVX2
#include "csrc/ukernel_avx2.h"
#define TT_UKERNEL ukernel_avx2_6x16
#define TT_UKERNEL_NAME "6x16 avx2+fma asm"
#elif TT_NEON
#include "csrc/ukernel_neon.h"
#define TT_UKERNEL ukernel_neon_6x16
#define TT_UKERNEL_NAME "6x16 neon"
#else
#include "csrc/ukernel_scalar.h"
#define TT_UKERNEL ukernel_scalar
#define TT_UKERNEL_NAME "6x16 scalar"
#endif

#include "csrc/gemm.h"

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
