// AVX2 float kernels of the cpu backend (compiled with -mavx2 -mfma): the low-rank correction of
// the forward, separate and fused into the AVX2 GEMM's stores, and the update (semantics and
// determinism: cpu_float.hpp; the level-generic parts: cpu_float_lowrank.hpp and
// cpu_float_update.hpp). The products x . B are 8-lane fused chains added in a fixed order, so
// their bits differ from the AVX-512 level's by rounding only, and depend on (n, r) alone at this
// level; the update gives the AVX-512 level's bits.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cpu/avx2_columns.hpp"
#include "backend/cpu/cpu_float.hpp"
#include "backend/cpu/cpu_float_lowrank.hpp"
#include "backend/cpu/cpu_float_update.hpp"
#include "backend/cpu/cpu_sgemm.hpp"

namespace eggroll::cpu_float_avx2 {
namespace {

using avx2::load_first;

// The sum of v's 8 lanes: lane i with lane i + 4, then + 2, then + 1 (the higher lane second).
inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// out[t] = sum_k x_t[k] b[k], k < n, for T rows x_t = x + t ldx: per row two 8-lane fused chains
// (lane l of chain q takes k = 16 i + 8 q + l; a masked tail on chain 0), then chain 1 added to
// chain 0 and the lanes summed (sum8). The order depends on n alone, not on T; b is loaded once
// per step for all T rows.
template <int T>
inline void dot_rows(const float* x, std::int64_t ldx, const float* b, std::int64_t n, float* out) {
  __m256 s[T][2];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) s[t][0] = s[t][1] = _mm256_setzero_ps();
  std::int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    const __m256 b0 = _mm256_loadu_ps(b + k), b1 = _mm256_loadu_ps(b + k + 8);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      s[t][0] = _mm256_fmadd_ps(_mm256_loadu_ps(x + t * ldx + k), b0, s[t][0]);
      s[t][1] = _mm256_fmadd_ps(_mm256_loadu_ps(x + t * ldx + k + 8), b1, s[t][1]);
    }
  }
  for (; k < n; k += 8) {
    const __m256 bv = load_first(b + k, n - k);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t][0] = _mm256_fmadd_ps(load_first(x + t * ldx + k, n - k), bv, s[t][0]);
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) out[t] = sum8(_mm256_add_ps(s[t][0], s[t][1]));
}

// out[t R + c] = x_t . bt_c for T rows x_t = x + t n and c < R (bt = B^T, (R, n)): one 8-lane fused
// chain per (t, c) over blocks of 8 k (a masked tail), then its lanes summed (sum8). Each row's
// sums take the same steps whatever T is; T R chains advance together (T R <= 8, so that they,
// B^T's R values and x stay in the 16 registers).
template <int R, int T>
inline void dots_rows(const float* x, const float* bt, std::int64_t n, float* out) {
  static_assert(T * R <= 8);
  __m256 acc[T * R];
#pragma GCC unroll 8
  for (int e = 0; e < T * R; ++e) acc[e] = _mm256_setzero_ps();
  for (std::int64_t k = 0; k < n; k += 8) {
    __m256 bv[R];
#pragma GCC unroll 8
    for (int c = 0; c < R; ++c) bv[c] = load_first(bt + c * n + k, n - k);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 xv = load_first(x + t * n + k, n - k);
#pragma GCC unroll 8
      for (int c = 0; c < R; ++c) acc[t * R + c] = _mm256_fmadd_ps(xv, bv[c], acc[t * R + c]);
    }
  }
#pragma GCC unroll 8
  for (int e = 0; e < T * R; ++e) out[e] = sum8(acc[e]);
}

// out[t r + c] = x_t . B[:, c] for c < r and T rows x_t = x + t ldx that share B (n, r) row-major:
// dot_rows for rank 1; for ranks 2, 4, 8 one 8-lane chain per (t, c) over blocks of 8 k, each
// block's columns taken by avx2::columns once for the T rows (a row at a time where T r > 8);
// otherwise a scalar fused chain per (t, c). Each row's order depends on (n, r) alone, not on T.
template <int T>
inline void xb_rows_shared(const float* x, std::int64_t ldx, const float* b, std::int64_t n, std::int64_t r,
                           float* out) {
  if (r == 1) {
    dot_rows<T>(x, ldx, b, n, out);
  } else if (avx2::with_power_of_two_rank(r, [&](auto rank) {
               constexpr int R = decltype(rank)::value;
               if constexpr (T * R > 8) {
                 for (int t = 0; t < T; ++t) xb_rows_shared<1>(x + t * ldx, ldx, b, n, r, out + t * r);
               } else {
                 __m256 acc[T][R], column[R];
#pragma GCC unroll 8
                 for (int e = 0; e < T * R; ++e) acc[e / R][e % R] = _mm256_setzero_ps();
                 for (std::int64_t k = 0; k < n; k += 8) {
                   const std::int64_t count = std::min<std::int64_t>(8, n - k);
                   avx2::columns<R>(b + k * R, count, column);
#pragma GCC unroll 4
                   for (int t = 0; t < T; ++t) {
                     const __m256 xv = load_first(x + t * ldx + k, count);
#pragma GCC unroll 8
                     for (int c = 0; c < R; ++c) acc[t][c] = _mm256_fmadd_ps(xv, column[c], acc[t][c]);
                   }
                 }
#pragma GCC unroll 8
                 for (int e = 0; e < T * R; ++e) out[e] = sum8(acc[e / R][e % R]);
               }
             })) {
  } else {
    for (int t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < r; ++c) {
        float acc = 0.0f;
        for (std::int64_t k = 0; k < n; ++k) acc = std::fma(x[t * ldx + k], b[k * r + c], acc);
        out[t * r + c] = acc;
      }
  }
}

// The AVX2 level of cpu_float_lowrank.hpp.
struct Avx2 {
  // The next block's rows of x queued at several rows per member (cpu_float_lowrank.hpp): measured
  // on a Zen 3.
  static constexpr bool kQueueNextRowsOfX = true;
  static void xb_row(const float* x, const float* b, std::int64_t n, std::int64_t r, float* out) {
    xb_rows_shared<1>(x, n, b, n, r, out);
  }
  template <int T>
  static void xb_rows_shared(const float* x, std::int64_t ldx, const float* b, std::int64_t n, std::int64_t r,
                             float* out) {
    cpu_float_avx2::xb_rows_shared<T>(x, ldx, b, n, r, out);
  }
  // out (r, rows) = in (rows, r)^T: 8 rows at a time by shuffles for ranks 2, 4, 8; otherwise in
  // blocks of 8 rows x 8 columns (masked past rows and r) transposed in registers. Copies.
  static void transpose_factor(const float* in, std::int64_t rows, std::int64_t r, float* out) {
    const bool done = avx2::with_power_of_two_rank(r, [&](auto rank) {
      constexpr int R = decltype(rank)::value;
      __m256 column[R];
      for (std::int64_t e = 0; e < rows; e += 8) {
        const std::int64_t count = std::min<std::int64_t>(8, rows - e);
        avx2::columns<R>(in + e * R, count, column);
        for (int c = 0; c < R; ++c) avx2::store_first(out + c * rows + e, column[c], count);
      }
    });
    if (done) return;
    for (std::int64_t e = 0; e < rows; e += 8) {
      const std::int64_t count = std::min<std::int64_t>(8, rows - e);
      for (std::int64_t c0 = 0; c0 < r; c0 += 8) {
        const std::int64_t width = std::min<std::int64_t>(8, r - c0);
        __m256 block[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) block[i] = i < count ? load_first(in + (e + i) * r + c0, width) : _mm256_setzero_ps();
        avx2::transpose8(block);
        for (std::int64_t c = 0; c < width; ++c) avx2::store_first(out + (c0 + c) * rows + e, block[c], count);
      }
    }
  }
  // dots_rows 8 / r rows at a time for ranks 1, 2, 4, 8; any other rank a row and a column at a
  // time (the same steps for every row too).
  static void xb_transposed(const float* x, std::int64_t rows, const float* bt, std::int64_t n, std::int64_t r,
                            float* out) {
    const auto by_rows = [&](auto rank) {
      constexpr int R = decltype(rank)::value, kTogether = 8 / R;
      std::int64_t t = 0;
      for (; t + kTogether <= rows; t += kTogether) dots_rows<R, kTogether>(x + t * n, bt, n, out + t * R);
      for (; t < rows; ++t) dots_rows<R, 1>(x + t * n, bt, n, out + t * R);
    };
    if (r == 1) return by_rows(std::integral_constant<int, 1>{});
    if (avx2::with_power_of_two_rank(r, by_rows)) return;
    for (std::int64_t t = 0; t < rows; ++t)
      for (std::int64_t c = 0; c < r; ++c) dots_rows<1, 1>(x + t * n, bt + c * n, n, out + t * r + c);
  }
  static bool serves_rank(std::int64_t r) { return r == 2 || r == 4 || r == 8; }
  // 3 -> 4, 5 .. 7 -> 8 (avx2::columns serves 2, 4, 8); above 8 as is
  static std::int64_t padded_rank(std::int64_t r) { return r == 3 ? 4 : r > 4 && r < 8 ? 8 : r; }
  // out (rows, rp) = in (rows, r) with zero columns up to rp (4 or 8): a masked load a row.
  static void pad_columns(const float* in, std::int64_t rows, std::int64_t r, std::int64_t rp, float* out) {
    const __m256i mask = avx2::first_lanes(r);
    if (rp == 8) {
      for (std::int64_t e = 0; e < rows; ++e) _mm256_storeu_ps(out + e * 8, _mm256_maskload_ps(in + e * r, mask));
    } else {
      const __m128i half = _mm256_castsi256_si128(mask);
      for (std::int64_t e = 0; e < rows; ++e) _mm_storeu_ps(out + e * 4, _mm_maskload_ps(in + e * r, half));
    }
  }
  static void add_rank(const float* from, const float* at, const float* s, std::int64_t m, std::int64_t r, float* y) {
    for (std::int64_t a = 0; a < m; a += 8) {
      __m256 acc = load_first(from + a, m - a);
      for (std::int64_t c = 0; c < r; ++c)
        acc = _mm256_fmadd_ps(_mm256_broadcast_ss(s + c), load_first(at + c * m + a, m - a), acc);
      avx2::store_first(y + a, acc, m - a);
    }
  }
  static void gemm_lowrank(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w,
                           const cpu_sgemm::LowRankEpilogue& e, float* y, const cpu_sgemm::RowFinish* finish,
                           const PackedWeights* packed) {
    cpu_sgemm::detail::gemm_nt_lowrank_avx2(rows, m, n, x, w, e, y, finish, packed);
  }
};

// 8-lane traits for cpu_float_update.hpp: 6 rows x 2 ymm of outputs per micro-tile (12
// accumulators, 2 panel vectors and a broadcast in the 16 registers).
struct UpdateYmm {
  using Reg = __m256;
  using Mask = __m256i;
  static constexpr int kLanes = 8;
  static constexpr std::int64_t kTileRows = 6;
  static constexpr int kVecs = 2;
  static Mask mask(std::int64_t count) { return avx2::first_lanes(count); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  // Whole vectors by plain loads and stores (as avx2::load_first and store_first).
  static bool whole(Mask m) { return _mm256_movemask_ps(_mm256_castsi256_ps(m)) == 0xFF; }
  static Reg load_masked(Mask m, const float* p) { return whole(m) ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m); }
  static void store_masked(float* p, Mask m, Reg v) {
    if (whole(m))
      _mm256_storeu_ps(p, v);
    else
      _mm256_maskstore_ps(p, m, v);
  }
  static Reg set1(float f) { return _mm256_set1_ps(f); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  // a b + c into c's own register. With the intrinsic, GCC 12 also wrote results into the
  // broadcast's or a panel vector's register (the 132 and 213 forms) and at rank 4 kept two of
  // the 6 x 2 tile's accumulators on the stack, where each step's chain waited on a store and a
  // load; tied to c, the loop holds all twelve in registers. The same instruction: the same bits.
  static Reg fma(Reg a, Reg b, Reg c) {
    asm("vfmadd231ps %[b], %[a], %[c]" : [c] "+x"(c) : [a] "x"(a), [b] "x"(b));
    return c;
  }
  static void transpose(Reg block[8]) { avx2::transpose8(block); }
  template <class Fn>
  static bool with_columns_rank(std::int64_t r, Fn&& fn) { return avx2::with_power_of_two_rank(r, fn); }
  template <int R>
  static void columns(const float* p, std::int64_t count, Reg (&out)[R]) { avx2::columns<R>(p, count, out); }
};

}  // namespace

void lowrank_update(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_terms,
                    const float* const* blocks, const double* weight, float* out) {
  cpu_float_update::Update<UpdateYmm>::run(m, n, r, n_terms, blocks, weight, out);
}

void lowrank_correction(const MemberRows& batch, const LowRankFactors& f, const float* x, float* y,
                        std::int64_t member_first, std::int64_t count, const float* base) {
  cpu_float_lowrank::lowrank_correction<Avx2>(batch, f, x, y, member_first, count, base);
}

void perturbed_matmul(const MemberRows& batch, const LowRankFactors& f, const float* x, const float* w, float* y,
                      const cpu_sgemm::RowFinish* finish, const PackedWeights* packed) {
  cpu_float_lowrank::perturbed_matmul<Avx2>(batch, f, x, w, y, finish, packed);
}

}  // namespace eggroll::cpu_float_avx2
