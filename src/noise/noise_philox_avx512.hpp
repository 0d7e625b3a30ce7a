// Philox4x32-10 on AVX-512 registers for the noise fills' AVX-512 files (noise_avx512.cpp and
// noise_avx512_vbmi.cpp, each compiled with its own -mavx512* flags; internal linkage, so each
// gets its own copy for its instruction set).
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "eggroll/noise/noise.hpp"
#include "noise/noise_fill_range.hpp"

namespace eggroll::noise_simd {
namespace {

constexpr int kSetBlocks = 8;  // counter blocks per set: one per 64-bit lane of a zmm
constexpr int kMainSets = 4;   // sets per call on long runs (independent chains; measured best of 2 and 4)

// Philox4x32-10 of N sets of 8 consecutive counter blocks from `block`. A counter word lives in
// the low half of a 64-bit lane (the high half is don't-care), so _mm512_mul_epu32 gives a
// round's 32x32->64 products with hi and lo in the lane that needs them: no repacking per round.
// On return words[2n] holds the 16 words of blocks block+8n .. +3 and words[2n+1] those of
// +4 .. +7, four per block in the stream's order (w0 w1 w2 w3).
template <int N>
inline void philox_sets(const NoiseStream& s, const PhiloxRoundKeys& rk, std::uint32_t block, __m512i* words) {
  const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i mul0 = _mm512_set1_epi64(0xD2511F53), mul1 = _mm512_set1_epi64(0xCD9E8D57);
  __m512i c0[N], c1[N], c2[N], c3[N];
  // Round 0: c1, c2, c3 = (tag, pair, epoch) are the same in every lane, so its hi1/lo1 product
  // is one scalar multiply.
  const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * s.pair;
  const __m512i c0_after = _mm512_set1_epi64(static_cast<std::uint32_t>(p1 >> 32) ^ s.tag ^ rk.k0[0]);
  const __m512i c1_after = _mm512_set1_epi64(static_cast<std::uint32_t>(p1));
  const __m512i c3_before = _mm512_set1_epi64(s.epoch ^ rk.k1[0]);
  for (int n = 0; n < N; ++n) {
    // Lanes past block 2^32 - 1 wrap around; fill_range drops their values.
    const __m512i counter = _mm512_add_epi64(_mm512_set1_epi64(block + 8u * n), lane);
    const __m512i p0 = _mm512_mul_epu32(counter, mul0);
    c0[n] = c0_after;
    c1[n] = c1_after;
    c2[n] = _mm512_xor_si512(_mm512_srli_epi64(p0, 32), c3_before);
    c3[n] = p0;
  }
  for (int r = 1; r < 10; ++r) {
    const __m512i k0 = _mm512_set1_epi32(static_cast<int>(rk.k0[r]));
    const __m512i k1 = _mm512_set1_epi32(static_cast<int>(rk.k1[r]));
    for (int n = 0; n < N; ++n) {
      const __m512i p0 = _mm512_mul_epu32(c0[n], mul0), p1 = _mm512_mul_epu32(c2[n], mul1);
      c0[n] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), c1[n], k0, 0x96);  // hi1 ^ c1 ^ k0
      c1[n] = p1;                                                                       // lo1
      c2[n] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), c3[n], k1, 0x96);  // hi0 ^ c3 ^ k1
      c3[n] = p0;                                                                       // lo0
    }
  }
  // Block-major order: (w0, w1) and (w2, w3) pairs per 64-bit lane, then the pairs interleaved.
  const __m512i first_half = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
  const __m512i second_half = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
  for (int n = 0; n < N; ++n) {
    const __m512i w01 = _mm512_mask_shuffle_epi32(c0[n], 0xAAAA, c1[n], _MM_PERM_CCAA);
    const __m512i w23 = _mm512_mask_shuffle_epi32(c2[n], 0xAAAA, c3[n], _MM_PERM_CCAA);
    words[2 * n] = _mm512_permutex2var_epi64(w01, first_half, w23);
    words[2 * n + 1] = _mm512_permutex2var_epi64(w01, second_half, w23);
  }
}

// An unaligned 64-byte store as two 32-byte halves: a zmm store that crosses a 4 KiB page costs
// several times a split ymm pair on some cores (Zen 4), and callers' buffers may start anywhere.
inline void store_unaligned(void* out, __m512i v) {
  _mm256_storeu_si256(static_cast<__m256i*>(out), _mm512_castsi512_si256(v));
  _mm256_storeu_si256(static_cast<__m256i*>(out) + 1, _mm512_extracti64x4_epi64(v, 1));
}

}  // namespace
}  // namespace eggroll::noise_simd
