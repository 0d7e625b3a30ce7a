// The cpu int8 row-wise and elementwise kernels at the AVX-512 level (L1 norm, add, the GRU's
// gate and update, the rank-1 perturbed embedding row); compiled with -mavx512* and chosen at run
// time with the matmul's level (cpu_int8.cpp). Results equal the scalar loops bit for bit.
#include "backend/int8_ops.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

// GCC 12's AVX-512 headers trip false (maybe-)uninitialized warnings on their own _mm512_undefined
// operands (GCC bug 105593), as in cpu_int8_avx512.cpp.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace eggroll::cpu_int8::detail {

void ql1_norm_row_avx512(std::int64_t d, const std::int8_t* x, const std::int8_t* w, std::int8_t* y) {
  // sum |x|: |-128| = 128 is 0x80 read as unsigned, so the byte sums (vpsadbw) are exact.
  __m512i sums = _mm512_setzero_si512();
  for (std::int64_t k = 0; k < d; k += 64) {
    const __mmask64 mk = d - k >= 64 ? ~__mmask64{0} : (__mmask64{1} << (d - k)) - 1;
    sums = _mm512_add_epi64(sums, _mm512_sad_epu8(_mm512_abs_epi8(_mm512_maskz_loadu_epi8(mk, x + k)),
                                                  _mm512_setzero_si512()));
  }
  const std::int64_t mav = std::max<std::int64_t>(_mm512_reduce_add_epi64(sums) / d, 1);
  // floor(x w / mav) as floor(fma(x w, 1/mav, 2^-8)) in float is exact. With t = x w / mav
  // (|x w| <= 2^14, 1 <= mav <= 128), the float 1/mav and the fma's rounding move the value by at
  // most |t| 2^-24 + 2^-10 <= 2^-9 from t + 2^-8. An integer t thus lands in (t, t + 1), and a
  // non-integer t = z + j / mav (1 <= j < mav, so 1/128 <= t - z <= 127/128) in (z, z + 1) too.
  // Then clip to [-127, 127].
  // The products in int16 (|x w| <= 2^14), 32 at a time; the float's floor as the conversion's
  // rounding; the clip's top by the narrowing's saturation.
  const __m512 inv = _mm512_set1_ps(1.0f / static_cast<float>(mav)), nudge = _mm512_set1_ps(1.0f / 256);
  const __m512i lo = _mm512_set1_epi32(-127);
  for (std::int64_t k = 0; k < d; k += 32) {
    const __mmask32 mk = d - k >= 32 ? ~__mmask32{0} : (__mmask32{1} << (d - k)) - 1;
    const __m512i p = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mk, x + k)),
                                         _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mk, w + k)));
    for (int h = 0; h < 2; ++h) {
      const __m512i ph = _mm512_cvtepi16_epi32(h == 0 ? _mm512_castsi512_si256(p) : _mm512_extracti64x4_epi64(p, 1));
      const __m512 q = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ph), inv, nudge);
      const __m512i qi = _mm512_cvt_roundps_epi32(q, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
      _mm512_mask_cvtsepi32_storeu_epi8(y + k + 16 * h, static_cast<__mmask16>(mk >> (16 * h)), _mm512_max_epi32(qi, lo));
    }
  }
}

void qadd_row_avx512(std::int64_t d, const std::int8_t* a, const std::int8_t* b, const std::int8_t* v, std::int8_t* y) {
  // The sum of three int8 values fits int16; clip to [-127, 127], then narrow.
  const __m512i lo = _mm512_set1_epi16(-127), hi = _mm512_set1_epi16(127);
  for (std::int64_t k = 0; k < d; k += 32) {
    const __mmask32 mk = d - k >= 32 ? ~__mmask32{0} : (__mmask32{1} << (d - k)) - 1;
    __m512i s = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mk, a + k));
    if (b != nullptr) s = _mm512_add_epi16(s, _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mk, b + k)));
    if (v != nullptr) s = _mm512_add_epi16(s, _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mk, v + k)));
    _mm512_mask_cvtepi16_storeu_epi8(y + k, mk, _mm512_min_epi16(_mm512_max_epi16(s, lo), hi));
  }
}

// 16 values a time: a move up where z >= t, down where z <= -t (t >= 1), then the clip; the
// changed lanes counted from a mask.
std::int64_t qapply_moves_avx512(std::int64_t begin, std::int64_t end, const std::int64_t* z, std::int64_t threshold,
                                 std::int8_t* w) {
  const __m512i up_from = _mm512_set1_epi64(threshold), down_from = _mm512_set1_epi64(-threshold);
  const __m512i one = _mm512_set1_epi32(1), lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  std::int64_t moved = 0;
  for (std::int64_t k = begin; k < end; k += 16) {
    const __mmask16 valid = end - k >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (end - k)) - 1u);
    const __m512i z0 = _mm512_maskz_loadu_epi64(static_cast<__mmask8>(valid), z + k);
    const __m512i z1 = _mm512_maskz_loadu_epi64(static_cast<__mmask8>(valid >> 8), z + k + 8);
    const __mmask16 up = static_cast<__mmask16>(_mm512_cmpge_epi64_mask(z0, up_from) | (_mm512_cmpge_epi64_mask(z1, up_from) << 8));
    const __mmask16 down = static_cast<__mmask16>(_mm512_cmple_epi64_mask(z0, down_from) | (_mm512_cmple_epi64_mask(z1, down_from) << 8));
    const __m512i old = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(valid, w + k));
    __m512i next = _mm512_mask_add_epi32(old, up, old, one);
    next = _mm512_mask_sub_epi32(next, down, next, one);
    next = _mm512_min_epi32(_mm512_max_epi32(next, lo), hi);
    moved += __builtin_popcount(static_cast<unsigned>(_mm512_mask_cmpneq_epi32_mask(valid, next, old)));
    _mm512_mask_cvtepi32_storeu_epi8(w + k, valid, next);
  }
  return moved;
}

namespace {
// A stream's line 1 KB ahead (past the end of an array it is a harmless hint).
void prefetch_ahead(const std::int8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p + 1024), _MM_HINT_T1); }
}  // namespace

// The GRU's elementwise ops over [begin, end) in 32-value steps of int16 lanes. (f + 127) h fits
// int16 (|f + 127| <= 254, |h| <= 128); (f + 127) (hh - h) needs 17 bits, so its floor / 256 is
// assembled from the product's high and low halves: (hi << 8) | (lo >> 8), which fits int16.
void qgru_gate_avx512(std::int64_t begin, std::int64_t end, const std::int8_t* f, const std::int8_t* h, std::int8_t* g) {
  const __m512i bias = _mm512_set1_epi16(127);
  for (std::int64_t k = begin; k < end; k += 32) {
    const __mmask32 mk = end - k >= 32 ? ~__mmask32{0} : (__mmask32{1} << (end - k)) - 1;
    prefetch_ahead(f + k);
    prefetch_ahead(h + k);
    const __m512i fv = _mm512_add_epi16(_mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mk, f + k)), bias);
    const __m512i hv = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mk, h + k));
    _mm512_mask_cvtepi16_storeu_epi8(g + k, mk, _mm512_srai_epi16(_mm512_mullo_epi16(fv, hv), 8));
  }
}

void qgru_update_avx512(std::int64_t begin, std::int64_t end, const std::int8_t* f, const std::int8_t* hh, std::int8_t* h) {
  const __m512i bias = _mm512_set1_epi16(127), lo = _mm512_set1_epi16(-127), hi = _mm512_set1_epi16(127);
  for (std::int64_t k = begin; k < end; k += 32) {
    const __mmask32 mk = end - k >= 32 ? ~__mmask32{0} : (__mmask32{1} << (end - k)) - 1;
    prefetch_ahead(f + k);
    prefetch_ahead(hh + k);
    prefetch_ahead(h + k);
    const __m512i fv = _mm512_add_epi16(_mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mk, f + k)), bias);
    const __m512i hv = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mk, h + k));
    const __m512i dv = _mm512_sub_epi16(_mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mk, hh + k)), hv);
    const __m512i q = _mm512_or_si512(_mm512_slli_epi16(_mm512_mulhi_epi16(fv, dv), 8),
                                      _mm512_srli_epi16(_mm512_mullo_epi16(fv, dv), 8));
    const __m512i s = _mm512_min_epi16(_mm512_max_epi16(_mm512_add_epi16(hv, q), lo), hi);
    _mm512_mask_cvtepi16_storeu_epi8(h + k, mk, s);
  }
}

// One embedding row at rank 1: y = clip(w + sign floor(a b[k] / 2^shift)); a b fits int16 and an
// arithmetic shift by 16 or more leaves 0 or -1, as the int64 shift does.
void qembedding_rank1_row_avx512(std::int64_t d, const std::int8_t* w, std::int8_t a, const std::int8_t* b, int sign,
                                 int shift, std::int8_t* y) {
  const __m512i av = _mm512_set1_epi16(a), lo = _mm512_set1_epi16(-127), hi = _mm512_set1_epi16(127);
  const __m128i count = _mm_cvtsi32_si128(shift < 16 ? shift : 16);
  for (std::int64_t k = 0; k < d; k += 32) {
    const __mmask32 mk = d - k >= 32 ? ~__mmask32{0} : (__mmask32{1} << (d - k)) - 1;
    const __m512i p = _mm512_sra_epi16(_mm512_mullo_epi16(av, _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mk, b + k))), count);
    const __m512i wv = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mk, w + k));
    const __m512i s = sign > 0 ? _mm512_add_epi16(wv, p) : _mm512_sub_epi16(wv, p);
    _mm512_mask_cvtepi16_storeu_epi8(y + k, mk, _mm512_min_epi16(_mm512_max_epi16(s, lo), hi));
  }
}

}  // namespace eggroll::cpu_int8::detail
#endif
