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
// by shuffles for the power-of-two ranks, value by value otherwise.
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
  for (std::int64_t e = 0; e < rows; ++e)
    for (std::int64_t c = 0; c < r; ++c) out[c * rows + e] = in[e * r + c];
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

// The AVX-512 level of cpu_float_lowrank.hpp.
struct Avx512 {
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
                           const cpu_sgemm::LowRankEpilogue& e, float* y) {
    cpu_sgemm::detail::gemm_nt_lowrank_avx512(rows, m, n, x, w, e, y);
  }
};

}  // namespace

void lowrank_correction(const MemberRows& batch, const LowRankFactors& f, const float* x, float* y,
                        std::int64_t member_first, std::int64_t count, const float* base) {
  cpu_float_lowrank::lowrank_correction<Avx512>(batch, f, x, y, member_first, count, base);
}

void perturbed_matmul(const MemberRows& batch, const LowRankFactors& f, const float* x, const float* w, float* y) {
  cpu_float_lowrank::perturbed_matmul<Avx512>(batch, f, x, w, y);
}

namespace {

constexpr std::int64_t kTileRows = 12;  // output rows per micro-tile (broadcast values)
constexpr int kVecs = 2;                 // zmm of panel values per micro-tile
constexpr std::int64_t kTileCols = 16 * kVecs;  // output columns per micro-tile
constexpr std::int64_t kDepth = 256;    // (term, rank) products per packed panel

// acc (ROWS x kTileCols outputs at out) += sum_q A[q][i] bp[q][..), q < depth, in q order, where
// A[q][i] = a[q][skip + i r] (a[q] points at the first row, column c of the term's broadcast
// factor (rows, r); skip: the tile's first row's offset from it).
template <int ROWS>
void update_tile(std::int64_t depth, const float* const* a, std::int64_t skip, std::int64_t r, const float* bp,
                 std::int64_t ldb, float* out, std::int64_t ldo, std::int64_t cols) {
  __mmask16 mask[kVecs];
  for (int v = 0; v < kVecs; ++v) mask[v] = lanes(cols - 16 * v > 0 ? cols - 16 * v : 0);
  __m512 acc[ROWS][kVecs];
#pragma GCC unroll 16
  for (int i = 0; i < ROWS; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) acc[i][v] = _mm512_maskz_loadu_ps(mask[v], out + i * ldo + 16 * v);
  for (std::int64_t q = 0, c = 0; q < depth; ++q, c = c + 1 == r ? 0 : c + 1) {
    __m512 b[kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) b[v] = _mm512_loadu_ps(bp + q * ldb + 16 * v);
    const float* aq = a[q] + skip;
    // the next row tile's values of this term, a line for each of its r products (ROWS r values
    // from aq - c + ROWS r): the terms' factor blocks lie apart in memory, where the hardware
    // prefetchers do not follow them
    _mm_prefetch(reinterpret_cast<const char*>(aq + ROWS * r + 15 * c), _MM_HINT_T0);
#pragma GCC unroll 16
    for (int i = 0; i < ROWS; ++i) {
      const __m512 av = _mm512_set1_ps(aq[i * r]);
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) acc[i][v] = _mm512_fmadd_ps(av, b[v], acc[i][v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < ROWS; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) _mm512_mask_storeu_ps(out + i * ldo + 16 * v, mask[v], acc[i][v]);
}

using TileFn = void (*)(std::int64_t, const float* const*, std::int64_t, std::int64_t, const float*, std::int64_t,
                        float*, std::int64_t, std::int64_t);
constexpr TileFn kTiles[kTileRows + 1] = {nullptr,         update_tile<1>, update_tile<2>,  update_tile<3>,
                                          update_tile<4>,  update_tile<5>, update_tile<6>,  update_tile<7>,
                                          update_tile<8>,  update_tile<9>, update_tile<10>, update_tile<11>,
                                          update_tile<12>};

// Rows q = c of a term's part of the panel: wk F[e0 + e][c] for e < width (the block of columns
// [e0, e0 + width), zeros past len), row stride width; F the term's packed factor (len, r).
void pack_rows(const float* f, std::int64_t len, std::int64_t r, float wk, std::int64_t e0, std::int64_t width,
               float* rows) {
  const __m512 w = _mm512_set1_ps(wk);
  const bool by_columns = avx512::with_power_of_two_rank(r, [&](auto rank) {
    constexpr int R = decltype(rank)::value;
    __m512 column[R];
    for (std::int64_t e = 0; e < width; e += 16) {
      avx512::columns<R>(f + (e0 + e) * R, len - e0 - e, column);
      for (int c = 0; c < R; ++c) _mm512_storeu_ps(rows + c * width + e, _mm512_mul_ps(w, column[c]));
    }
  });
  if (by_columns) return;
  for (std::int64_t c = 0; c < r; ++c) {
    float* row = rows + c * width;
    if (r == 1) {
      for (std::int64_t e = 0; e < width; e += 16)
        _mm512_storeu_ps(row + e, _mm512_mul_ps(w, _mm512_maskz_loadu_ps(avx512::first_lanes(len - e0 - e), f + e0 + e)));
      continue;
    }
    for (std::int64_t e = 0; e < width; ++e) row[e] = e0 + e < len ? wk * f[(e0 + e) * r + c] : 0.0f;
  }
}

// dst[j][i] = src[i][j] for i < rows, j < cols (row strides lds, ldd): 16 x 16 blocks by
// shuffles, the edges value by value.
void transpose_block(const float* src, std::int64_t lds, std::int64_t rows, std::int64_t cols, float* dst,
                     std::int64_t ldd) {
  std::int64_t i = 0;
  for (; i + 16 <= rows; i += 16) {
    std::int64_t j = 0;
    for (; j + 16 <= cols; j += 16) {
      __m512 block[16];
      for (int t = 0; t < 16; ++t) block[t] = _mm512_loadu_ps(src + (i + t) * lds + j);
      avx512::transpose16(block);
      for (int t = 0; t < 16; ++t) _mm512_storeu_ps(dst + (j + t) * ldd + i, block[t]);
    }
    for (; j < cols; ++j)
      for (std::int64_t t = 0; t < 16; ++t) dst[j * ldd + i + t] = src[(i + t) * lds + j];
  }
  for (; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) dst[j * ldd + i] = src[i * lds + j];
}

constexpr std::int64_t kBlockTiles = 256 / kTileCols;  // column tiles per panel block (256 columns: 256 KiB at depth 256)

}  // namespace

void lowrank_update(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_terms,
                    const float* const* blocks, const double* weight, float* out) {
  if (n_terms == 0 || m == 0 || n == 0) return;
  // The tiles' vectors run along the shorter side, whose factor is packed (weighted): B's (n, r)
  // when n <= m, with A's values broadcast; otherwise A's (m, r), with B's values broadcast, and
  // the sums computed as out^T (n, m), in each thread's own scratch. The packing is a pass over
  // the packed factor per block of output rows, so the shorter factor costs the least.
  const bool transposed = n > m;
  const std::int64_t rows = transposed ? n : m, cols = transposed ? m : n;
  const std::int64_t packed_at = transposed ? n * r : 0, broadcast_at = transposed ? 0 : n * r;
  const std::int64_t terms_per_panel = std::max<std::int64_t>(1, kDepth / r);
  const std::int64_t col_tiles = (cols + kTileCols - 1) / kTileCols;
#pragma omp parallel if (n_terms * r * m * n >= cpu_sgemm::detail::kParallelMinWork)
  {
    // Each thread owns a block of output rows x columns and packs the panel of its own columns,
    // a block of columns at a time, so the panel it streams stays in its own cache and the
    // threads never wait on each other. A thread's cost is about (rows + 4) (columns + 4): its
    // tiles' multiply-adds, plus packing its columns' values (once per panel, whatever its
    // rows) and fetching its rows' broadcast values (once, whatever its columns); the split with
    // the least cost on the busiest thread wins, rows first on a tie.
    const std::int64_t n_threads = omp_get_num_threads(), t = omp_get_thread_num();
    std::int64_t tr = 1, best = -1;
    for (std::int64_t d = n_threads; d >= 1; --d) {
      if (n_threads % d != 0) continue;
      const std::int64_t tc = n_threads / d;
      const std::int64_t cost = ((rows + d - 1) / d + 4) * ((col_tiles + tc - 1) / tc * kTileCols + 4);
      if (best < 0 || cost < best) best = cost, tr = d;
    }
    const std::int64_t tc = n_threads / tr;
    const std::int64_t r0 = rows * (t / tc) / tr, r1 = rows * (t / tc + 1) / tr;
    const std::int64_t ct0 = col_tiles * (t % tc) / tc, ct1 = col_tiles * (t % tc + 1) / tc;
    const std::int64_t c0 = ct0 * kTileCols, c1 = std::min(cols, ct1 * kTileCols);
    // The thread's rows in tiles of nearly equal height (64 rows: eleven of 5 or 6, not ten of 6
    // and one of 4, whose broadcasts weigh more per multiply-add).
    const std::int64_t row_tiles = (r1 - r0 + kTileRows - 1) / kTileRows;
    const auto tile_row = [&](std::int64_t rt) { return r0 + (r1 - r0) * rt / row_tiles; };
    if (r0 < r1 && c0 < c1) {
      // Where the tiles accumulate: out itself, or this thread's block of out^T.
      static thread_local std::vector<float> scratch;
      float* dst = out + r0 * n + c0;
      std::int64_t ldd = n;
      if (transposed) {
        ldd = c1 - c0;
        scratch.resize(static_cast<std::size_t>((r1 - r0) * ldd));
        dst = scratch.data();
        transpose_block(out + c0 * n + r0, n, c1 - c0, r1 - r0, dst, ldd);
      }
      const std::int64_t width_max = std::min(kBlockTiles, ct1 - ct0) * kTileCols;
      std::vector<float> bp(static_cast<std::size_t>(terms_per_panel * r * width_max));
      std::vector<const float*> a(static_cast<std::size_t>(terms_per_panel * r));
      // A step packs the panel of (terms [k0, ..), columns from tile cb) and runs its tiles.
      // During its tiles the next step's packed lines and its first row tile's broadcast lines
      // are fetched: the terms' factor blocks lie apart in memory, where the hardware
      // prefetchers do not follow them, and packing them unfetched waited on memory for most of
      // its time.
      cpu::LineQueue queue;
      const auto queue_step = [&](std::int64_t k0, std::int64_t cb) {
        const std::int64_t terms = std::min(terms_per_panel, n_terms - k0);
        const std::int64_t e0 = cb * kTileCols, e1 = std::min(cols, std::min(cb + kBlockTiles, ct1) * kTileCols);
        for (std::int64_t k = 0; k < terms; ++k) {
          queue.add(blocks[k0 + k] + packed_at + e0 * r, (e1 - e0) * r * 4);
          queue.add(blocks[k0 + k] + broadcast_at + r0 * r, (tile_row(1) - r0) * r * 4);
        }
      };
      for (std::int64_t k0 = 0; k0 < n_terms; k0 += terms_per_panel) {
        const std::int64_t terms = std::min(terms_per_panel, n_terms - k0), depth = terms * r;
        for (std::int64_t cb = ct0; cb < ct1; cb += kBlockTiles) {
          const std::int64_t e0 = cb * kTileCols, width = std::min(kBlockTiles, ct1 - cb) * kTileCols;
          // Panel rows q = (k - k0) r + c: weight_k F_k[e0 .., c].
          for (std::int64_t k = 0; k < terms; ++k)
            pack_rows(blocks[k0 + k] + packed_at, cols, r, static_cast<float>(weight[k0 + k]), e0, width,
                      bp.data() + k * r * width);
          queue.clear();
          if (cb + kBlockTiles < ct1)
            queue_step(k0, cb + kBlockTiles);
          else if (k0 + terms_per_panel < n_terms)
            queue_step(k0 + terms_per_panel, ct0);
          const std::int64_t tiles = row_tiles * ((width + kTileCols - 1) / kTileCols);
          const std::int64_t fetch_per_tile = (queue.lines_left() + tiles - 1) / tiles;
          // a[q] = &F_k[r0][c], q = (k - k0) r + c: the tiles broadcast the values from the blocks
          // themselves, each from its own first row on.
          for (std::int64_t k = 0, q = 0; k < terms; ++k) {
            const float* row = blocks[k0 + k] + broadcast_at + r0 * r;
            for (std::int64_t c = 0; c < r; ++c) a[q++] = row + c;
          }
          for (std::int64_t rt = 0; rt < row_tiles; ++rt) {
            const std::int64_t a0 = tile_row(rt), rows_here = tile_row(rt + 1) - a0;
            for (std::int64_t b0 = e0; b0 < std::min(cols, e0 + width); b0 += kTileCols) {
              queue.pump(fetch_per_tile);
              kTiles[rows_here](depth, a.data(), (a0 - r0) * r, r, bp.data() + (b0 - e0), width,
                                dst + (a0 - r0) * ldd + (b0 - c0), ldd, std::min(kTileCols, c1 - b0));
            }
          }
        }
      }
      if (transposed) transpose_block(dst, ldd, r1 - r0, c1 - c0, out + c0 * n + r0, n);
    }
  }
}

}  // namespace eggroll::cpu_float_avx512
