// BLIS's blocking parameters: the register tile MR x NR and the cache blocks KC, MC, NC.
// Part of kernels.cpp's one translation unit (see its file map); not compiled on its own.

#pragma once

#include "isa.h"

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

}  // namespace
