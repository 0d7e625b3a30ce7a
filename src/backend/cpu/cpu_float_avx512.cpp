// AVX-512 float kernels of the cpu backend: the fused low-rank correction of the forward and the
// update as a packed GEMM over members (semantics and determinism: cpu_float.hpp).
// GCC 12's _mm512_reduce_add_ps starts from an undefined register that -Wmaybe-uninitialized
// reports (a false positive inside the intrinsic header), as -Wuninitialized where it is inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "backend/cpu/avx512_columns.hpp"
#include "backend/cpu/cpu_float.hpp"
#include "backend/cpu/cpu_float_lowrank.hpp"
#include "backend/cpu/cpu_float_update.hpp"
#include "backend/cpu/cpu_sgemm.hpp"
#include "backend/cpu/line_queue.hpp"

namespace eggroll::cpu_float_avx512 {
namespace {

// Mask of the first `count` lanes (0 <= count <= 16).
inline __mmask16 lanes(std::int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
}

// out[t] = sum_k x_t[k] b[k], k < n, for T rows x_t = x + t ldx: per row four 16-lane fused chains
// (lane l of chain q takes k = 64 i + 16 q + l), a masked tail, then the chains and lanes added in
// a fixed order. The order depends on n alone, not on T; b is loaded once for all T rows.
template <int T>
inline void dot_rows(const float* x, std::int64_t ldx, const float* b, std::int64_t n, float* out) {
  __m512 s[T][4];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) s[t][0] = s[t][1] = s[t][2] = s[t][3] = _mm512_setzero_ps();
  std::int64_t k = 0;
  for (; k + 64 <= n; k += 64) {
    __m512 bv[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) bv[q] = _mm512_loadu_ps(b + k + 16 * q);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) s[t][q] = _mm512_fmadd_ps(_mm512_loadu_ps(x + t * ldx + k + 16 * q), bv[q], s[t][q]);
  }
  for (; k < n; k += 16) {
    const __mmask16 mk = lanes(n - k);
    const __m512 bv = _mm512_maskz_loadu_ps(mk, b + k);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t][0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, x + t * ldx + k), bv, s[t][0]);
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
    out[t] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s[t][0], s[t][1]), _mm512_add_ps(s[t][2], s[t][3])));
}

inline float dot(const float* a, const float* b, std::int64_t n) {
  float out;
  dot_rows<1>(a, n, b, n, &out);
  return out;
}

// Lane e = the sum of v[e]'s 16 lanes, added as _mm512_reduce_add_ps adds them (lane i to lane
// i + 8, then i + 4, i + 2, i + 1, the higher lane first): the same bits as 16 such reductions,
// with four rounds of two-source shuffles and adds shared by all of them.
inline __m512 reduce_add16(const __m512 (&v)[16]) {
  __m512 h[8], g[4], f[2];
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j)  // 128-bit lanes: v[2j] i + (i + 8), i < 4; i = 4 .. 7; then v[2j + 1]'s
    h[j] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], 0xEE),
                         _mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], 0x44));
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k)  // 128-bit lane L: v[4k + L]'s four sums of i with i + 4
    g[k] = _mm512_add_ps(_mm512_shuffle_f32x4(h[2 * k], h[2 * k + 1], 0xDD),
                         _mm512_shuffle_f32x4(h[2 * k], h[2 * k + 1], 0x88));
#pragma GCC unroll 2
  for (int p = 0; p < 2; ++p)  // 128-bit lane L: v[8p + L]'s two sums of i with i + 2, then v[8p + 4 + L]'s
    f[p] = _mm512_add_ps(_mm512_shuffle_ps(g[2 * p], g[2 * p + 1], 0x44),
                         _mm512_shuffle_ps(g[2 * p], g[2 * p + 1], 0xEE));
  // 128-bit lane L: the sums of v[L], v[4 + L], v[8 + L], v[12 + L]; then in order of e
  const __m512 s = _mm512_add_ps(_mm512_shuffle_ps(f[0], f[1], 0x88), _mm512_shuffle_ps(f[0], f[1], 0xDD));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), s);
}

// out[t r + c] = x_t . bt_c for T rows x_t = x + t n and c < R (bt = B^T, (R, n)): one 16-lane
// fused chain per (t, c) over blocks of 16 k (lane l takes k = 16 i + l, a masked tail), then its
// lanes added as _mm512_reduce_add_ps does. Each row's sums take the same steps whatever T is, so
// the order depends on n alone; T R chains advance together, so B^T and x are each loaded once
// per block for all of them and the FMAs do not wait on each other.
template <int R, int T>
inline void dots_rows(const float* x, const float* bt, std::int64_t n, float* out) {
  __m512 acc[T * R];
#pragma GCC unroll 32
  for (int e = 0; e < T * R; ++e) acc[e] = _mm512_setzero_ps();
  for (std::int64_t k = 0; k < n; k += 16) {
    const __mmask16 mk = lanes(n - k);
    __m512 bv[R];
#pragma GCC unroll 16
    for (int c = 0; c < R; ++c) bv[c] = _mm512_maskz_loadu_ps(mk, bt + c * n + k);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      // the next T rows' values, which the caller's next call reads (x comes from memory: the
      // previous layer's activations of a whole block of rows)
      _mm_prefetch(reinterpret_cast<const char*>(x + (T + t) * n + k), _MM_HINT_T0);
      const __m512 xv = _mm512_maskz_loadu_ps(mk, x + t * n + k);
#pragma GCC unroll 16
      for (int c = 0; c < R; ++c) acc[t * R + c] = _mm512_fmadd_ps(xv, bv[c], acc[t * R + c]);
    }
  }
  __m512 chains[16];
#pragma GCC unroll 16
  for (int e = 0; e < 16; ++e) chains[e] = e < T * R ? acc[e] : _mm512_setzero_ps();
  _mm512_mask_storeu_ps(out, lanes(T * R), reduce_add16(chains));
}

// out[t r + c] = x_t . B[:, c] for c < r and T rows x_t = x + t ldx that share B (n, r) row-major:
// dot_rows for rank 1; for ranks the shuffles serve (powers of two), one 16-lane chain per (t, c)
// over blocks of 16 k, each block's columns taken by avx512::columns once for the T rows;
// otherwise a scalar fused chain per (t, c). Each row's order depends on (n, r) alone, not on T.
template <int T>
inline void xb_rows_shared(const float* x, std::int64_t ldx, const float* b, std::int64_t n, std::int64_t r,
                           float* out) {
  if (r == 1) {
    dot_rows<T>(x, ldx, b, n, out);
  } else if (avx512::with_power_of_two_rank(r, [&](auto rank) {
               constexpr int R = decltype(rank)::value;
               if constexpr (T * R > 16) {  // too many chains for the registers: a row at a time
                 for (int t = 0; t < T; ++t) xb_rows_shared<1>(x + t * ldx, ldx, b, n, r, out + t * r);
               } else {
                 const float* const xs = x;  // locals, not captures: the sums stay in registers
                 const float* const bs = b;
                 const std::int64_t len = n, stride = ldx;
                 __m512 acc[T][R], column[R];
#pragma GCC unroll 16
                 for (int e = 0; e < T * R; ++e) acc[e / R][e % R] = _mm512_setzero_ps();
                 for (std::int64_t k = 0; k < len; k += 16) {
                   const std::int64_t count = std::min<std::int64_t>(16, len - k);
                   avx512::columns<R>(bs + k * R, count, column);
#pragma GCC unroll 4
                   for (int t = 0; t < T; ++t) {
                     // the next T rows' values, which the caller's next call reads (from memory: the
                     // previous layer's activations)
                     _mm_prefetch(reinterpret_cast<const char*>(xs + (T + t) * stride + k), _MM_HINT_T0);
                     const __m512 xv = _mm512_maskz_loadu_ps(lanes(count), xs + t * stride + k);
#pragma GCC unroll 16
                     for (int c = 0; c < R; ++c) acc[t][c] = _mm512_fmadd_ps(xv, column[c], acc[t][c]);
                   }
                 }
#pragma GCC unroll 16
                 for (int e = 0; e < T * R; ++e) out[e] = _mm512_reduce_add_ps(acc[e / R][e % R]);
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

inline void xb_row(const float* x, const float* b, std::int64_t n, std::int64_t r, float* out) {
  xb_rows_shared<1>(x, n, b, n, r, out);
}

// out (r, rows) = in (rows, r)^T: the columns of a rank-r factor as contiguous rows, 16 at a time
// by shuffles for the power-of-two ranks; otherwise in blocks of 16 rows x 16 columns, each loaded
// as rows (masked past rows and r), transposed in registers and stored as columns (masked past
// rows). Copies either way, so the same values whichever way.
inline void transpose_factor(const float* in, std::int64_t rows, std::int64_t r, float* out) {
  const bool done = avx512::with_power_of_two_rank(r, [&](auto rank) {
    constexpr int R = decltype(rank)::value;
    __m512 column[R];
    for (std::int64_t e = 0; e < rows; e += 16) {
      const std::int64_t count = std::min<std::int64_t>(16, rows - e);
      avx512::columns<R>(in + e * R, count, column);
      for (int c = 0; c < R; ++c) _mm512_mask_storeu_ps(out + c * rows + e, lanes(count), column[c]);
    }
  });
  if (done) return;
  for (std::int64_t e = 0; e < rows; e += 16) {
    const std::int64_t count = std::min<std::int64_t>(16, rows - e);
    for (std::int64_t c0 = 0; c0 < r; c0 += 16) {
      const std::int64_t width = std::min<std::int64_t>(16, r - c0);
      __m512 block[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        block[i] = i < count ? _mm512_maskz_loadu_ps(lanes(width), in + (e + i) * r + c0) : _mm512_setzero_ps();
      avx512::transpose16(block);
      for (std::int64_t c = 0; c < width; ++c) _mm512_mask_storeu_ps(out + (c0 + c) * rows + e, lanes(count), block[c]);
    }
  }
}

// out[t r + c] = x_t . B[:, c] for `rows` rows x_t = x + t n and c < r, bt = B^T (r, n): the
// products from a transposed B, several rows at a time (dots_rows; any other rank: dot per value,
// the same for every row too).
inline void xb_transposed(const float* x, std::int64_t rows, const float* bt, std::int64_t n, std::int64_t r,
                          float* out) {
  const auto by_rows = [&](auto rank) {
    constexpr int R = decltype(rank)::value, kTogether = 16 / R;
    std::int64_t t = 0;
    for (; t + kTogether <= rows; t += kTogether) dots_rows<R, kTogether>(x + t * n, bt, n, out + t * R);
    for (; t < rows; ++t) dots_rows<R, 1>(x + t * n, bt, n, out + t * R);
  };
  switch (r) {
    case 2: return by_rows(std::integral_constant<int, 2>{});
    case 4: return by_rows(std::integral_constant<int, 4>{});
    case 8: return by_rows(std::integral_constant<int, 8>{});
    default:
      for (std::int64_t t = 0; t < rows; ++t)
        for (std::int64_t c = 0; c < r; ++c) out[t * r + c] = dot(x + t * n, bt + c * n, n);
  }
}

// out (rows, rp) = in (rows, r) with columns r .. rp - 1 zero, rp a power of two up to 16 above r:
// 16 / rp rows a vector, each vector one expanding load of their r (16 / rp) values.
inline void pad_columns(const float* in, std::int64_t rows, std::int64_t r, std::int64_t rp, float* out) {
  const std::int64_t per = 16 / rp;
  std::uint32_t mask = 0;
  for (std::int64_t g = 0; g < per; ++g) mask |= ((1u << r) - 1u) << (g * rp);
  std::int64_t e = 0;
  for (; e + per <= rows; e += per)
    _mm512_storeu_ps(out + e * rp, _mm512_maskz_expandloadu_ps(static_cast<__mmask16>(mask), in + e * r));
  if (e < rows) {
    const std::int64_t lanes_left = (rows - e) * rp;  // < 16
    const auto part = static_cast<__mmask16>(mask & ((1u << lanes_left) - 1u));
    _mm512_mask_storeu_ps(out + e * rp, lanes(lanes_left), _mm512_maskz_expandloadu_ps(part, in + e * r));
  }
}

// The AVX-512 level of cpu_float_lowrank.hpp.
struct Avx512 {
  // No queue of the next block's rows of x (cpu_float_lowrank.hpp): on a Zen 5 its prefetches held
  // the core on its outstanding misses, a tenth of the medium model's rank-4 forward at 16 rows per
  // member, which ran 1.03-1.06 times as fast without them (docs/results.md, fiftieth pass).
  static constexpr bool kQueueNextRowsOfX = false;
  static void xb_row(const float* x, const float* b, std::int64_t n, std::int64_t r, float* out) {
    cpu_float_avx512::xb_row(x, b, n, r, out);
  }
  template <int T>
  static void xb_rows_shared(const float* x, std::int64_t ldx, const float* b, std::int64_t n, std::int64_t r,
                             float* out) {
    cpu_float_avx512::xb_rows_shared<T>(x, ldx, b, n, r, out);
  }
  static void transpose_factor(const float* in, std::int64_t rows, std::int64_t r, float* out) {
    cpu_float_avx512::transpose_factor(in, rows, r, out);
  }
  static void xb_transposed(const float* x, std::int64_t rows, const float* bt, std::int64_t n, std::int64_t r,
                            float* out) {
    cpu_float_avx512::xb_transposed(x, rows, bt, n, r, out);
  }
  static bool serves_rank(std::int64_t r) { return avx512::columns_serve(r); }
  // 3 -> 4, 5 .. 7 -> 8, 9 .. 15 -> 16 (avx512::columns serves 2, 4, 8, 16)
  static std::int64_t padded_rank(std::int64_t r) {
    if (r <= 2 || r >= 16 || avx512::columns_serve(r)) return r;
    return r < 4 ? 4 : r < 8 ? 8 : 16;
  }
  static void pad_columns(const float* in, std::int64_t rows, std::int64_t r, std::int64_t rp, float* out) {
    cpu_float_avx512::pad_columns(in, rows, r, rp, out);
  }
  static void add_rank(const float* from, const float* at, const float* s, std::int64_t m, std::int64_t r, float* y) {
    for (std::int64_t a = 0; a < m; a += 16) {
      const __mmask16 ma = lanes(m - a);
      __m512 acc = _mm512_maskz_loadu_ps(ma, from + a);
      for (std::int64_t c = 0; c < r; ++c)
        acc = _mm512_fmadd_ps(_mm512_set1_ps(s[c]), _mm512_maskz_loadu_ps(ma, at + c * m + a), acc);
      _mm512_mask_storeu_ps(y + a, ma, acc);
    }
  }
  static void gemm_lowrank(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w,
                           const cpu_sgemm::LowRankEpilogue& e, float* y, const cpu_sgemm::RowFinish* finish,
                           const PackedWeights* packed) {
    cpu_sgemm::detail::gemm_nt_lowrank_avx512(rows, m, n, x, w, e, y, finish, packed);
  }
};

}  // namespace

void lowrank_correction(const MemberRows& batch, const LowRankFactors& f, const float* x, float* y,
                        std::int64_t member_first, std::int64_t count, const float* base) {
  cpu_float_lowrank::lowrank_correction<Avx512>(batch, f, x, y, member_first, count, base);
}

void perturbed_matmul(const MemberRows& batch, const LowRankFactors& f, const float* x, const float* w, float* y,
                      const cpu_sgemm::RowFinish* finish, const PackedWeights* packed) {
  cpu_float_lowrank::perturbed_matmul<Avx512>(batch, f, x, w, y, finish, packed);
}

namespace {

// 16-lane traits for cpu_float_update.hpp: 12 rows x 2 zmm of outputs per micro-tile.
struct UpdateZmm {
  using Reg = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
  static constexpr std::int64_t kTileRows = 12;
  static constexpr int kVecs = 2;
  static Mask mask(std::int64_t count) { return lanes(count > 0 ? count : 0); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg load_masked(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static void store_masked(float* p, Mask m, Reg v) { _mm512_mask_storeu_ps(p, m, v); }
  static Reg set1(float f) { return _mm512_set1_ps(f); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static void transpose(Reg block[16]) { avx512::transpose16(block); }
  template <class Fn>
  static bool with_columns_rank(std::int64_t r, Fn&& fn) { return avx512::with_power_of_two_rank(r, fn); }
  template <int R>
  static void columns(const float* p, std::int64_t count, Reg (&out)[R]) { avx512::columns<R>(p, count, out); }
};

}  // namespace

void lowrank_update(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_terms,
                    const float* const* blocks, const double* weight, float* out) {
  cpu_float_update::Update<UpdateZmm>::run(m, n, r, n_terms, blocks, weight, out);
}

}  // namespace eggroll::cpu_float_avx512
