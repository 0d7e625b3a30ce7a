// AVX2 helpers shared by the files compiled for AVX2 (cpu_sgemm_avx2.cpp, cpu_int8_avx2.cpp,
// cpu_int8_update_avx2.cpp, cpu_float_avx2.cpp): four-byte loads for broadcasts, lane masks, the
// 8 x 8 transpose and the columns of a small row-major block (the rank-r factors), as
// avx512_columns.hpp provides them at the AVX-512 level.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace eggroll::avx2 {

// Four bytes at p as one int32 (any alignment), for a broadcast.
inline std::int32_t load_u32(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// All-ones in the first `count` lanes (any count; 8 or more = all): vmaskmovps's mask operand.
inline __m256i first_lanes(std::int64_t count) {
  const int c = count <= 0 ? 0 : (count >= 8 ? 8 : static_cast<int>(count));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The first `count` values at p (0 in the other lanes; nothing past them is read). A whole vector
// by a plain load: on a Zen 3 the masked load (vmaskmovps) held x . B's loop, whose samples
// all fell on it (docs/results.md, "Masked loads and stores on a Zen 3").
inline __m256 load_first(const float* p, std::int64_t count) {
  return count >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, first_lanes(count));
}

// Stores the first `count` lanes of v at p (nothing past them is written); a whole vector by a
// plain store (a masked store, vmaskmovps to memory, is many times slower on AMD cores).
inline void store_first(float* p, __m256 v, std::int64_t count) {
  if (count >= 8)
    _mm256_storeu_ps(p, v);
  else
    _mm256_maskstore_ps(p, first_lanes(count), v);
}

// r[j] lane c := r[c] lane j: an 8 x 8 transpose in three rounds of two-source shuffles (24 in all).
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
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

// out[c] lane l = p[l R + c] for l < count (0 for the other lanes), c < R, R in {1, 2, 4, 8}: the
// columns of a (count, R) row-major block, count <= 8, from R contiguous loads by shuffles.
template <int R>
inline void columns(const float* p, std::int64_t count, __m256 (&out)[R]) {
  static_assert(R == 1 || R == 2 || R == 4 || R == 8);
  __m256 v[R];
#pragma GCC unroll 8
  for (int q = 0; q < R; ++q) v[q] = load_first(p + 8 * q, count * R - 8 * q);
  if constexpr (R == 1) {
    out[0] = v[0];
  } else if constexpr (R == 2) {
    // per 128-bit lane the even (odd) values of v0 then v1: rows 0 1 4 5 | 2 3 6 7, then in order
    out[0] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(v[0], v[1], 0x88)), 0xD8));
    out[1] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(v[0], v[1], 0xDD)), 0xD8));
  } else if constexpr (R == 4) {
    // v[q] holds rows 2q, 2q + 1; after the unpacks and shuffles column c's lanes hold rows
    // 0 2 4 6 | 1 3 5 7, put in order by one permute
    const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
    const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    out[0] = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t0, t2, 0x44), order);
    out[1] = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t0, t2, 0xEE), order);
    out[2] = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t1, t3, 0x44), order);
    out[3] = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t1, t3, 0xEE), order);
  } else {
    transpose8(v);
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) out[c] = v[c];
  }
}

// Calls fn(std::integral_constant<int, R>{}) for rank R in {2, 4, 8} (the ranks columns() serves
// above 1); false for other ranks.
template <class Fn>
inline bool with_power_of_two_rank(std::int64_t rank, Fn&& fn) {
  switch (rank) {
    case 2: fn(std::integral_constant<int, 2>{}); return true;
    case 4: fn(std::integral_constant<int, 4>{}); return true;
    case 8: fn(std::integral_constant<int, 8>{}); return true;
    default: return false;
  }
}

}  // namespace eggroll::avx2
