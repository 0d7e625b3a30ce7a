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

// ---- internals shared with the level files (cpu_sgemm_avx512.cpp, cpu_sgemm_avx2.cpp) ----
namespace detail {

// Scratch for the packed W: at least n_floats floats, 64-byte aligned, owned by the calling
// thread and reused across its calls (grow-only), so concurrent callers never share one.
float* thread_buffer(std::int64_t n_floats);

// Below this many multiply-adds (about 10 us on one core) a call runs on the calling thread:
// waking a team costs more than it saves.
inline constexpr std::int64_t kParallelMinWork = std::int64_t{1} << 19;

void gemm_nt_avx512(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y);
void gemm_nt_avx2(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y);

}  // namespace detail
}  // namespace eggroll::cpu_sgemm
