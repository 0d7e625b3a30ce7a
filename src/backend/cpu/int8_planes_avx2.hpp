// The int8 factor widenings of the AVX2 qmm (cpu_int8_avx2.cpp) and update (cpu_int8_update_avx2.cpp),
// the only includers, both compiled with -mavx2: a member's rank-r blocks B (n, r) and A (m, r) as
// int16 planes, by byte shuffles.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "backend/cpu/avx2_columns.hpp"

namespace eggroll::cpu_int8::detail::planes_avx2 {

// The 16 values at `v` (int8) widened to int16 and stored at out.
inline void store_widened(__m128i v, std::int16_t* out) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_cvtepi8_epi16(v));
}

// The ranks with a shuffled widening and a vector rank sum (R = 2, 4, 8, 16): a call of
// fn(integral_constant<int, R>) at them, false at any other rank.
template <typename Fn>
inline bool with_plane_rank(std::int64_t rank, Fn&& fn) {
  if (rank == 16) {
    fn(std::integral_constant<int, 16>{});
    return true;
  }
  return avx2::with_power_of_two_rank(rank, fn);
}

inline bool plane_rank(std::int64_t rank) { return with_plane_rank(rank, [](auto) {}); }

// widen_planes for R = 16: rows k .. k + 15 of `in` (16 bytes each) as a 16 x 16 byte transpose.
// Register q holds rows q (low lane) and q + 8 (high lane); three rounds of unpacks (bytes, words,
// dwords) leave in each lane two columns of its 8 rows, and a qword permute puts a column's 16 rows
// in one 128-bit half.
inline void widen_16_rows_rank16(const std::int8_t* in, std::int64_t rows, std::int64_t k, std::int16_t* planes) {
  __m256i v[8], u[8];
  for (int q = 0; q < 8; ++q)
    v[q] = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(in + (k + q + 8) * 16),
                               reinterpret_cast<const __m128i*>(in + (k + q) * 16));
  for (int q = 0; q < 4; ++q) {  // u[q]: columns 0-7 of rows 2 q, 2 q + 1, a word a column; u[q + 4]: 8-15
    u[q] = _mm256_unpacklo_epi8(v[2 * q], v[2 * q + 1]);
    u[q + 4] = _mm256_unpackhi_epi8(v[2 * q], v[2 * q + 1]);
  }
  // v[4 h + q] (q = 0, 1): columns 8 h .. 8 h + 3 of rows 4 q .. 4 q + 3, a dword a column;
  // v[4 h + q + 2]: columns 8 h + 4 .. 8 h + 7 of the same rows
  for (int h = 0; h < 2; ++h)
    for (int q = 0; q < 2; ++q) {
      v[4 * h + q] = _mm256_unpacklo_epi16(u[4 * h + 2 * q], u[4 * h + 2 * q + 1]);
      v[4 * h + q + 2] = _mm256_unpackhi_epi16(u[4 * h + 2 * q], u[4 * h + 2 * q + 1]);
    }
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 2; ++j) {
      const __m256i lo = _mm256_unpacklo_epi32(v[4 * h + 2 * j], v[4 * h + 2 * j + 1]);
      const __m256i hi = _mm256_unpackhi_epi32(v[4 * h + 2 * j], v[4 * h + 2 * j + 1]);
      const int c = 8 * h + 4 * j;  // lo: columns c, c + 1; hi: columns c + 2, c + 3 (8 rows a lane each)
      const __m256i pairs[2] = {_mm256_permute4x64_epi64(lo, 0xD8), _mm256_permute4x64_epi64(hi, 0xD8)};
      for (int e = 0; e < 2; ++e) {
        store_widened(_mm256_castsi256_si128(pairs[e]), planes + (c + 2 * e) * rows + k);
        store_widened(_mm256_extracti128_si256(pairs[e], 1), planes + (c + 2 * e + 1) * rows + k);
      }
    }
}

// planes[c * rows + k] = in[k * R + c] widened to int16: a row-major (rows x R) int8 block as R planes,
// 16 rows a step by byte shuffles (R = 2, 4, 8, 16), the last rows one by one.
template <int R>
void widen_planes(const std::int8_t* in, std::int64_t rows, std::int16_t* planes) {
  // per 128-bit lane: the bytes of each column together, 16 / R of them a column
  const __m256i by_column = R == 2   ? _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4,
                                                         6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)
                                     : _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8,
                                                         12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const auto load = [&](std::int64_t k) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + k * R)); };
  const auto put = [&](int c, std::int64_t k, __m256i v) {  // columns c (low lane) and c + R / 2 (high lane)
    store_widened(_mm256_castsi256_si128(v), planes + c * rows + k);
    store_widened(_mm256_extracti128_si256(v, 1), planes + (c + R / 2) * rows + k);
  };
  std::int64_t k = 0;
  for (; k + 16 <= rows; k += 16) {
    if constexpr (R == 16) {
      widen_16_rows_rank16(in, rows, k, planes);
    } else if constexpr (R == 2) {  // qwords: [c0 rows 0-7, c1 rows 0-7 | c0 rows 8-15, c1 rows 8-15]
      const __m256i v = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(load(k), by_column), 0xD8);
      store_widened(_mm256_castsi256_si128(v), planes + k);
      store_widened(_mm256_extracti128_si256(v, 1), planes + rows + k);
    } else if constexpr (R == 4) {  // each register: qword c = column c of its 8 rows
      const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
      const __m256i a = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(load(k), by_column), order);
      const __m256i b = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(load(k + 8), by_column), order);
      put(0, k, _mm256_unpacklo_epi64(a, b));
      put(1, k, _mm256_unpackhi_epi64(a, b));
    } else {  // R == 8: each register, lane L: dword c = column 4 L + c of its 4 rows
      const __m256i halves = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
      __m256i y[4];
      for (int q = 0; q < 4; ++q)
        y[q] = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(load(k + 4 * q), halves), by_column);
      const __m256i t0 = _mm256_unpacklo_epi32(y[0], y[1]), t1 = _mm256_unpackhi_epi32(y[0], y[1]);
      const __m256i t2 = _mm256_unpacklo_epi32(y[2], y[3]), t3 = _mm256_unpackhi_epi32(y[2], y[3]);
      put(0, k, _mm256_unpacklo_epi64(t0, t2));
      put(1, k, _mm256_unpackhi_epi64(t0, t2));
      put(2, k, _mm256_unpacklo_epi64(t1, t3));
      put(3, k, _mm256_unpackhi_epi64(t1, t3));
    }
  }
  for (; k < rows; ++k)
    for (int c = 0; c < R; ++c) planes[c * rows + k] = in[k * R + c];
}

// pairs[p * 2 rows + 2 e + j] = in[e * R + 2 p + j] widened to int16: a row-major (rows x R) int8
// block as R / 2 planes of int16 pairs, one int32 a row, for vpmaddwd against two ranks at once; 8
// rows a step (R = 2: the bytes as they are; 4: a dword permute; 8, 16: per 4 planes, a 4 x 4 dword
// transpose in each lane), the last rows one by one.
template <int R>
void widen_pair_planes(const std::int8_t* in, std::int64_t rows, std::int16_t* pairs) {
  const auto bytes16 = [&](std::int64_t e) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + e)));
  };
  const auto put = [&](int p, std::int64_t e, __m256i v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(pairs + p * 2 * rows + 2 * e), v);
  };
  std::int64_t e = 0;
  for (; e + 8 <= rows; e += 8) {
    if constexpr (R == 2) {
      put(0, e, bytes16(2 * e));
    } else if constexpr (R == 4) {  // per register (4 rows): the rows' pair 0, then their pair 1
      const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
      const __m256i lo = _mm256_permutevar8x32_epi32(bytes16(4 * e), order);
      const __m256i hi = _mm256_permutevar8x32_epi32(bytes16(4 * e + 16), order);
      put(0, e, _mm256_permute2x128_si256(lo, hi, 0x20));
      put(1, e, _mm256_permute2x128_si256(lo, hi, 0x31));
    } else {  // v[q]: pairs 4 g .. 4 g + 3 of row e + q (low lane) and of row e + q + 4 (high lane)
      for (int g = 0; g < R / 8; ++g) {
        __m256i v[4];
        for (int q = 0; q < 4; ++q) {
          const auto row = [&](std::int64_t i) {
            return _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i * R + 8 * g)));
          };
          v[q] = _mm256_set_m128i(row(e + q + 4), row(e + q));
        }
        const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
        const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
        put(4 * g, e, _mm256_unpacklo_epi64(t0, t2));
        put(4 * g + 1, e, _mm256_unpackhi_epi64(t0, t2));
        put(4 * g + 2, e, _mm256_unpacklo_epi64(t1, t3));
        put(4 * g + 3, e, _mm256_unpackhi_epi64(t1, t3));
      }
    }
  }
  for (; e < rows; ++e)
    for (int c = 0; c < R; ++c) pairs[(c / 2) * 2 * rows + 2 * e + c % 2] = in[e * R + c];
}

}  // namespace eggroll::cpu_int8::detail::planes_avx2
