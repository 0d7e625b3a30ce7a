// AVX-512 helpers shared by the files compiled for AVX-512F (cpu_sgemm_avx512.cpp,
// cpu_float_avx512.cpp, cpu_int8_avx512.cpp, cpu_int8_update_avx512.cpp, cpu_int8_update_amx.cpp):
// byte masks, 16 x 16 transposes (of floats and of bytes), the columns of a small row-major block
// (the rank-r factors) and int32 sums added into int64.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace eggroll::avx512 {

// The first `count` lanes (0 <= count; 16 or more = all).
inline __mmask16 first_lanes(std::int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF)
                     : (count <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << count) - 1u));
}

// The first `count` bytes of 64 (0 <= count; 64 or more = all).
inline __mmask64 byte_mask(std::int64_t count) {
  return count >= 64 ? ~__mmask64{0} : (count <= 0 ? __mmask64{0} : (__mmask64{1} << count) - 1);
}

// Four bytes at p as one int32 (any alignment), for a broadcast.
inline std::int32_t load_u32(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Eight bytes at p as one int64 (any alignment), for a broadcast.
inline std::int64_t load_u64(const void* p) {
  std::int64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// z[0 .. min(count, 8)) += sign * the int32 of p32, widened to int64 (nothing past count): the
// int8 update's sums into its int64 z (cpu_int8_update_avx512.cpp, cpu_int8_update_amx.cpp).
inline void add8_to_z(std::int64_t* z, std::int64_t count, __m256i p32, int sign) {
  const __mmask8 mask = static_cast<__mmask8>(byte_mask(count));
  const __m512i p64 = _mm512_cvtepi32_epi64(p32);
  const __m512i old = _mm512_maskz_loadu_epi64(mask, z);
  _mm512_mask_storeu_epi64(z, mask, sign > 0 ? _mm512_add_epi64(old, p64) : _mm512_sub_epi64(old, p64));
}

// z[0 .. min(count, 16)) += sign * the 16 int32 of p32, each half widened from the register. The
// tiles store their sums and read each vector back whole: a narrower load from inside a wider
// store is not forwarded and waits for the store to retire, which had cost the quad tile as
// much as its multiply-adds at 256 quads.
inline void add16_to_z(std::int64_t* z, std::int64_t count, __m512i p32, int sign) {
  add8_to_z(z, count, _mm512_castsi512_si256(p32), sign);
  if (count > 8) add8_to_z(z + 8, count - 8, _mm512_extracti64x4_epi64(p32, 1), sign);
}

// Whether columns() serves a rank above 1: powers of two up to 16.
inline bool columns_serve(std::int64_t rank) { return rank == 2 || rank == 4 || rank == 8 || rank == 16; }

// out[c] lane l = p[l R + c] for l < count (0 for the other lanes), c < R: the columns of a
// (count, R) row-major block, count <= 16. R contiguous loads, then log2(R) rounds of even/odd
// two-source shuffles (a perfect unshuffle), so no gathers. R is a template argument so that the
// block stays in registers.
template <int R>
inline void columns(const float* p, std::int64_t count, __m512 (&out)[R]) {
#pragma GCC unroll 16
  for (int q = 0; q < R; ++q) out[q] = _mm512_maskz_loadu_ps(first_lanes(count * R - 16 * q), p + 16 * q);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
#pragma GCC unroll 4
  for (int round = 1; round < R; round *= 2) {
    __m512 t[R];
#pragma GCC unroll 8
    for (int i = 0; i < R / 2; ++i) {
      t[i] = _mm512_permutex2var_ps(out[2 * i], even, out[2 * i + 1]);
      t[i + R / 2] = _mm512_permutex2var_ps(out[2 * i], odd, out[2 * i + 1]);
    }
#pragma GCC unroll 16
    for (int q = 0; q < R; ++q) out[q] = t[q];
  }
}

// r[j] lane c := r[c] lane j: a 16 x 16 transpose of 32-bit values in four rounds of two-source
// shuffles (64 in all).
inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {  // t[2i], t[2i+1]: rows 2i, 2i+1 interleaved within each 128-bit lane
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // u[4i+q], 128-bit lane L: rows 4i .. 4i+3 of column 4L+q
    u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int q = 0; q < 4; ++q) {  // column 4L+q = lane L of u[q], u[4+q], u[8+q], u[12+q]
    const __m512 v0 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x44), v1 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xEE);
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x44), v3 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xEE);
    r[q] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[4 + q] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
    r[8 + q] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[12 + q] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
  }
}

// out[c ld + e] = in[e r + c] for e < rows, c < r: a (rows, r) block of bytes transposed, in blocks of
// 16 x 16 (loaded as rows and widened to int32, masked past rows and r; transposed in registers;
// narrowed and stored as columns, masked past rows). A copy: the same bytes as value by value.
// (GCC 12 reports the undefined register its intrinsic headers start from in these conversions and
// shuffles as maybe uninitialized once they are inlined here: a false positive.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
inline void transpose_bytes(const std::int8_t* in, std::int64_t rows, std::int64_t r, std::int8_t* out,
                            std::int64_t ld) {
  for (std::int64_t e = 0; e < rows; e += 16) {
    const std::int64_t count = rows - e < 16 ? rows - e : 16;
    for (std::int64_t c0 = 0; c0 < r; c0 += 16) {
      const std::int64_t width = r - c0 < 16 ? r - c0 : 16;
      __m512 block[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        block[i] = i < count ? _mm512_castsi512_ps(_mm512_cvtepi8_epi32(
                                   _mm_maskz_loadu_epi8(first_lanes(width), in + (e + i) * r + c0)))
                             : _mm512_setzero_ps();
      transpose16(block);
      for (std::int64_t c = 0; c < width; ++c)
        _mm_mask_storeu_epi8(out + (c0 + c) * ld + e, first_lanes(count),
                             _mm512_cvtepi32_epi8(_mm512_castps_si512(block[c])));
    }
  }
}
#pragma GCC diagnostic pop

// Calls fn(std::integral_constant<int, R>{}) for rank R in {2, 4, 8, 16}; false for other ranks.
template <class Fn>
inline bool with_power_of_two_rank(std::int64_t rank, Fn&& fn) {
  switch (rank) {
    case 2: fn(std::integral_constant<int, 2>{}); return true;
    case 4: fn(std::integral_constant<int, 4>{}); return true;
    case 8: fn(std::integral_constant<int, 8>{}); return true;
    case 16: fn(std::integral_constant<int, 16>{}); return true;
    default: return false;
  }
}

// acc = fma(s[c], A[l][c], acc) in lane l for c = 0 .. R-1 in order, A the (count, R) block at p.
template <int R>
inline __m512 rank_fma(const float* p, std::int64_t count, const float* s, __m512 acc) {
  __m512 column[R];
  columns<R>(p, count, column);
#pragma GCC unroll 16
  for (int c = 0; c < R; ++c) acc = _mm512_fmadd_ps(_mm512_set1_ps(s[c]), column[c], acc);
  return acc;
}

}  // namespace eggroll::avx512
