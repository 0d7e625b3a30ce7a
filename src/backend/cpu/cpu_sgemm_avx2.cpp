// The fp32 GEMM at the AVX2 level (compiled with -mavx2 -mfma; chosen at run time when the CPU
// has avx2 and fma but not avx512f; with the fused correction for cpu_float_avx2.cpp): 6 rows x 16
// outputs of ymm accumulators per micro-tile, the blocked driver of cpu_sgemm_blocked.hpp. Same
// bits as the scalar level.
#include "backend/cpu/cpu_sgemm.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backend/cpu/avx2_columns.hpp"
#include "backend/cpu/cpu_sgemm_blocked.hpp"

namespace eggroll::cpu_sgemm::detail {
namespace {

// 8-lane ymm traits for Blocked (cpu_sgemm_blocked.hpp). 6 x 2 accumulators + 2 panel vectors
// + 1 broadcast = 15 of the 16 ymm registers.
struct Ymm {
  using Reg = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kNv = 2;
  static constexpr int kMr = 6;

  static __m256i first_lanes(int count) { return avx2::first_lanes(count); }
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static Reg broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg relu(Reg v) { return _mm256_max_ps(v, zero()); }  // 0 for NaN (the second operand)
  static Reg load_first(const float* p, int count) { return _mm256_maskload_ps(p, first_lanes(count)); }
  static Reg rank_fma(const float* p, std::int64_t rank, int count, const float* s, Reg acc) {
    if (avx2::with_power_of_two_rank(rank, [&](auto r) {
          constexpr int R = decltype(r)::value;
          Reg column[R];
          avx2::columns<R>(p, count, column);
          for (int c = 0; c < R; ++c) acc = fma(broadcast(s + c), column[c], acc);
        }))
      return acc;
    const __m256i index = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(static_cast<int>(rank)));
    for (std::int64_t c = 0; c < rank; ++c)
      acc = fma(broadcast(s + c), _mm256_mask_i32gather_ps(zero(), p + c, index, _mm256_castsi256_ps(first_lanes(count)), 4), acc);
    return acc;
  }
  static void store_first(float* p, Reg v, int count) { _mm256_maskstore_ps(p, first_lanes(count), v); }
  static void transpose(Reg r[8]) { avx2::transpose8(r); }
  template <int R>
    requires(R <= 8)
  static void columns(const float* p, Reg (&out)[R]) { avx2::columns<R>(p, kLanes, out); }
};

}  // namespace

void gemm_nt_avx2(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y,
                  const RowFinish* finish, const PackedWeights* packed) {
  Blocked<Ymm>::run(rows, m, n, x, w, y, nullptr, finish, packed);
}

void gemm_nt_lowrank_avx2(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w,
                          const LowRankEpilogue& e, float* y, const RowFinish* finish, const PackedWeights* packed) {
  Blocked<Ymm>::run(rows, m, n, x, w, y, &e, finish, packed);
}

std::shared_ptr<const PackedWeights> pack_avx2(std::int64_t m, std::int64_t n) {
  return Blocked<Ymm>::pack_with(m, n);
}

}  // namespace eggroll::cpu_sgemm::detail
#endif
