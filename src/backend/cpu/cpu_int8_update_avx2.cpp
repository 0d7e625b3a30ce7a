// The int8 update's kernels at the AVX2 level (compiled with -mavx2; chosen at run time when the
// CPU has AVX2 but not AVX-512 VNNI): the update tiles of run_update_tiles and the packing of the
// rank-4 coefficient pairs. int8 operands are widened to int16 and multiplied with vpmaddwd, so no
// product or pair sum can saturate. Results equal the scalar level bit for bit.
#include "backend/int8_ops.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/avx2_columns.hpp"
#include "backend/cpu/int8_planes_avx2.hpp"

namespace eggroll::cpu_int8::detail {
namespace {

using avx2::load_u32;

// z rows [a0, a0 + AT) x columns [b0, b0 + 16) += the term pairs [j0, j1): int32 in registers
// (coef pair broadcast, vpmaddwd against Bp), then added into the int64 z (columns past n skipped).
template <int AT>
void update_tile(const UpdateArgs& g, std::int64_t a0, std::int64_t b0, std::int64_t j0, std::int64_t j1) {
  __m256i c[AT * 2];
#pragma GCC unroll 16
  for (int e = 0; e < AT * 2; ++e) c[e] = _mm256_setzero_si256();
  for (std::int64_t jp = j0; jp < j1; ++jp) {
    const std::int16_t* bj = g.bp_at(jp, b0);  // 16 columns: one block's slice
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bj));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bj + 16));
#pragma GCC unroll 8
    for (int i = 0; i < AT; ++i) {
      const __m256i cf = _mm256_set1_epi32(load_u32(g.coef + (a0 + i) * 2 * g.n_jp + 2 * jp));
      c[2 * i] = _mm256_add_epi32(c[2 * i], _mm256_madd_epi16(cf, w0));
      c[2 * i + 1] = _mm256_add_epi32(c[2 * i + 1], _mm256_madd_epi16(cf, w1));
    }
  }
  alignas(32) std::int32_t part[AT][16];
#pragma GCC unroll 8
  for (int i = 0; i < AT; ++i) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(part[i]), c[2 * i]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(part[i] + 8), c[2 * i + 1]);
  }
  const std::int64_t cols = std::min<std::int64_t>(16, g.n - b0);
  for (int i = 0; i < AT; ++i)
    for (std::int64_t b = 0; b < cols; ++b) g.z[(a0 + i) * g.n + b0 + b] += part[i][b];
}

// v[t] (16 int16: 8 values in each 128-bit lane) transposed within each lane: afterwards v[c] holds
// in its low lane the values c of the low lanes of v[0 .. 7], in its high lane those of the high.
inline void transpose8_epi16_lanes(__m256i (&v)[8]) {
  __m256i s[8], t[8];
  for (int i = 0; i < 4; ++i) {
    s[2 * i] = _mm256_unpacklo_epi16(v[2 * i], v[2 * i + 1]);      // values 0-3 of rows 2i, 2i + 1
    s[2 * i + 1] = _mm256_unpackhi_epi16(v[2 * i], v[2 * i + 1]);  // values 4-7
  }
  for (int h = 0; h < 2; ++h)  // rows 0-3 (h = 0) and 4-7
    for (int k = 0; k < 2; ++k) {
      t[4 * h + 2 * k] = _mm256_unpacklo_epi32(s[4 * h + k], s[4 * h + 2 + k]);      // values 4k, 4k + 1
      t[4 * h + 2 * k + 1] = _mm256_unpackhi_epi32(s[4 * h + k], s[4 * h + 2 + k]);  // values 4k + 2, 4k + 3
    }
  for (int c = 0; c < 4; ++c) {
    v[2 * c] = _mm256_unpacklo_epi64(t[c], t[4 + c]);
    v[2 * c + 1] = _mm256_unpackhi_epi64(t[c], t[4 + c]);
  }
}

// A term pair's 16 rows into Bp: v0, v1 the two terms' int16 values of rows 0-15, interleaved
// (row b's pair at out[2 b], out[2 b + 1]) by unpacks within the 128-bit lanes and a lane permute.
inline void store_term_pair(__m256i v0, __m256i v1, std::int16_t* out) {
  const __m256i lo = _mm256_unpacklo_epi16(v0, v1), hi = _mm256_unpackhi_epi16(v0, v1);  // rows 0-3 | 8-11, 4-7 | 12-15
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute2x128_si256(lo, hi, 0x20));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out) + 1, _mm256_permute2x128_si256(lo, hi, 0x31));
}

}  // namespace

// Rank 4: eight rows x four pairs at a time: each pair's eight rows are 32 contiguous bytes, and
// two rounds of unpacks turn the four pairs' vectors into the rows' 16 bytes (rows i and i + 4 in
// one register), widened and multiplied by the pairs' weights (the same int16 products as the
// scalar loop: |d A| <= 127 * 128). The rows past the last eight and the pairs past the last four
// go value by value. Ranks 8 and 16: each pair's row alone. Rank 1: sixteen rows x eight terms,
// transposed 8 x 8 in each 128-bit lane (the rows past the last sixteen and the terms past the
// last eight value by value).
void pack_coef_pairs_avx2(std::int64_t r, const std::int8_t* const* a_of, const std::int16_t* dk, std::int64_t pairs,
                          std::int64_t a0, std::int64_t a1, std::int64_t width, std::int16_t* coef) {
  if (r == 1) {  // 16 rows x 8 terms at a time: each term's 16 rows widened and weighted, then transposed
    const std::int64_t grouped = pairs / 8 * 8;
    std::int64_t a = a0;
    for (; a + 16 <= a1; a += 16)
      for (std::int64_t q0 = 0; q0 < grouped; q0 += 8) {
        __m256i v[8];  // v[t]: term q0 + t's rows a .. a + 7 | a + 8 .. a + 15
        for (int t = 0; t < 8; ++t)
          v[t] = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a_of[q0 + t] + a))),
                                    _mm256_set1_epi16(dk[q0 + t]));
        transpose8_epi16_lanes(v);  // v[c]: row a + c's 8 terms | row a + 8 + c's
        for (int c = 0; c < 8; ++c) {
          _mm_storeu_si128(reinterpret_cast<__m128i*>(coef + (a + c) * width + q0), _mm256_castsi256_si128(v[c]));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(coef + (a + c + 8) * width + q0), _mm256_extracti128_si256(v[c], 1));
        }
      }
    for (std::int64_t row = a0; row < a1; ++row)
      for (std::int64_t q = row < a ? grouped : 0; q < pairs; ++q)
        coef[row * width + q] = static_cast<std::int16_t>(dk[q] * a_of[q][row]);
    return;
  }
  if (r == 8 || r == 16) {  // a pair's row is r contiguous bytes: widened, weighted and stored whole
    for (std::int64_t a = a0; a < a1; ++a)
      for (std::int64_t q = 0; q < pairs; ++q) {
        const std::int8_t* src = a_of[q] + a * r;
        std::int16_t* out = coef + a * width + r * q;
        if (r == 8) {
          const __m128i v = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_mullo_epi16(v, _mm_set1_epi16(dk[q])));
        } else {
          const __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_mullo_epi16(v, _mm256_set1_epi16(dk[q])));
        }
      }
    return;
  }
  const std::int64_t grouped = pairs / 4 * 4;
  std::int64_t a = a0;
  for (; a + 8 <= a1; a += 8)
    for (std::int64_t q0 = 0; q0 < grouped; q0 += 4) {
      const __m256i w = _mm256_setr_epi16(dk[q0], dk[q0], dk[q0], dk[q0], dk[q0 + 1], dk[q0 + 1], dk[q0 + 1],
                                          dk[q0 + 1], dk[q0 + 2], dk[q0 + 2], dk[q0 + 2], dk[q0 + 2], dk[q0 + 3],
                                          dk[q0 + 3], dk[q0 + 3], dk[q0 + 3]);
      __m256i p[4];
      for (int q = 0; q < 4; ++q) p[q] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a_of[q0 + q] + a * 4));
      const __m256i t01 = _mm256_unpacklo_epi32(p[0], p[1]), t23 = _mm256_unpacklo_epi32(p[2], p[3]);  // rows 0 1 | 4 5
      const __m256i u01 = _mm256_unpackhi_epi32(p[0], p[1]), u23 = _mm256_unpackhi_epi32(p[2], p[3]);  // rows 2 3 | 6 7
      const __m256i rows[4] = {_mm256_unpacklo_epi64(t01, t23), _mm256_unpackhi_epi64(t01, t23),
                               _mm256_unpacklo_epi64(u01, u23), _mm256_unpackhi_epi64(u01, u23)};  // rows i | i + 4
      for (int i = 0; i < 4; ++i) {
        const __m256i lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(rows[i]));
        const __m256i hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(rows[i], 1));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(coef + (a + i) * width + 4 * q0), _mm256_mullo_epi16(lo, w));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(coef + (a + i + 4) * width + 4 * q0), _mm256_mullo_epi16(hi, w));
      }
    }
  for (std::int64_t row = a0; row < a1; ++row)
    for (std::int64_t q = row < a ? grouped : 0; q < pairs; ++q)
      for (int c = 0; c < 4; ++c)
        coef[row * width + 4 * q + c] = static_cast<std::int16_t>(dk[q] * a_of[q][row * 4 + c]);
}

// Each rank's columns as int16 planes (widen_planes, plane c at c n), then each term pair's two
// planes interleaved 16 rows at a time: unpacks within the 128-bit lanes and a lane permute, so
// that a block's 16 rows come out in order. A last partial block reads its rows through zeroed
// copies (zeros past n).
void pack_b_pair_avx2(std::int64_t r, const std::int8_t* b, std::int64_t jp0, const UpdateArgs& g, std::int16_t* bp) {
  thread_local std::vector<std::int16_t> planes;
  planes.resize(static_cast<std::size_t>(r * g.n));
  planes_avx2::with_plane_rank(r, [&](auto rank) { planes_avx2::widen_planes<decltype(rank)::value>(b, g.n, planes.data()); });
  for (std::int64_t e = 0; e < r / 2; ++e) {
    const std::int16_t* p0 = planes.data() + 2 * e * g.n;
    const std::int16_t* p1 = p0 + g.n;
    alignas(32) std::int16_t last[2][UpdateArgs::kBpCols];
    for (std::int64_t b0 = 0; b0 < g.n_pad; b0 += UpdateArgs::kBpCols) {
      const std::int16_t *r0 = p0 + b0, *r1 = p1 + b0;
      if (b0 + UpdateArgs::kBpCols > g.n) {
        const std::int64_t count = std::max<std::int64_t>(g.n - b0, 0);
        std::fill_n(&last[0][0], 2 * UpdateArgs::kBpCols, std::int16_t{0});
        std::copy_n(r0, count, last[0]);
        std::copy_n(r1, count, last[1]);
        r0 = last[0];
        r1 = last[1];
      }
      const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0));
      const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1));
      store_term_pair(v0, v1, bp + g.bp_offset(jp0 + e, b0));
    }
  }
}

std::int64_t pack_b_rank1_avx2(const std::int8_t* b0, const std::int8_t* b1, std::int64_t jp, const UpdateArgs& g,
                               std::int16_t* bp) {
  std::int64_t row = 0;
  for (; row + UpdateArgs::kBpCols <= g.n; row += UpdateArgs::kBpCols) {
    const __m256i v0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + row)));
    const __m256i v1 = b1 != nullptr ? _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + row)))
                                     : _mm256_setzero_si256();
    store_term_pair(v0, v1, bp + g.bp_offset(jp, row));
  }
  return row;
}

void update_avx2(const UpdateArgs& g) {
  static const UpdateTileFn tiles[4] = {update_tile<1>, update_tile<2>, update_tile<3>, update_tile<4>};
  run_update_tiles(g, 4, 16, tiles);
}

}  // namespace eggroll::cpu_int8::detail
#endif
