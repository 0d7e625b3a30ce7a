// AVX-512 level of the cpu vector math ops (cpu_vecmath.hpp).
#include "backend/cpu/cpu_vecmath.hpp"

#if EGGROLL_HAVE_LIBMVEC
// GCC 12's AVX-512 headers trip false (maybe-)uninitialized warnings on their own _mm512_undefined
// operands (GCC bug 105593), as in cpu_int8_avx512.cpp.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>

// libmvec's 16-lane single-precision functions (the x86_64 vector function ABI, AVX-512 variant).
extern "C" {
__m512 _ZGVeN16v_tanhf(__m512);
__m512 _ZGVeN16v_erff(__m512);
__m512 _ZGVeN16v_expf(__m512);
__m512d _ZGVeN8v_exp(__m512d);
__m512d _ZGVeN8v_log(__m512d);
}

namespace eggroll::cpu_vecmath {
namespace {

// The same operations, in the same order, as apply_activation (elementwise_math.hpp).
inline __m512 apply(Activation a, __m512 v) {
  switch (a) {
    case Activation::none: return v;
    case Activation::relu: return _mm512_max_ps(v, _mm512_setzero_ps());
    case Activation::tanh: return _ZGVeN16v_tanhf(v);
    case Activation::gelu: {
      const __m512 e = _ZGVeN16v_erff(_mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752f)));
      return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    }
    case Activation::silu:
      return _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), _ZGVeN16v_expf(_mm512_sub_ps(_mm512_setzero_ps(), v))));
  }
  return v;
}

}  // namespace

void activation_avx512(Activation a, std::int64_t n, const float* x, float* y) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, apply(a, _mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, mask, apply(a, _mm512_maskz_loadu_ps(mask, x + i)));
  }
}

// The rows' steps are cross_entropy_row's (elementwise_math.hpp), one row per lane: the first
// largest logit by strict comparisons in class order, the sum of exp(l_k - top) in class order,
// then (top + log(sum)) - l_label. The last rows' lanes are masked, never finished by scalar calls.
void cross_entropy_avx512(std::int64_t begin, std::int64_t end, std::int64_t classes, const float* logits,
                          const std::int32_t* labels, std::int64_t label_period, double* loss, std::uint8_t* correct) {
  const __m512i lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  for (std::int64_t r0 = begin; r0 < end; r0 += 8) {
    const std::int64_t count = std::min<std::int64_t>(8, end - r0);
    const __mmask8 valid = static_cast<__mmask8>((1u << count) - 1u);
    // logit k of the 8 rows: offsets (r0 + lane) classes + k
    const __m512i base = _mm512_mullo_epi64(_mm512_add_epi64(_mm512_set1_epi64(r0), lane), _mm512_set1_epi64(classes));
    const auto logit = [&](__m512i k) {
      return _mm512_cvtps_pd(_mm512_mask_i64gather_ps(_mm256_setzero_ps(), valid, _mm512_add_epi64(base, k), logits, 4));
    };
    // logit k of the 8 rows, gathered once for up to kKept classes (kept for the sum below)
    constexpr std::int64_t kKept = 32;
    __m512d kept[kKept];
    const auto logit_k = [&](std::int64_t k) {
      return k < kKept ? kept[k] : logit(_mm512_set1_epi64(k));
    };
    __m512d top = kept[0] = logit(_mm512_setzero_si512());
    __m512i best = _mm512_setzero_si512();
    for (std::int64_t k = 1; k < classes; ++k) {
      const __m512d v = logit(_mm512_set1_epi64(k));
      if (k < kKept) kept[k] = v;
      const __mmask8 greater = _mm512_cmp_pd_mask(v, top, _CMP_GT_OQ);
      top = _mm512_mask_mov_pd(top, greater, v);
      best = _mm512_mask_mov_epi64(best, greater, _mm512_set1_epi64(k));
    }
    __m512d sum = _mm512_setzero_pd();
    for (std::int64_t k = 0; k < classes; ++k) sum = _mm512_add_pd(sum, _ZGVeN8v_exp(_mm512_sub_pd(logit_k(k), top)));
    alignas(64) std::int64_t label[8] = {};
    for (std::int64_t i = 0; i < count; ++i) label[i] = labels[(r0 + i) % label_period];
    const __m512i lab = _mm512_load_si512(label);
    const __m512d l = _mm512_sub_pd(_mm512_add_pd(top, _ZGVeN8v_log(sum)), logit(lab));
    _mm512_mask_storeu_pd(loss + r0, valid, l);
    // finite: not a NaN (quiet 0x01, signalling 0x80) nor an infinity (+ 0x08, - 0x10)
    const __mmask8 right = _mm512_cmpeq_epi64_mask(best, lab) & static_cast<__mmask8>(~_mm512_fpclass_pd_mask(l, 0x99));
    for (std::int64_t i = 0; i < count; ++i) correct[r0 + i] = static_cast<std::uint8_t>((right >> i) & 1u);
  }
}

}  // namespace eggroll::cpu_vecmath
#endif
