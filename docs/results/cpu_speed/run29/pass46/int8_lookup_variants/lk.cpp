// Scratch harness (documentation, not built): the AVX2 int8 noise lookup, gathers (old) against the
// 8-register bucket shuffles (new.inc) and the four levels (new2.inc, the committed design, before its
// final tidy), on the same random words, exhaustively checked on every 16-bit draw. Built with
//   g++ -O3 -mavx2 -mfma -std=c++20 -Isrc -Iinclude lk.cpp build/src/libeggroll.so (library before a08878e)
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>
#include "noise/noise_simd.hpp"
using namespace eggroll; using namespace eggroll::noise_simd;
inline __m256i draws_low(__m256i words) { return _mm256_cvtepu16_epi32(_mm256_castsi256_si128(words)); }
inline __m256i draws_high(__m256i words) { return _mm256_cvtepu16_epi32(_mm256_extracti128_si256(words, 1)); }
inline __m256i int8_lanes(__m256i d) {
  const __m256i bytes = _mm256_i32gather_epi32(reinterpret_cast<const int*>(kInt8NormalTablePadded),
                                               _mm256_and_si256(d, _mm256_set1_epi32(kNormalTableSize - 1)), 1);
  const __m256i magnitude = _mm256_and_si256(bytes, _mm256_set1_epi32(0xFF));
  const __m256i negative = _mm256_srai_epi32(_mm256_slli_epi32(d, 16), 31);
  return _mm256_sub_epi32(_mm256_xor_si256(magnitude, negative), negative);
}
__attribute__((noinline)) void old_store(const __m256i* w, int n, std::int8_t* out) {
  for (int i = 0; i < n; i += 2) {
    __m256i words_a = w[i], words_b = w[i+1];
  const __m256i ab = _mm256_packs_epi32(int8_lanes(draws_low(words_a)), int8_lanes(draws_high(words_a)));
  const __m256i cd = _mm256_packs_epi32(int8_lanes(draws_low(words_b)), int8_lanes(draws_high(words_b)));
  const __m256i bytes = _mm256_packs_epi16(ab, cd);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out+16*i),
                      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
}
#include "new.inc"
#include "new2.inc"
__attribute__((noinline)) void new_store(const __m256i* w, int n, std::int8_t* out) {
  const Int8Shuffles& t = int8_shuffles();
  for (int i = 0; i < n; i += 2) store_int8(t, w[i], w[i+1], out + 16*i);
}
int main() {
  const int n = 1 << 12;  // registers: 16 draws each
  std::vector<__m256i> w(n); std::mt19937 rng(1);
  for (auto& v : w) { alignas(32) uint32_t x[8]; for (auto& e : x) e = rng(); v = _mm256_load_si256((__m256i*)x); }
  std::vector<std::int8_t> a(16*n), b(16*n);
  old_store(w.data(), n, a.data()); new_store(w.data(), n, b.data());
  printf("equal %d\n", memcmp(a.data(), b.data(), a.size()) == 0);
  { std::vector<std::int8_t> c(16*n); new2_store(w.data(), n, c.data()); int bad=0; for (size_t i=0;i<c.size();++i) if (c[i]!=a[i] && bad++<5) printf("v2 mismatch at %zu: %d vs %d\n", i, c[i], a[i]); printf("v2 equal %d\n", bad==0); }
  // exhaustive: every 16-bit draw
  { std::vector<__m256i> e(4096); for (int i=0;i<4096;++i){ alignas(32) uint16_t x[16]; for(int l=0;l<16;++l) x[l]=uint16_t(16*i+l); e[i]=_mm256_load_si256((__m256i*)x);} std::vector<std::int8_t> o(65536),p(65536),q(65536); old_store(e.data(),4096,o.data()); new_store(e.data(),4096,p.data()); new2_store(e.data(),4096,q.data()); printf("exhaustive new %d v2 %d\n", o==p, o==q); }
  for (int rep = 0; rep < 5; ++rep) {
    double t[3];
    std::vector<std::int8_t> c(16*n);
    for (int k = 0; k < 3; ++k) {
      auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < 200; ++r) (k == 2 ? new2_store : k ? new_store : old_store)(w.data(), n, k == 2 ? c.data() : k ? b.data() : a.data());
      t[k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / (200.0 * 16 * n) * 1e9;
    }
    printf("old %.3f ns/value new %.3f v2 %.3f\n", t[0], t[1], t[2]);
  }
}
