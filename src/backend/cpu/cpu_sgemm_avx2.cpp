// The fp32 GEMM at the AVX2 level (compiled with -mavx2 -mfma; chosen at run time when the CPU
// has avx2 and fma but not avx512f): 6 rows x 16 outputs of ymm accumulators per micro-tile, the
// blocked driver of cpu_sgemm_blocked.hpp. Same bits as the scalar level.
#include "backend/cpu/cpu_sgemm.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

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

  // All-ones in lanes < count: the mask operand of vmaskmovps.
  static __m256i first_lanes(int count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static Reg broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg load_first(const float* p, int count) { return _mm256_maskload_ps(p, first_lanes(count)); }
  static Reg rank_fma(const float* p, std::int64_t rank, int count, const float* s, Reg acc) {
    const __m256i index = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(static_cast<int>(rank)));
    for (std::int64_t c = 0; c < rank; ++c)
      acc = fma(broadcast(s + c), _mm256_mask_i32gather_ps(zero(), p + c, index, _mm256_castsi256_ps(first_lanes(count)), 4), acc);
    return acc;
  }
  static void store_first(float* p, Reg v, int count) { _mm256_maskstore_ps(p, first_lanes(count), v); }
  // 8 x 8 transpose in three rounds of two-source shuffles (24 in all).
  static void transpose(Reg r[8]) {
    Reg t[8], u[8];
    for (int i = 0; i < 4; ++i) {  // t[2i], t[2i+1]: rows 2i, 2i+1 interleaved within each 128-bit lane
      t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; ++i) {  // u[4i+q], 128-bit lane L: rows 4i .. 4i+3 of column 4L+q
      u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
      u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
      u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
      u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int q = 0; q < 4; ++q) {  // column 4L+q = lane L of u[q], u[4+q]
      r[q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x20);
      r[4 + q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x31);
    }
  }
};

}  // namespace

void gemm_nt_avx2(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y) {
  Blocked<Ymm>::run(rows, m, n, x, w, y);
}

}  // namespace eggroll::cpu_sgemm::detail
#endif
