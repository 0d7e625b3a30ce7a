// The noise fills at the AVX2 level (compiled with -mavx2, chosen at run time by noise_simd.cpp):
// Philox4x32-10 on 4 counter blocks per register, the normal table read by gathers and the int8
// one by byte shuffles. Every output equals the scalar oracle's bit for bit (integer math and a
// sign-bit flip only).
#if defined(__x86_64__)
#include <immintrin.h>

#include "noise/noise_fill_range.hpp"
#include "noise/noise_simd.hpp"

namespace eggroll::noise_simd {
namespace {

constexpr int kSetBlocks = 4;  // counter blocks per set: one per 64-bit lane of a ymm
constexpr int kMainSets = 3;   // sets per call on long runs (measured best: 4 spills the 16 ymm registers)

// Philox4x32-10 of N sets of 4 consecutive counter blocks from `block`, a counter word in the
// low half of each 64-bit lane (see noise_avx512.cpp). On return words[2n] holds the 8 words of
// blocks block+4n, +1 and words[2n+1] those of +2, +3, in the stream's order.
template <int N>
inline void philox_sets(const NoiseStream& s, const PhiloxRoundKeys& rk, std::uint32_t block, __m256i* words) {
  const __m256i lane = _mm256_set_epi64x(3, 2, 1, 0);
  const __m256i mul0 = _mm256_set1_epi64x(0xD2511F53), mul1 = _mm256_set1_epi64x(0xCD9E8D57);
  __m256i c0[N], c1[N], c2[N], c3[N];
  // Round 0: c1, c2, c3 = (tag, pair, epoch) are the same in every lane, so its hi1/lo1 product
  // is one scalar multiply.
  const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * s.pair;
  const __m256i c0_after = _mm256_set1_epi64x(static_cast<std::uint32_t>(p1 >> 32) ^ s.tag ^ rk.k0[0]);
  const __m256i c1_after = _mm256_set1_epi64x(static_cast<std::uint32_t>(p1));
  const __m256i c3_before = _mm256_set1_epi64x(s.epoch ^ rk.k1[0]);
  for (int n = 0; n < N; ++n) {
    // Lanes past block 2^32 - 1 wrap around; fill_range drops their values.
    const __m256i counter = _mm256_add_epi64(_mm256_set1_epi64x(block + 4u * n), lane);
    const __m256i p0 = _mm256_mul_epu32(counter, mul0);
    c0[n] = c0_after;
    c1[n] = c1_after;
    c2[n] = _mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3_before);
    c3[n] = p0;
  }
  for (int r = 1; r < 10; ++r) {
    const __m256i k0 = _mm256_set1_epi32(static_cast<int>(rk.k0[r]));
    const __m256i k1 = _mm256_set1_epi32(static_cast<int>(rk.k1[r]));
    for (int n = 0; n < N; ++n) {
      const __m256i p0 = _mm256_mul_epu32(c0[n], mul0), p1 = _mm256_mul_epu32(c2[n], mul1);
      c0[n] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c1[n]), k0);  // hi1 ^ c1 ^ k0
      c1[n] = p1;                                                                       // lo1
      c2[n] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3[n]), k1);  // hi0 ^ c3 ^ k1
      c3[n] = p0;                                                                       // lo0
    }
  }
  for (int n = 0; n < N; ++n) {
    const __m256i w01 = _mm256_blend_epi32(c0[n], _mm256_slli_epi64(c1[n], 32), 0xAA);  // (w0, w1) per lane
    const __m256i w23 = _mm256_blend_epi32(c2[n], _mm256_slli_epi64(c3[n], 32), 0xAA);  // (w2, w3) per lane
    const __m256i even = _mm256_unpacklo_epi64(w01, w23);                                 // blocks 0 | 2
    const __m256i odd = _mm256_unpackhi_epi64(w01, w23);                                  // blocks 1 | 3
    words[2 * n] = _mm256_permute2x128_si256(even, odd, 0x20);
    words[2 * n + 1] = _mm256_permute2x128_si256(even, odd, 0x31);
  }
}

// The 8 draws of one half of a word register, zero-extended to 32-bit lanes (stream order).
inline __m256i draws_low(__m256i words) { return _mm256_cvtepu16_epi32(_mm256_castsi256_si128(words)); }
inline __m256i draws_high(__m256i words) { return _mm256_cvtepu16_epi32(_mm256_extracti128_si256(words, 1)); }

// normal_from_bits of 8 draws: magnitude kNormalTable[d & 4095], sign bit = bit 15 of d.
inline void store_normal(__m256i d, float* out) {
  const __m256i index = _mm256_and_si256(d, _mm256_set1_epi32(kNormalTableSize - 1));
  const __m256 magnitude = _mm256_i32gather_ps(kNormalTable, index, 4);
  const __m256i sign = _mm256_and_si256(_mm256_slli_epi32(d, 16), _mm256_set1_epi32(static_cast<int>(0x80000000u)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_xor_si256(_mm256_castps_si256(magnitude), sign));
}

// Int8Levels (noise_simd.hpp) in registers: each 16-entry table in both 128-bit lanes.
struct Int8Shuffles {
  __m256i coarse_base1[4], coarse_step[4], mid_base1, mid_step, fine_base1, fine_step, last[2];
};

Int8Shuffles int8_shuffles() {
  const Int8Levels& l = int8_levels();
  const auto row = [](const void* p) { return _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(p))); };
  Int8Shuffles t;
  for (int k = 0; k < 4; ++k) {
    t.coarse_base1[k] = row(l.coarse_base1 + 16 * k);
    t.coarse_step[k] = row(l.coarse_step + 16 * k);
  }
  t.mid_base1 = row(l.mid_base1);
  t.mid_step = row(l.mid_step);
  t.fine_base1 = row(l.fine_base1);
  t.fine_step = row(l.fine_step);
  t.last[0] = row(l.last);
  t.last[1] = row(l.last + 16);
  return t;
}

inline __m256i bytes_of(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }

// A bucketed level's value: base + 1, less one while the offset is below the bucket's rise (0 where
// the control byte has bit 7 set: vpshufb gives 0 for both).
inline __m256i bucket_value(__m256i base1, __m256i step, __m256i control, __m256i offset) {
  return _mm256_add_epi8(_mm256_shuffle_epi8(base1, control),
                         _mm256_cmpgt_epi8(_mm256_shuffle_epi8(step, control), offset));
}

// The bytes 0 or -1 of j < limit for the 16-bit indices ja, jb, in the packs' order.
inline __m256i below(__m256i ja, __m256i jb, int limit) {
  const __m256i l = _mm256_set1_epi16(static_cast<short>(limit));
  return _mm256_packs_epi16(_mm256_cmpgt_epi16(l, ja), _mm256_cmpgt_epi16(l, jb));
}

// int8_from_bits of 32 draws: two registers of 16-bit draws, a then b in stream order. The packs
// interleave a's and b's qwords within each 128-bit lane; the final qword permute undoes it.
inline void store_int8(const Int8Shuffles& t, __m256i a, __m256i b, std::int8_t* out) {
  const __m256i index = _mm256_set1_epi16(kNormalTableSize - 1);
  const __m256i ja = _mm256_and_si256(a, index), jb = _mm256_and_si256(b, index);
  const __m256i sixty_three = _mm256_set1_epi16(63);
  const __m256i coarse = _mm256_packus_epi16(_mm256_srli_epi16(ja, 6), _mm256_srli_epi16(jb, 6));  // j >> 6
  const __m256i low6 = _mm256_packus_epi16(_mm256_and_si256(ja, sixty_three), _mm256_and_si256(jb, sixty_three));
  const __m256i low4 = _mm256_and_si256(low6, bytes_of(15));                       // j & 15
  const __m256i mid = _mm256_and_si256(_mm256_or_si256(_mm256_slli_epi16(coarse, 2), _mm256_srli_epi16(low6, 4)),
                                       bytes_of(15));                               // (j >> 4) & 15
  const __m256i fine = _mm256_and_si256(_mm256_or_si256(_mm256_slli_epi16(mid, 1), _mm256_srli_epi16(low4, 3)),
                                        bytes_of(15));                              // (j >> 3) & 15
  // coarse: slot k's control is the bucket less 16 k, negative (so 0) below the slot and an entry
  // of the slot above it; the base (non-decreasing) takes the largest slot value, the step the
  // last slot that reached the bucket.
  __m256i control = coarse;
  __m256i base1 = _mm256_shuffle_epi8(t.coarse_base1[0], control), step = _mm256_shuffle_epi8(t.coarse_step[0], control);
  for (int k = 1; k < 4; ++k) {
    control = _mm256_sub_epi8(control, bytes_of(16));
    base1 = _mm256_max_epu8(base1, _mm256_shuffle_epi8(t.coarse_base1[k], control));
    step = _mm256_blendv_epi8(_mm256_shuffle_epi8(t.coarse_step[k], control), step, control);
  }
  __m256i magnitude = _mm256_add_epi8(base1, _mm256_cmpgt_epi8(step, low6));
  const auto level = [&](__m256i value) { magnitude = _mm256_max_epu8(magnitude, value); };
  level(bucket_value(t.mid_base1, t.mid_step, _mm256_or_si256(mid, below(ja, jb, kInt8MidStart)), low4));
  level(bucket_value(t.fine_base1, t.fine_step, _mm256_or_si256(fine, below(ja, jb, kInt8FineStart)),
                     _mm256_and_si256(low4, bytes_of(7))));
  level(_mm256_shuffle_epi8(t.last[0], _mm256_or_si256(low4, below(ja, jb, kInt8LastStart))));
  level(_mm256_shuffle_epi8(t.last[1], _mm256_or_si256(low4, below(ja, jb, kInt8LastStart + 16))));
  const __m256i negative = _mm256_packs_epi16(_mm256_srai_epi16(a, 15), _mm256_srai_epi16(b, 15));  // 0 or -1
  const __m256i v = _mm256_sub_epi8(_mm256_xor_si256(magnitude, negative), negative);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute4x64_epi64(v, 0xD8));
}

}  // namespace

void fill_normal_avx2(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, float* out) {
  const PhiloxRoundKeys rk = philox_round_keys(stream.key);
  fill_range<8, kSetBlocks, kMainSets>(first, count, out, [&](auto n_sets, std::uint32_t block, float* dst) {
    constexpr int N = decltype(n_sets)::value;
    __m256i words[2 * N];
    philox_sets<N>(stream, rk, block, words);
    for (int i = 0; i < 2 * N; ++i) {
      store_normal(draws_low(words[i]), dst + 16 * i);
      store_normal(draws_high(words[i]), dst + 16 * i + 8);
    }
  });
}

void fill_int8_avx2(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::int8_t* out) {
  const PhiloxRoundKeys rk = philox_round_keys(stream.key);
  const Int8Shuffles tables = int8_shuffles();
  fill_range<8, kSetBlocks, kMainSets>(first, count, out, [&](auto n_sets, std::uint32_t block, std::int8_t* dst) {
    constexpr int N = decltype(n_sets)::value;
    __m256i words[2 * N];
    philox_sets<N>(stream, rk, block, words);
    for (int n = 0; n < N; ++n) store_int8(tables, words[2 * n], words[2 * n + 1], dst + 32 * n);
  });
}

void fill_bits_avx2(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
  const PhiloxRoundKeys rk = philox_round_keys(stream.key);
  fill_range<4, kSetBlocks, kMainSets>(first, count, out, [&](auto n_sets, std::uint32_t block, std::uint32_t* dst) {
    constexpr int N = decltype(n_sets)::value;
    __m256i words[2 * N];
    philox_sets<N>(stream, rk, block, words);
    for (int i = 0; i < 2 * N; ++i) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 8 * i), words[i]);
  });
}

}  // namespace eggroll::noise_simd
#endif  // __x86_64__
