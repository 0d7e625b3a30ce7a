// The fp32 GEMM at the AVX2 level (compiled with -mavx2 -mfma; chosen at run time when the CPU
// has avx2 and fma but not avx512f; with the fused correction for cpu_float_avx2.cpp): ymm
// accumulators in micro-tiles of a shape chosen by the outputs (Ymm), the blocked driver of
// cpu_sgemm_blocked.hpp. Same bits as the scalar level, whatever the shape.
#include "backend/cpu/cpu_sgemm.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backend/cpu/avx2_columns.hpp"
#include "backend/cpu/cpu_sgemm_blocked.hpp"

namespace eggroll::cpu_sgemm::detail {
namespace {

// 8-lane ymm traits for Blocked (cpu_sgemm_blocked.hpp): MR rows x NV vectors of accumulators
// per micro-tile, in blocks of 48 rows. Three shapes, by the outputs m (with_shape):
//   4 x 3 (24 outputs; 12 accumulators + 3 panel vectors + 1 broadcast = the 16 registers) for
//     m >= 96: per k 3 loads and 4 broadcasts feed 12 FMAs. On a Zen 3 it ran the wide layers
//     (2048x256, 1024x256, 512x64) 1.14-1.43 times as fast as 6 x 2, whose 6 broadcasts a step
//     from 6 rows of x held it to about 60% of the FMA peak there;
//   3 x 4 (32 outputs) for 32 <= m < 96 (the medium model's 64 outputs: two full panels, where
//     24-wide panels leave a third of 16), 1.08-1.11 times 6 x 2 there;
//   6 x 2 (16 outputs) below 32.
// (docs/results.md, "The AVX2 GEMM's tile on a Zen 3".)
template <int MR, int NV>
struct Ymm {
  using Reg = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kNv = NV;
  static constexpr int kMr = MR;
  static constexpr std::int64_t kMc = 48 / MR * MR;

  static __m256i first_lanes(int count) { return avx2::first_lanes(count); }
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static Reg broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg relu(Reg v) { return _mm256_max_ps(v, zero()); }  // 0 for NaN (the second operand)
  static Reg load_first(const float* p, int count) { return avx2::load_first(p, count); }
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
  static void store_first(float* p, Reg v, int count) { avx2::store_first(p, v, count); }
  static void transpose(Reg r[8]) { avx2::transpose8(r); }
  template <int R>
    requires(R <= 8)
  static void columns(const float* p, Reg (&out)[R]) { avx2::columns<R>(p, kLanes, out); }
};

using Wide = Ymm<4, 3>;
using Mid = Ymm<3, 4>;
using Narrow = Ymm<6, 2>;

// fn(Blocked<traits>{}) with the tile shape for m outputs (the traits' comment).
template <class Fn>
decltype(auto) with_shape(std::int64_t m, Fn&& fn) {
  if (m >= 96) return fn(Blocked<Wide>{});
  if (m >= 32) return fn(Blocked<Mid>{});
  return fn(Blocked<Narrow>{});
}

}  // namespace

void gemm_nt_avx2(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y,
                  const RowFinish* finish, const PackedWeights* packed) {
  with_shape(m, [&](auto b) { decltype(b)::run(rows, m, n, x, w, y, nullptr, finish, packed); });
}

void gemm_nt_lowrank_avx2(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w,
                          const LowRankEpilogue& e, float* y, const RowFinish* finish, const PackedWeights* packed) {
  with_shape(m, [&](auto b) { decltype(b)::run(rows, m, n, x, w, y, &e, finish, packed); });
}

std::shared_ptr<const PackedWeights> pack_avx2(std::int64_t m, std::int64_t n) {
  return with_shape(m, [&](auto b) { return decltype(b)::pack_with(m, n); });
}

}  // namespace eggroll::cpu_sgemm::detail
#endif
