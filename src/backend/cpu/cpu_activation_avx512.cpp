// AVX-512 level of the float activations (cpu_activation.hpp).
#include "backend/cpu/cpu_activation.hpp"

#if EGGROLL_HAVE_LIBMVEC
// GCC 12's AVX-512 headers trip false (maybe-)uninitialized warnings on their own _mm512_undefined
// operands (GCC bug 105593), as in cpu_int8_avx512.cpp.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

// libmvec's 16-lane single-precision functions (the x86_64 vector function ABI, AVX-512 variant).
extern "C" {
__m512 _ZGVeN16v_tanhf(__m512);
__m512 _ZGVeN16v_erff(__m512);
__m512 _ZGVeN16v_expf(__m512);
}

namespace eggroll::cpu_activation {
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

void avx512(Activation a, std::int64_t n, const float* x, float* y) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, apply(a, _mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, mask, apply(a, _mm512_maskz_loadu_ps(mask, x + i)));
  }
}

}  // namespace eggroll::cpu_activation
#endif
