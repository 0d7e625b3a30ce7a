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

}  // namespace eggroll::cpu_peak
