// The AVX-512 peak loops (cpu_peak.hpp): 12 independent accumulators, enough to cover the
// latency of two fused units.
#include <immintrin.h>

#include "backend/cpu/cpu_peak.hpp"

namespace eggroll::cpu_peak {

namespace {
constexpr int kChains = 12;
}

std::int64_t fp32_avx512(std::int64_t iterations, float* sink) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-6f);
  for (std::int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  *sink = _mm512_cvtss_f32(s);
  return iterations * kChains * 16;
}

std::int64_t int8_vnni512(std::int64_t iterations, int* sink) {
  __m512i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (std::int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  __m512i s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_epi32(s, acc[i]);
  *sink = _mm512_cvtsi512_si32(s);
  return iterations * kChains * 64;
}

float read_avx512(const float* p, std::int64_t count) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (std::int64_t k = 0; k < count; k += 64) {
    s0 = _mm512_add_ps(s0, _mm512_loadu_ps(p + k));
    s1 = _mm512_add_ps(s1, _mm512_loadu_ps(p + k + 16));
    s2 = _mm512_add_ps(s2, _mm512_loadu_ps(p + k + 32));
    s3 = _mm512_add_ps(s3, _mm512_loadu_ps(p + k + 48));
  }
  alignas(64) float lane[16];
  _mm512_store_ps(lane, _mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
  float sum = 0.0f;
  for (float v : lane) sum += v;
  return sum;
}

}  // namespace eggroll::cpu_peak
