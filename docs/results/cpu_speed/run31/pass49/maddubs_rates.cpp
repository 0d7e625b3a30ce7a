#include <immintrin.h>
#include <chrono>
#include <cstdio>
template <class F> double run(F f) { auto t0 = std::chrono::steady_clock::now(); f(); return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
int main() {
  const long N = 200000000;
  for (int rep = 0; rep < 3; ++rep) {
  __m256 a[12]; __m256i b[12]; __m256 x = _mm256_set1_ps(1.0001f), y = _mm256_set1_ps(0.9999f);
  __m256i w = _mm256_set1_epi16(3);
  for (int i = 0; i < 12; ++i) { a[i] = _mm256_set1_ps(i); b[i] = _mm256_set1_epi32(i); }
  double tf = run([&] { for (long k = 0; k < N / 12; ++k) for (int i = 0; i < 12; ++i) { a[i] = _mm256_fmadd_ps(a[i], x, y); asm volatile("" : "+x"(a[i])); } });
  double tm = run([&] { for (long k = 0; k < N / 12; ++k) for (int i = 0; i < 12; ++i) { b[i] = _mm256_madd_epi16(b[i], w); asm volatile("" : "+x"(b[i])); } });
  double tmadd = run([&] { for (long k = 0; k < N / 12; ++k) for (int i = 0; i < 6; ++i) { b[i] = _mm256_add_epi32(b[i], _mm256_madd_epi16(b[i+6], w)); asm volatile("" : "+x"(b[i]),"+x"(b[i+6])); } });
  double tu = run([&] { for (long k = 0; k < N / 12; ++k) for (int i = 0; i < 12; ++i) { b[i] = _mm256_maddubs_epi16(b[i], w); asm volatile("" : "+x"(b[i])); } });
  double tmix = run([&] { for (long k = 0; k < N / 12; ++k) for (int i = 0; i < 12; i+=2) { b[i] = _mm256_maddubs_epi16(b[i], w); b[i+1] = _mm256_madd_epi16(b[i+1], w); asm volatile("" : "+x"(b[i]), "+x"(b[i+1])); } });
  printf("fma %.2f G/s  madd %.2f G/s  madd+add(6) %.2f G madd/s  maddubs %.2f G/s  mix %.2f G/s\n", N / tf / 1e9, N / tm / 1e9, N/2 / tmadd / 1e9, N / tu / 1e9, N / tmix / 1e9);
  }
}
