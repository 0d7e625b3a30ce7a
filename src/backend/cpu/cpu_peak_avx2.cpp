// The AVX2 peak loops (cpu_peak.hpp).
#include <immintrin.h>

#include "backend/cpu/cpu_peak.hpp"

namespace eggroll::cpu_peak {

namespace {
constexpr int kChains = 12;
}

std::int64_t fp32_avx2(std::int64_t iterations, float* sink) {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-6f);
  for (std::int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, acc[i]);
  *sink = _mm256_cvtss_f32(s);
  return iterations * kChains * 8;
}

std::int64_t int8_avx2(std::int64_t iterations, int* sink) {
  __m256i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_epi32(i);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  for (std::int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < kChains; ++i)
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
  __m256i s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_epi32(s, acc[i]);
  *sink = _mm256_cvtsi256_si32(s);
  return iterations * kChains * 32;
}

float read_avx2(const float* p, std::int64_t count) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (std::int64_t k = 0; k < count; k += 32) {
    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(p + k));
    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(p + k + 8));
    s2 = _mm256_add_ps(s2, _mm256_loadu_ps(p + k + 16));
    s3 = _mm256_add_ps(s3, _mm256_loadu_ps(p + k + 24));
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
  alignas(32) float lane[8];
  _mm256_store_ps(lane, s);
  float sum = 0.0f;
  for (float v : lane) sum += v;
  return sum;
}

}  // namespace eggroll::cpu_peak
