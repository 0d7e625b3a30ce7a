// The int8 matmul's low-rank correction and output bytes at the AVX-512 VNNI level, for
// cpu_int8_avx512.cpp (and only files compiled with its -mavx512* flags): x . B, the rank
// product's byte splits (ranks 2 to 8, the int32 case, for the row epilogue), the kinds of rows
// whose correction runs in the tile's registers (rank 1, and ranks 2, 4, 8, 16 in int16 pairs), and
// the byte writer clip(floor(t / D_n)). Integer math throughout: every
// result equals the scalar level's bit for bit.
#pragma once
// GCC 12's AVX-512 headers trip false (maybe-)uninitialized warnings on their own _mm512_undefined
// operands (GCC bug 105593), as in the files that include this one.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cpu/avx512_columns.hpp"
#include "backend/int8_ops.hpp"

namespace eggroll::cpu_int8::detail {

using avx512::byte_mask;
using avx512::load_u32;
using avx512::load_u64;

// Output bytes clip(floor(t / D_n)) from int32 t, 64 at a time. t beyond int32 is first saturated
// to int32 by the caller (|D_n| 128 < 2^31, so that cannot change a clipped result). A power-of-two
// D_n is an arithmetic shift. Any other D_n up to kFloatDivisorMax is float arithmetic that gives
// the same integers, in three instructions where the multiply-high takes eleven: y = RN(float(t)
// RN(1 / D) + RN(1 / D) / 2), then floor(y). Where |t / D| <= 255, float(t) is exact and y lies
// within 255.5 2^-24 + 2^-17 < 2.4e-5 of t / D + 1 / (2 D), whose distance to the nearest integer
// is at least 1 / (2 D) >= 3.05e-5 (t and D are integers): so floor(y) = floor(t / D). Beyond, y
// has the sign of t and |y| > 254, which the packs saturate as they do floor(t / D). Larger D_n
// (n above 2^20) use FloorClip's clamp, offset and multiply-high. The tests hold the writer to
// FloorClip on every accumulator that matters for every D_n of n <= 133,143.
class ByteWriter {
 public:
  explicit ByteWriter(const FloorClip& div) : div_(div) {
    for (int s = 0; s < 31; ++s)
      if (div.d == (std::int64_t{1} << s)) shift_ = s;
    shifts_ = _mm512_set1_epi32(shift_);
    const float inv = static_cast<float>(1.0 / static_cast<double>(div.d));
    inv_ = _mm512_set1_ps(inv);
    half_inv_ = _mm512_set1_ps(0.5f * inv);
  }
  static constexpr std::int64_t kFloatDivisorMax = 16384;

  // y[0 .. 64) under mask = clip(floor(t[v][l] / D_n)) for output 16 v + l.
  void store64(const __m512i t[4], std::int8_t* y, __mmask64 mask) const {
    const __m512i q01 = _mm512_packs_epi32(quotient(t[0]), quotient(t[1]));  // int16, saturating
    const __m512i q23 = _mm512_packs_epi32(quotient(t[2]), quotient(t[3]));
    // packs work per 128-bit lane: lane L now holds t0[4L..], t1[4L..], t2[4L..], t3[4L..] (4 bytes each)
    const __m512i bytes = _mm512_packs_epi16(q01, q23);
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i y8 = _mm512_max_epi8(_mm512_permutexvar_epi32(order, bytes), floor_);
    _mm512_mask_storeu_epi8(y, mask, y8);
  }

 private:
  // floor(t / D_n), exact wherever the result lies in [-128, 127] and saturating beyond. (Shifts by
  // a vector of counts, here and in the corrections below: one instruction on the shift port, where
  // a shift by an xmm count is two, one of them on the port the packs and permutes need.)
  __m512i quotient(__m512i t) const {
    if (shift_ >= 0) return _mm512_srav_epi32(t, shifts_);
    if (div_.d <= kFloatDivisorMax) {  // rounding given in each instruction: MXCSR's mode does not count
      const __m512 y = _mm512_fmadd_round_ps(_mm512_cvt_roundepi32_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                                             inv_, half_inv_, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      return _mm512_cvt_roundps_epi32(y, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    }
    const __m512i lo = _mm512_set1_epi32(static_cast<std::int32_t>(-128 * div_.d));
    const __m512i hi = _mm512_set1_epi32(static_cast<std::int32_t>(128 * div_.d - 1));
    const __m512i magic = _mm512_set1_epi64(static_cast<std::int64_t>(div_.magic));
    const __m512i u = _mm512_sub_epi32(_mm512_min_epi32(_mm512_max_epi32(t, lo), hi), lo);  // [0, 256 D)
    const __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(u, magic), FloorClip::kShift);
    const __m512i odd = _mm512_srli_epi64(_mm512_mul_epu32(_mm512_srli_epi64(u, 32), magic), FloorClip::kShift);
    return _mm512_sub_epi32(_mm512_or_si512(even, _mm512_slli_epi64(odd, 32)), _mm512_set1_epi32(128));
  }

  FloorClip div_;
  int shift_ = -1;
  __m512i shifts_;                                 // shift_ in every lane
  __m512 inv_, half_inv_;                          // RN(1 / D_n) and half of it
  __m512i floor_ = _mm512_set1_epi8(-127);         // the lowest output byte (read from here: built in
                                                   // the loop it costs a broadcast per store)
};

// The rows of a block whose epilogue runs in the tile's registers, at rank 1: each row's member's
// A widened to int32 (zero past m, a multiple of 16 values) and x . B, or a null A when the row is
// unperturbed. correction: s floor(xb A[a] / 2^S) without the sign for outputs av .. av + 15,
// exact in int32 when |xb| < 2^23 (as row_rank1_int32). Short (every row's xb fits int16): the
// product by vpmaddwd, one instruction where vpmulld is two on the same port: a lane of a32 is A
// sign-extended, so its low int16 is A and its high one 0 or -1, which meets the 0 above xb.
struct Rank1Row {
  const std::int32_t* a32 = nullptr;
  std::int32_t xb = 0;
  int sign = 0;
};
template <bool Short>
struct Rank1RowsOf {
  using Row = Rank1Row;
  struct Context {};
  static __m512i correction(const Row& row, const Context&, std::int64_t av, std::int64_t, __m512i shift) {
    const __m512i a = _mm512_loadu_si512(row.a32 + av);
    if constexpr (Short)
      return _mm512_srav_epi32(_mm512_madd_epi16(_mm512_set1_epi32(row.xb & 0xFFFF), a), shift);
    return _mm512_srav_epi32(_mm512_mullo_epi32(_mm512_set1_epi32(row.xb), a), shift);
  }
};
using Rank1Rows = Rank1RowsOf<false>;
using Rank1RowsShort = Rank1RowsOf<true>;
using FusedRow = Rank1Row;

// Every x . B below reads its row as x + 128 (u8): xu holds either those bytes (flip 0) or x's own
// signed bytes (flip 0x80 in every byte: x ^ 0x80 is x + 128 as u8), which the loads turn into them.
inline __m512i x_flip(bool raw) { return _mm512_set1_epi8(static_cast<char>(raw ? 0x80 : 0)); }

// xb[t][0] = x_t . B for T rows x_t = xu + t x_stride (T = 1, or 2: an antithetic pair's members,
// which share B) at rank 1: B is one contiguous column, so 64 k per step, its loads and column
// sums shared by the rows; xu is x + 128, or x with flip (x_flip).
template <int T = 1>
inline void xb_rank1_rows(const std::uint8_t* xu, std::int64_t x_stride, std::int64_t n, const std::int8_t* b,
                          std::int32_t* const* xb, __m512i flip) {
  __m512i dot[T], col = _mm512_setzero_si512();
  for (int t = 0; t < T; ++t) dot[t] = col;
  const __m512i ones = _mm512_set1_epi8(1);
  for (std::int64_t k = 0; k < x_stride; k += 64) {
    const __m512i bv = _mm512_maskz_loadu_epi8(byte_mask(n - k), b + k);
    for (int t = 0; t < T; ++t)
      dot[t] = _mm512_dpbusd_epi32(dot[t], _mm512_xor_si512(_mm512_loadu_si512(xu + t * x_stride + k), flip), bv);
    col = _mm512_dpbusd_epi32(col, ones, bv);
  }
  // one reduction of dot - 128 col, modulo 2^32 (the sums may wrap for n > 65,536; the true xb fits int32)
  for (int t = 0; t < T; ++t) xb[t][0] = _mm512_reduce_add_epi32(_mm512_sub_epi32(dot[t], _mm512_slli_epi32(col, 7)));
}

inline void xb_rank1(const std::uint8_t* xu, std::int64_t x_stride, std::int64_t n, const std::int8_t* b,
                     std::int32_t* xb, __m512i flip) {
  xb_rank1_rows<1>(xu, x_stride, n, b, &xb, flip);
}

// xb[c] = x . B[:, c] for R = 2, 4, 8: 16 / R = G groups of 4 rows of B (64 bytes) a step,
// permuted so that int32 lane c G + g holds B[4 g .. 4 g + 3][c] against x's group g: the step's
// 4 G bytes of x broadcast to each c's G lanes are one load, every lane busy. Two chains of steps;
// then each c's G lanes added. All sums are int32 modulo 2^32, so any order gives the same xb (the
// true value fits int32). xu: a row of x + 128 padded to a multiple of 64 bytes (B's bytes past n
// are masked to zero, so the padding's values do not count).
template <int R>
inline void xb_rank_pow2(const std::uint8_t* xu, std::int64_t n, const std::int8_t* b, std::int32_t* xb, __m512i flip) {
  constexpr int kGroups = 16 / R, kStep = 4 * kGroups;  // groups of 4 k and k per step
  alignas(64) std::uint8_t idx_bytes[64];
  for (int c = 0; c < R; ++c)
    for (int g = 0; g < kGroups; ++g)
      for (int q = 0; q < 4; ++q) idx_bytes[4 * (c * kGroups + g) + q] = static_cast<std::uint8_t>((4 * g + q) * R + c);
  const __m512i idx = _mm512_load_si512(idx_bytes), ones = _mm512_set1_epi8(1);
  const auto x_at = [&](std::int64_t k) {  // xu[k .. k + kStep) in each c's lanes (within the padded row)
    if constexpr (R == 2)
      return _mm512_xor_si512(_mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xu + k))), flip);
    if constexpr (R == 4)
      return _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xu + k))), flip);
    std::uint64_t v;
    std::memcpy(&v, xu + k, sizeof v);
    return _mm512_xor_si512(_mm512_set1_epi64(static_cast<long long>(v)), flip);
  };
  __m512i dot[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()}, col[2] = {dot[0], dot[0]};
  const auto step = [&](std::int64_t k, __m512i raw, int chain) {
    const __m512i bv = _mm512_permutexvar_epi8(idx, raw);
    dot[chain] = _mm512_dpbusd_epi32(dot[chain], x_at(k), bv);
    col[chain] = _mm512_dpbusd_epi32(col[chain], ones, bv);
  };
  std::int64_t k = 0;
  for (; k + 2 * kStep <= n; k += 2 * kStep) {
    step(k, _mm512_loadu_si512(b + k * R), 0);
    step(k + kStep, _mm512_loadu_si512(b + (k + kStep) * R), 1);
  }
  for (; k < n; k += kStep)
    step(k, _mm512_maskz_loadu_epi8(byte_mask(std::min<std::int64_t>(kStep, n - k) * R), b + k * R), 0);
  const __m512i sum =
      _mm512_sub_epi32(_mm512_add_epi32(dot[0], dot[1]), _mm512_slli_epi32(_mm512_add_epi32(col[0], col[1]), 7));
  alignas(64) std::uint32_t lanes[16];
  _mm512_store_si512(lanes, sum);
  for (int c = 0; c < R; ++c) {
    std::uint32_t v = 0;
    for (int g = 0; g < kGroups; ++g) v += lanes[c * kGroups + g];
    xb[c] = static_cast<std::int32_t>(v);
  }
}

// xb[c] = x . B[:, c] for 2 <= r <= 16: xb_rank_pow2 for 2, 4 and 8; otherwise each group of 4 rows
// of B (4 r bytes) is permuted so lane c holds B[4 g .. 4 g + 3][c], then one vpdpbusd against the
// broadcast x group covers all c.
inline void xb_rank_n(const std::uint8_t* xu, std::int64_t n, std::int64_t r, const std::int8_t* b,
                      std::int32_t* xb, __m512i flip) {
  switch (r) {
    case 2: return xb_rank_pow2<2>(xu, n, b, xb, flip);
    case 4: return xb_rank_pow2<4>(xu, n, b, xb, flip);
    case 8: return xb_rank_pow2<8>(xu, n, b, xb, flip);
    default: break;
  }
  alignas(64) std::uint8_t idx_bytes[64] = {};
  for (std::int64_t c = 0; c < r; ++c)
    for (std::int64_t q = 0; q < 4; ++q) idx_bytes[4 * c + q] = static_cast<std::uint8_t>(q * r + c);
  const __m512i idx = _mm512_load_si512(idx_bytes), ones = _mm512_set1_epi8(1);
  const __mmask64 lanes = byte_mask(4 * r), four_rows = lanes;  // 4 c-lanes of 4 bytes; 4 rows of r bytes
  __m512i dot0 = _mm512_setzero_si512(), dot1 = dot0, col0 = dot0, col1 = dot0;
  const auto step = [&](std::int64_t grp, __mmask64 rows_mask, __m512i& dot, __m512i& col) {
    const __m512i raw = _mm512_maskz_loadu_epi8(rows_mask, b + 4 * grp * r);
    const __m512i bv = _mm512_maskz_permutexvar_epi8(lanes, idx, raw);
    dot = _mm512_dpbusd_epi32(dot, _mm512_xor_si512(_mm512_set1_epi32(load_u32(xu + 4 * grp)), flip), bv);
    col = _mm512_dpbusd_epi32(col, ones, bv);
  };
  const std::int64_t full_groups = n / 4, n_groups = (n + 3) / 4;
  std::int64_t grp = 0;
  for (; grp + 2 <= full_groups; grp += 2) {  // two accumulator chains
    step(grp, four_rows, dot0, col0);
    step(grp + 1, four_rows, dot1, col1);
  }
  for (; grp < n_groups; ++grp) step(grp, byte_mask(std::min<std::int64_t>(4, n - 4 * grp) * r), dot0, col0);
  const __m512i sum = _mm512_sub_epi32(_mm512_add_epi32(dot0, dot1), _mm512_slli_epi32(_mm512_add_epi32(col0, col1), 7));
  _mm512_mask_storeu_epi32(xb, static_cast<__mmask16>((1u << r) - 1), sum);
}

// dots[t S + c] = the 16 lanes of xu row t . bt row c (vpdpbusd sums over 64 bytes a step) for
// t < T, c < R, rows of x_stride bytes (a multiple of 64); dots[t S + c] for R <= c < S are zero.
// The T R sums advance together, B^T loaded once per step for all T rows; they are stored at the
// end (a reduction straight from the registers makes GCC 12 copy every sum around in the loop).
template <int R, int T, int S>
void xb_dots(const std::uint8_t* xu, std::int64_t x_stride, const std::int8_t* bt, std::int32_t (*dots)[16],
             __m512i flip) {
  __m512i dot[T * R];
#pragma GCC unroll 32
  for (int e = 0; e < T * R; ++e) dot[e] = _mm512_setzero_si512();
  for (std::int64_t k = 0; k < x_stride; k += 64) {
    __m512i bv[R];
#pragma GCC unroll 8
    for (int c = 0; c < R; ++c) bv[c] = _mm512_loadu_si512(bt + c * x_stride + k);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512i xv = _mm512_xor_si512(_mm512_loadu_si512(xu + t * x_stride + k), flip);
#pragma GCC unroll 8
      for (int c = 0; c < R; ++c) dot[t * R + c] = _mm512_dpbusd_epi32(dot[t * R + c], xv, bv[c]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 8
    for (int c = 0; c < S; ++c) _mm512_store_si512(dots[t * S + c], c < R ? dot[t * R + (c < R ? c : 0)] : _mm512_setzero_si512());
}

// corr[a] = s floor((xb . A[a]) / 2^shift) for a < m (int64; rows past m get 0). A block of ab
// outputs (ab r <= 128 bytes) is loaded once and permuted per c into A[a0 + l][c], l < ab.
inline void corr_from_xb(std::int64_t m, std::int64_t r, int shift, int sign, const std::int8_t* a_mat,
                         const std::int32_t* xb, std::int64_t* corr) {
  const std::int64_t ab = r <= 8 ? 16 : 8;
  alignas(64) std::uint8_t base[64] = {};
  for (std::int64_t l = 0; l < ab; ++l) base[l] = static_cast<std::uint8_t>(l * r);
  const __m512i base_idx = _mm512_load_si512(base);
  const __m128i count = _mm_cvtsi32_si128(shift);
  for (std::int64_t a0 = 0; a0 < m; a0 += ab) {
    const std::int64_t bytes = std::min(ab, m - a0) * r;
    const __m512i v0 = _mm512_maskz_loadu_epi8(byte_mask(bytes), a_mat + a0 * r);
    const __m512i v1 = _mm512_maskz_loadu_epi8(byte_mask(bytes - 64), a_mat + a0 * r + 64);
    __m512i p_lo = _mm512_setzero_si512(), p_hi = _mm512_setzero_si512();
    for (std::int64_t c = 0; c < r; ++c) {
      const __m512i col = _mm512_permutex2var_epi8(v0, _mm512_add_epi8(base_idx, _mm512_set1_epi8(static_cast<char>(c))), v1);
      const __m512i xc = _mm512_set1_epi64(xb[c]);
      p_lo = _mm512_add_epi64(p_lo, _mm512_mul_epi32(xc, _mm512_cvtepi8_epi64(_mm512_castsi512_si128(col))));
      if (ab == 16)
        p_hi = _mm512_add_epi64(p_hi, _mm512_mul_epi32(xc, _mm512_cvtepi8_epi64(_mm_srli_si128(_mm512_castsi512_si128(col), 8))));
    }
    p_lo = _mm512_sra_epi64(p_lo, count);
    p_hi = _mm512_sra_epi64(p_hi, count);
    if (sign < 0) {
      p_lo = _mm512_sub_epi64(_mm512_setzero_si512(), p_lo);
      p_hi = _mm512_sub_epi64(_mm512_setzero_si512(), p_hi);
    }
    _mm512_storeu_si512(corr + a0, p_lo);
    if (ab == 16) _mm512_storeu_si512(corr + a0 + 8, p_hi);
  }
}

// ---- ranks 2 to 8, the int32 case of the correction ----
// The rank product p = (x . B) . A[a] needs 32-bit products: u[c] = xb[c] + 2^b in [0, 2^(8 s))
// (s = 2 bytes and b = 15 when every |xb[c]| < 2^15, else s = 3 and b = 23) is split into bytes
// u_j, so that p = sum_j 2^(8 j) (u_j . A[a]) - 2^b sum_c A[a][c], each dot one vpdpbusd per 4
// ranks: exact modulo 2^32, and |p| < 2^30 when sum_c |xb[c]| < 2^23 (the callers' condition).
// The wrapping int32 sums of the lanes of d0 .. d3, as one vector (any order of the adds gives
// the same bits modulo 2^32).
inline __m128i lane_sums4(__m512i d0, __m512i d1, __m512i d2, __m512i d3) {
  const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(d0, d1), _mm512_unpackhi_epi32(d0, d1));
  const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(d2, d3), _mm512_unpackhi_epi32(d2, d3));
  // each 128-bit lane: partial sums of d0, d1, d2, d3
  const __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

struct RankSplit {
  std::uint32_t u[2][4] = {};  // u[cg][j]: byte j of u[4 cg .. 4 cg + 3] (j < 3)
  int splits = 3;
  int bias = 23;
};

// 2 when every |xb[c]| < 2^15, else 3; xb: 8 values, zero past the rank.
inline int splits_needed(const std::int32_t* xb) {
  __m128i big = _mm_max_epi32(_mm_abs_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb))),
                              _mm_abs_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + 4))));
  big = _mm_max_epi32(big, _mm_shuffle_epi32(big, 0x4E));
  big = _mm_max_epi32(big, _mm_shuffle_epi32(big, 0xB1));
  return _mm_cvtsi128_si32(big) < (1 << 15) ? 2 : 3;
}

// The bytes of u = xb + 2^bias, bias = 8 splits - 1; xb: 8 values (zero past the rank: their
// bytes meet A's zero lanes).
inline RankSplit split_xb(const std::int32_t* xb, int splits) {
  RankSplit out;
  out.splits = splits;
  out.bias = 8 * splits - 1;
  const __m128i bias = _mm_set1_epi32(1 << out.bias);
  const __m128i pick = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);  // dword j = bytes j
  for (int cg = 0; cg < 2; ++cg) {
    const __m128i u = _mm_add_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + 4 * cg)), bias);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out.u[cg]), _mm_shuffle_epi8(u, pick));
  }
  return out;
}

// A's rows as vpdpbusd's dword lanes: lane l of group cg = A[l][4 cg .. 4 cg + 3] (zero past the
// rank), from the 128 bytes of A's rows l < 16 by one byte permute; rank 4 is A's own layout.
struct RankLanes {
  explicit RankLanes(std::int64_t r) {
    for (std::int64_t cg = 0; cg < 2; ++cg)
      for (std::int64_t l = 0; l < 16; ++l)
        for (std::int64_t q = 0; q < 4; ++q)
          if (4 * cg + q < r) {
            idx[cg][4 * l + q] = static_cast<std::uint8_t>(l * r + 4 * cg + q);
            mask[cg] |= __mmask64{1} << (4 * l + q);
          }
  }
  template <int R>
  __m512i of(int cg, __m512i raw0, __m512i raw1) const {
    if constexpr (R == 4) return raw0;
    return _mm512_maskz_permutex2var_epi8(mask[cg], raw0, _mm512_loadu_si512(idx[cg]), raw1);
  }
  alignas(64) std::uint8_t idx[2][64] = {};
  __mmask64 mask[2] = {0, 0};
};

// The A bytes of outputs av .. av + 15 (count of them present; zero past them): raw0 the first
// 64, raw1 the next 64 (rank > 4).
template <int R>
void load_a_rows(const std::int8_t* a, std::int64_t av, std::int64_t count, __m512i& raw0, __m512i& raw1) {
  const std::int64_t bytes = std::min<std::int64_t>(16, count) * R;
  raw0 = _mm512_maskz_loadu_epi8(byte_mask(bytes), a + av * R);
  raw1 = R > 4 ? _mm512_maskz_loadu_epi8(byte_mask(bytes - 64), a + av * R + 64) : raw0;
}

// p for 16 outputs from their A bytes and 2^bias sum_c A[a][c] (a_bias).
template <int R>
__m512i rank_product(const RankSplit& s, const RankLanes& lanes, __m512i raw0, __m512i raw1, __m512i a_bias) {
  constexpr int kGroups = (R + 3) / 4;
  __m512i p0 = _mm512_setzero_si512(), p1 = p0, p2 = p0;
  for (int cg = 0; cg < kGroups; ++cg) {
    const __m512i l = lanes.of<R>(cg, raw0, raw1);
    p0 = _mm512_dpbusd_epi32(p0, _mm512_set1_epi32(static_cast<int>(s.u[cg][0])), l);
    p1 = _mm512_dpbusd_epi32(p1, _mm512_set1_epi32(static_cast<int>(s.u[cg][1])), l);
    if (s.splits == 3) p2 = _mm512_dpbusd_epi32(p2, _mm512_set1_epi32(static_cast<int>(s.u[cg][2])), l);
  }
  __m512i sum = _mm512_add_epi32(p0, _mm512_slli_epi32(p1, 8));
  if (s.splits == 3) sum = _mm512_add_epi32(sum, _mm512_slli_epi32(p2, 16));
  return _mm512_sub_epi32(sum, a_bias);
}

// ---- ranks 2, 4, 8, 16: the rank product in int16 pairs ----
// With every |xb[c]| < 2^15, p = sum_q (xb[2q], xb[2q+1]) . (A[a][2q], A[a][2q+1]) is one vpdpwssd
// per pair of ranks on A widened to int16 (once per factor block), with no bytes to split and no
// bias to take off: exact, as |p| < 16 2^15 128 = 2^26. Wider xb (sum_c |xb[c]| < 2^23, the
// callers' condition) is split as xb = 2^15 hi + lo, lo in [0, 2^15) and |hi| <= 2^8, so that
// p = 2^15 (hi . A[a]) + lo . A[a], both int16 pair products: exact modulo 2^32, and |p| < 2^30.
struct PairRow {
  const std::int16_t* a16 = nullptr;  // the member's A as int16 pairs (widen_a_pairs)
  std::int32_t lo[8] = {};            // (xb[2q], xb[2q+1]) as two int16 per q < R / 2 (or their lo parts)
  std::int32_t hi[8] = {};            // their hi parts (wide blocks only)
  int sign = 0;
};

// Whether every xb[c], c < R, fits int16.
template <int R>
bool pairs_fit(const std::int32_t* xb) {
  bool fit = true;
  for (int c = 0; c < R; ++c) fit = fit && xb[c] >= -32768 && xb[c] <= 32767;
  return fit;
}

// Two int16 as one int32 (the first in the low half).
inline std::int32_t int16_pair(std::int32_t first, std::int32_t second) {
  return static_cast<std::int32_t>((static_cast<std::uint32_t>(first) & 0xFFFFu) | (static_cast<std::uint32_t>(second) << 16));
}

// PairRow::lo (and hi, when wide) from xb[0 .. R).
template <int R>
void pack_pairs(const std::int32_t* xb, bool wide, PairRow& row) {
  for (int q = 0; q < R / 2; ++q) {
    const std::int32_t x0 = xb[2 * q], x1 = xb[2 * q + 1];
    if (wide) {
      row.lo[q] = int16_pair(x0 & 0x7FFF, x1 & 0x7FFF);
      row.hi[q] = int16_pair(x0 >> 15, x1 >> 15);
    } else {
      row.lo[q] = int16_pair(x0, x1);
    }
  }
}

// A (m, R) as int16 pairs: for the 16 outputs from av, R / 2 vectors of 32 int16 at out + av R,
// vector q's dword lane l = (A[av + l][2q], A[av + l][2q + 1]); zero past m (out holds 16 R
// ceil(m / 16) values). Rank 16: the 16 outputs' 256 bytes are two halves of 128, outputs l < 8
// picked from the first and l >= 8 from the second by the same index, then blended.
template <int R>
void widen_a_pairs(const std::int8_t* a, std::int64_t m, std::int16_t* out) {
  static_assert(R == 2 || R == 4 || R == 8 || R == 16);
  constexpr int kPerHalf = R == 16 ? 8 : 16;  // outputs whose bytes one permute reaches
  alignas(64) std::uint8_t idx[R / 2][64] = {};
  for (int q = 0; q < R / 2; ++q)
    for (int j = 0; j < 32; ++j) idx[q][j] = static_cast<std::uint8_t>((j / 2 % kPerHalf) * R + 2 * q + (j & 1));
  for (std::int64_t av = 0; av < m; av += 16) {
    const std::int64_t bytes = std::min<std::int64_t>(16, m - av) * R;
    __m512i raw[4];
    for (int h = 0; h < (R == 16 ? 4 : 2); ++h)
      raw[h] = _mm512_maskz_loadu_epi8(byte_mask(bytes - 64 * h), a + av * R + 64 * h);
    for (int q = 0; q < R / 2; ++q) {
      const __m512i ix = _mm512_load_si512(idx[q]);
      __m512i picked = R > 4 ? _mm512_permutex2var_epi8(raw[0], ix, raw[1]) : _mm512_permutexvar_epi8(ix, raw[0]);
      if constexpr (R == 16)
        picked = _mm512_mask_blend_epi8(__mmask64{0xFFFF0000u}, picked, _mm512_permutex2var_epi8(raw[2], ix, raw[3]));
      _mm512_storeu_si512(out + av * R + 32 * q, _mm512_cvtepi8_epi16(_mm512_castsi512_si256(picked)));
    }
  }
}

// The rows of a block whose epilogue runs in the tile's registers with the int16 pairs above
// (Wide: xb split in hi and lo); correction as Rank1Rows's (as row_rank_n_int32, every value the
// same).
template <int R, bool Wide>
struct PairRows {
  using Row = PairRow;
  struct Context {};
  static __m512i correction(const Row& row, const Context&, std::int64_t av, std::int64_t, __m512i shift) {
    const std::int16_t* a = row.a16 + av * R;
    __m512i p = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int q = 0; q < R / 2; ++q) p = _mm512_dpwssd_epi32(p, _mm512_set1_epi32(row.lo[q]), _mm512_loadu_si512(a + 32 * q));
    if constexpr (Wide) {
      __m512i h = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int q = 0; q < R / 2; ++q) h = _mm512_dpwssd_epi32(h, _mm512_set1_epi32(row.hi[q]), _mm512_loadu_si512(a + 32 * q));
      p = _mm512_add_epi32(p, _mm512_slli_epi32(h, 15));
    }
    return _mm512_srav_epi32(p, shift);
  }
};

// Calls fn(std::integral_constant<int, R>{}) for rank r = R in {2, 4, 8, 16} (the ranks whose
// epilogue runs in the tile's registers); false for other ranks.
template <class Fn>
bool with_fused_rank(std::int64_t r, Fn&& fn) {
  switch (r) {
    case 2: return fn(std::integral_constant<int, 2>{});
    case 4: return fn(std::integral_constant<int, 4>{});
    case 8: return fn(std::integral_constant<int, 8>{});
    case 16: return fn(std::integral_constant<int, 16>{});
    default: return false;
  }
}

}  // namespace eggroll::cpu_int8::detail
