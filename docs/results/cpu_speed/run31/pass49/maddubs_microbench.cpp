#include <immintrin.h>
#include <chrono>
#include <cstdio>
template <class F> double run(F f) { auto t0 = std::chrono::steady_clock::now(); f(); return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
int main() {
  const long N = 100000000;
  for (int rep = 0; rep < 3; ++rep) {
  __m256i c[8]; __m256i w0 = _mm256_set1_epi16(3), w1 = _mm256_set1_epi16(5), ones = _mm256_set1_epi16(1);
  __m256i cf[4]; for (int i=0;i<4;++i) cf[i]=_mm256_set1_epi32(i+7);
  for (int i = 0; i < 8; ++i) c[i] = _mm256_set1_epi32(i);
  // current: per step 4 rows x 2 vectors: madd + add (16 MACs each)
  double t1 = run([&] { for (long k = 0; k < N; ++k) { for (int i = 0; i < 4; ++i) { c[2*i] = _mm256_add_epi32(c[2*i], _mm256_madd_epi16(cf[i], w0)); c[2*i+1] = _mm256_add_epi32(c[2*i+1], _mm256_madd_epi16(cf[i], w1)); } asm volatile("" : "+x"(w0), "+x"(w1)); } });
  // maddubs + madd(ones) + add (32 MACs each)
  double t2 = run([&] { for (long k = 0; k < N; ++k) { for (int i = 0; i < 4; ++i) { c[2*i] = _mm256_add_epi32(c[2*i], _mm256_madd_epi16(_mm256_maddubs_epi16(w0, cf[i]), ones)); c[2*i+1] = _mm256_add_epi32(c[2*i+1], _mm256_madd_epi16(_mm256_maddubs_epi16(w1, cf[i]), ones)); } asm volatile("" : "+x"(w0), "+x"(w1)); } });
  // maddubs, widen by shifts: lo+hi
  double t3 = run([&] { for (long k = 0; k < N; ++k) { for (int i = 0; i < 4; ++i) { __m256i p = _mm256_maddubs_epi16(w0, cf[i]), q = _mm256_maddubs_epi16(w1, cf[i]);
     c[2*i] = _mm256_add_epi32(c[2*i], _mm256_add_epi32(_mm256_srai_epi32(p, 16), _mm256_srai_epi32(_mm256_slli_epi32(p,16),16)));
     c[2*i+1] = _mm256_add_epi32(c[2*i+1], _mm256_madd_epi16(q, ones)); } asm volatile("" : "+x"(w0), "+x"(w1)); } });
  for (int i=0;i<8;++i) asm volatile("" :: "x"(c[i]));
  printf("madd %.2f G MAC/s   maddubs+madd %.2f   maddubs+half shifts %.2f\n", N*8*16/t1/1e9, N*8*32/t2/1e9, N*8*32/t3/1e9);
  }
}
