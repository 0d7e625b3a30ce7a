// The cpu backend's fp32 GEMM y = x W^T (the base matmul of every float layer), with a SIMD
// level chosen once at run time (AVX-512F, AVX2+FMA, or scalar).
//
// Determinism (DESIGN.md contract 2): every output element is one fused multiply-add chain
//   y[i][a] = fma(x[i][n-1], W[a][n-1], ... fma(x[i][1], W[a][1], fma(x[i][0], W[a][0], 0.0f)))
// in k = 0 .. n-1 order, whatever the level, the rows of the call, the row or column blocking
// or the thread count. So a row's bits depend only on that row of x and on W, and all levels
// give the same bits (the scalar level uses std::fma in the same order).
#pragma once
#include <cstdint>

namespace eggroll::cpu_sgemm {

// y (rows, m) = x (rows, n) W^T, W (m, n); all row-major and dense. OpenMP over row and column
// blocks when called outside a parallel region (inside one with nesting off it runs on the
// calling thread). n == 0 writes zeros. x and y must not overlap.
void gemm_nt(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y);

// The SIMD level gemm_nt uses: "avx512", "avx2" or "scalar".
const char* level();
// Forces a level up to the detected one ("auto" = the detected one); throws eggroll::Error for
// an unknown or unavailable level. For tests and benchmarks: every level gives the same bits.
void set_level(const char* level);

// The low-rank correction of ALGORITHM.md 1.1 fused into the GEMM's store: when an element's chain
// is complete, with j the member of row i and A_j (m, rank) the second part of member j's factor
// block (B (n, rank) first):
//   rank 1:  y[i][a] = fma(s_i, A_j[a][0], chain), s_i = coef_j xb[i][0] (row_scale);
//   rank r:  y[i][a] = fma(coef_j, corr, chain), corr = xb[i][0] A_j[a][0], then
//            corr = fma(xb[i][c], A_j[a][c], corr) for c = 1 .. r-1.
// These are the operations, in order, of the separate correction kernel (cpu_float.hpp), so both
// give the same bits; fused, y is written once instead of being read back and rewritten.
struct LowRankEpilogue {
  std::int64_t rank = 1, n = 0;
  const float* xb = nullptr;             // (rows, rank): x[i] B_j, computed by the caller
  const float* const* blocks = nullptr;  // (members) factor blocks; null or coef 0 = unperturbed
  const float* coef = nullptr;           // (members)
  const std::int32_t* member_of_row = nullptr;  // (rows): i / rows_per_member, precomputed
  // Rank 1 (then blocks, coef and member_of_row are unused): per row, A_j (null = unperturbed)
  // and s_i = coef_j xb[i][0], so the store does one load and one FMA per vector.
  const float* const* row_a = nullptr;
  const float* row_scale = nullptr;
  // Optional, for rank > 1: A_j^T (rank, m) per member, the same values laid out so that the
  // store reads them contiguously (worth building when a member has several rows).
  const float* const* a_transposed = nullptr;
  std::int64_t m = 0;                    // the output count (the row stride of A_j^T)
};

// ---- internals shared with the level files (cpu_sgemm_avx512.cpp, cpu_sgemm_avx2.cpp) ----
namespace detail {

// Scratch for the packed W: at least n_floats floats, 64-byte aligned, owned by the calling
// thread and reused across its calls (grow-only), so concurrent callers never share one.
float* thread_buffer(std::int64_t n_floats);

// Below this many multiply-adds (about 10 us on one core) a call runs on the calling thread:
// waking a team costs more than it saves.
inline constexpr std::int64_t kParallelMinWork = std::int64_t{1} << 19;

void gemm_nt_avx512(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y);
// gemm_nt with the fused correction, AVX-512F level only (the caller checks the level).
void gemm_nt_lowrank_avx512(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w,
                            const LowRankEpilogue& e, float* y);
void gemm_nt_avx2(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y);

}  // namespace detail
}  // namespace eggroll::cpu_sgemm
