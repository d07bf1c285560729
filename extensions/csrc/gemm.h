// The blocked, threaded GEMM: the write-back with its fused bias+GELU epilogue, the per-tile
// micro_kernel around TT_UKERNEL (the micro-kernel kernels.cpp picked), scratch, and the driver.
// Part of kernels.cpp's one translation unit (see its file map); not compiled on its own.

#pragma once

#include "blocking.h"
#include "gelu.h"
#include "pack.h"

namespace {

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
