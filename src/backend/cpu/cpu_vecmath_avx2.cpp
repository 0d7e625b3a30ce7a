// AVX2 level of the cpu vector math ops (cpu_vecmath.hpp), and whether they were built.
#include "backend/cpu/cpu_vecmath.hpp"

#if EGGROLL_HAVE_LIBMVEC
#include <immintrin.h>

// libmvec's 8-lane single-precision functions (the x86_64 vector function ABI, AVX2 variant).
extern "C" {
__m256 _ZGVdN8v_tanhf(__m256);
__m256 _ZGVdN8v_erff(__m256);
__m256 _ZGVdN8v_expf(__m256);
}

namespace eggroll::cpu_vecmath {
namespace {

// The same operations, in the same order, as apply_activation (elementwise_math.hpp).
inline __m256 apply(Activation a, __m256 v) {
  switch (a) {
    case Activation::none: return v;
    case Activation::relu: return _mm256_max_ps(v, _mm256_setzero_ps());
    case Activation::tanh: return _ZGVdN8v_tanhf(v);
    case Activation::gelu: {
      const __m256 e = _ZGVdN8v_erff(_mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752f)));
      return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    }
    case Activation::silu:
      return _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), _ZGVdN8v_expf(_mm256_sub_ps(_mm256_setzero_ps(), v))));
  }
  return v;
}

}  // namespace

bool available() { return true; }

void activation_avx2(Activation a, std::int64_t n, const float* x, float* y) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, apply(a, _mm256_loadu_ps(x + i)));
  if (i < n) {  // lanes below n - i: all bits set
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)), lane);
    _mm256_maskstore_ps(y + i, mask, apply(a, _mm256_maskload_ps(x + i, mask)));
  }
}

}  // namespace eggroll::cpu_vecmath
#else
namespace eggroll::cpu_vecmath {
bool available() { return false; }
void activation_avx2(Activation, std::int64_t, const float*, float*) {}
void activation_avx512(Activation, std::int64_t, const float*, float*) {}
void cross_entropy_avx512(std::int64_t, std::int64_t, std::int64_t, const float*, const std::int32_t*, std::int64_t,
                          double*, std::uint8_t*) {}
}  // namespace eggroll::cpu_vecmath
#endif
