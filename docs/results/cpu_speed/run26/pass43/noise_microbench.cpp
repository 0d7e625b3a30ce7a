// In-process comparisons of Philox4x32-10 variants on zmm (a round's high words by a 64-bit shift or a
// dword shuffle; 4 or 8 sets of counter blocks) and of the normal fill with its gathers and stores
// after the Philox rounds or between the next batch's (forty-third pass, docs/results.md).
// Build: g++ -O2 -mavx512f -mavx512bw -mavx512dq -mavx512vl noise_microbench.cpp
#include <immintrin.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <vector>
struct RK { std::uint32_t k0[10], k1[10]; };
alignas(64) float table[4096];
inline __m512i draws_low(__m512i w) { return _mm512_cvtepu16_epi32(_mm512_castsi512_si256(w)); }
inline __m512i draws_high(__m512i w) { return _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(w, 1)); }
inline void store_normal(__m512i d, float* out) {
  const __m512i idx = _mm512_and_si512(d, _mm512_set1_epi32(4095));
  const __m512 mag = _mm512_i32gather_ps(idx, table, 4);
  const __m512i sign = _mm512_slli_epi32(d, 16);
  const __m512i v = _mm512_ternarylogic_epi32(_mm512_castps_si512(mag), sign, _mm512_set1_epi32((int)0x80000000u), 0x78);
  _mm256_storeu_si256((__m256i*)out, _mm512_castsi512_si256(v));
  _mm256_storeu_si256((__m256i*)out + 1, _mm512_extracti64x4_epi64(v, 1));
}
template <int N, int V = 0>
__attribute__((noinline)) void sets_noinline(const RK& rk, std::uint32_t block, __m512i* w) {
  sets_piped<N, V>(rk, 3, 7, 11, block, w, nullptr, nullptr);
}
// Philox words alone (the shift / shuffle and 4 / 8 sets comparison)
template <int N, int V>
double run_bits(const RK& rk, std::uint32_t* out, int blocks) {
  auto t0 = std::chrono::steady_clock::now();
  for (int b = 0; b < blocks; b += 8 * N) {
    __m512i w[2 * N];
    sets_noinline<N, V>(rk, b, w);
    for (int i = 0; i < 2 * N; ++i) _mm512_storeu_si512(out + 4 * b + 16 * i, w[i]);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
// current: philox of N sets, then the transform
template <int N>
double run_plain(const RK& rk, float* out, int blocks) {
  auto t0 = std::chrono::steady_clock::now();
  for (int b = 0; b < blocks; b += 8 * N) {
    __m512i w[2 * N];
    sets_noinline<N>(rk, b, w);
    float* dst = out + 8 * b;
    for (int i = 0; i < 2 * N; ++i) { store_normal(draws_low(w[i]), dst + 32 * i); store_normal(draws_high(w[i]), dst + 32 * i + 16); }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
// pipelined: philox of batch g with the transform of batch g-1 interleaved between rounds
// Philox4x32-10 of N sets of 8 blocks (V = 0: a round's high words by a 64-bit shift, 1: by a dword
// shuffle), with prev's normal stores (the batch before) placed between the rounds when prev is set.
template <int N, int V = 0>
__attribute__((always_inline)) inline void sets_piped(const RK& rk, std::uint32_t tag, std::uint32_t pair, std::uint32_t epoch, std::uint32_t block, __m512i* words, const __m512i* prev, float* pdst) {
  auto hi = [](__m512i p) { if constexpr (V == 0) return _mm512_srli_epi64(p, 32); else return _mm512_shuffle_epi32(p, _MM_PERM_CDAB); };
  const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i mul0 = _mm512_set1_epi64(0xD2511F53), mul1 = _mm512_set1_epi64(0xCD9E8D57);
  __m512i c0[N], c1[N], c2[N], c3[N];
  const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * pair;
  const __m512i c0_after = _mm512_set1_epi64(static_cast<std::uint32_t>(p1 >> 32) ^ tag ^ rk.k0[0]);
  const __m512i c1_after = _mm512_set1_epi64(static_cast<std::uint32_t>(p1));
  const __m512i c3_before = _mm512_set1_epi64(epoch ^ rk.k1[0]);
  for (int n = 0; n < N; ++n) {
    const __m512i counter = _mm512_add_epi64(_mm512_set1_epi64(block + 8u * n), lane);
    const __m512i p0 = _mm512_mul_epu32(counter, mul0);
    c0[n] = c0_after; c1[n] = c1_after;
    c2[n] = _mm512_xor_si512(hi(p0), c3_before);
    c3[n] = p0;
  }
  // 4N stores of the previous batch spread over rounds 1..9
  constexpr int kStores = 4 * N;
  int done = 0;
#pragma GCC unroll 10
  for (int r = 1; r < 10; ++r) {
    const __m512i k0 = _mm512_set1_epi32(static_cast<int>(rk.k0[r]));
    const __m512i k1 = _mm512_set1_epi32(static_cast<int>(rk.k1[r]));
#pragma GCC unroll 8
    for (int n = 0; n < N; ++n) {
      const __m512i p0 = _mm512_mul_epu32(c0[n], mul0), p1 = _mm512_mul_epu32(c2[n], mul1);
      c0[n] = _mm512_ternarylogic_epi64(hi(p1), c1[n], k0, 0x96);
      c1[n] = p1;
      c2[n] = _mm512_ternarylogic_epi64(hi(p0), c3[n], k1, 0x96);
      c3[n] = p0;
    }
    if (prev != nullptr) {
      const int upto = kStores * r / 9;
#pragma GCC unroll 16
      for (int s = 0; s < kStores; ++s) {
        if (s < done || s >= upto) continue;
        const __m512i w = prev[s / 2];
        store_normal((s & 1) ? draws_high(w) : draws_low(w), pdst + 16 * s);
      }
      done = upto;
    }
  }
  const __m512i first_half = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
  const __m512i second_half = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
  for (int n = 0; n < N; ++n) {
    const __m512i w01 = _mm512_mask_shuffle_epi32(c0[n], 0xAAAA, c1[n], _MM_PERM_CCAA);
    const __m512i w23 = _mm512_mask_shuffle_epi32(c2[n], 0xAAAA, c3[n], _MM_PERM_CCAA);
    words[2 * n] = _mm512_permutex2var_epi64(w01, first_half, w23);
    words[2 * n + 1] = _mm512_permutex2var_epi64(w01, second_half, w23);
  }
}
template <int N>
__attribute__((noinline)) double run_plain_inline(const RK& rk, float* out, int blocks) {
  auto t0 = std::chrono::steady_clock::now();
  for (int b = 0; b < blocks; b += 8 * N) {
    __m512i w[2 * N];
    sets_piped<N>(rk, 3, 7, 11, b, w, nullptr, nullptr);
    float* dst = out + 8 * b;
    for (int i = 0; i < 2 * N; ++i) { store_normal(draws_low(w[i]), dst + 32 * i); store_normal(draws_high(w[i]), dst + 32 * i + 16); }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
template <int N>
__attribute__((noinline)) double run_piped(const RK& rk, float* out, int blocks) {
  auto t0 = std::chrono::steady_clock::now();
  __m512i w[2][2 * N];
  int cur = 0;
  sets_piped<N>(rk, 3, 7, 11, 0, w[cur], nullptr, nullptr);
  for (int b = 8 * N; b < blocks; b += 8 * N) {
    sets_piped<N>(rk, 3, 7, 11, b, w[cur ^ 1], w[cur], out + 8 * (b - 8 * N));
    cur ^= 1;
  }
  float* dst = out + 8 * (blocks - 8 * N);
  for (int i = 0; i < 2 * N; ++i) { store_normal(draws_low(w[cur][i]), dst + 32 * i); store_normal(draws_high(w[cur][i]), dst + 32 * i + 16); }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
int main() {
  RK rk; for (int r = 0; r < 10; ++r) { rk.k0[r] = 0x1234567u * (r + 1); rk.k1[r] = 0x89abcdefu + r; }
  for (int i = 0; i < 4096; ++i) table[i] = 0.001f * i;
  const int blocks = 1 << 11;  // 16384 normals (64 KiB)
  std::vector<float> a(8 * blocks + 64), b(8 * blocks + 64);
  run_plain<4>(rk, a.data(), blocks);
  for (int N : {1, 2, 4}) {
    std::fill(b.begin(), b.end(), 0.f);
    if (N == 1) run_piped<1>(rk, b.data(), blocks); else if (N == 2) run_piped<2>(rk, b.data(), blocks); else run_piped<4>(rk, b.data(), blocks);
    std::printf("piped N%d equal: %d\n", N, (int)std::equal(a.begin(), a.begin() + 8 * blocks, b.begin()));
  }
  std::vector<double> t[5];
  for (int rep = 0; rep < 400; ++rep) {
    t[0].push_back(run_plain<4>(rk, a.data(), blocks)); t[1].push_back(run_piped<2>(rk, b.data(), blocks));
    t[2].push_back(run_piped<4>(rk, b.data(), blocks)); t[3].push_back(run_plain_inline<4>(rk, a.data(), blocks));
    t[4].push_back(run_piped<1>(rk, b.data(), blocks));
  }
  const char* names[5] = {"plain N4", "piped N2", "piped N4", "inline N4", "piped N1"};
  for (int i = 0; i < 5; ++i) { std::sort(t[i].begin(), t[i].end()); std::printf("%-10s min %.3f med %.3f ns/normal\n", names[i], t[i][0] * 1e9 / (8.0 * blocks), t[i][200] * 1e9 / (8.0 * blocks)); }
  const int bits_blocks = 1 << 14;
  std::vector<std::uint32_t> wa(4 * bits_blocks + 64), wb(4 * bits_blocks + 64);
  run_bits<4, 0>(rk, wa.data(), bits_blocks); run_bits<4, 1>(rk, wb.data(), bits_blocks);
  std::printf("bits equal: %d\n", (int)std::equal(wa.begin(), wa.begin() + 4 * bits_blocks, wb.begin()));
  std::vector<double> u[4];
  for (int rep = 0; rep < 200; ++rep) {
    u[0].push_back(run_bits<4, 0>(rk, wa.data(), bits_blocks)); u[1].push_back(run_bits<4, 1>(rk, wa.data(), bits_blocks));
    u[2].push_back(run_bits<8, 0>(rk, wa.data(), bits_blocks)); u[3].push_back(run_bits<8, 1>(rk, wa.data(), bits_blocks));
  }
  const char* bnames[4] = {"N4 shift", "N4 shuffle", "N8 shift", "N8 shuffle"};
  for (int i = 0; i < 4; ++i) { std::sort(u[i].begin(), u[i].end()); std::printf("%-12s min %.3f med %.3f ns/word\n", bnames[i], u[i][0] * 1e9 / (4.0 * bits_blocks), u[i][100] * 1e9 / (4.0 * bits_blocks)); }
}
