// The noise fills at the AVX-512 level (compiled with -mavx512f/bw/vl/dq, chosen at run time by
// noise_simd.cpp): Philox4x32-10 on 8 counter blocks per register, the normal table read by
// gathers, the int8 table by word permutes of bucket tables. Every output equals the scalar
// oracle's bit for bit (integer math and a sign-bit flip only).
#if defined(__x86_64__)
// GCC 12 warns inside its own AVX-512 intrinsics (_mm512_undefined_epi32, GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "eggroll/core/error.hpp"

#include "noise/noise_fill_range.hpp"
#include "noise/noise_simd.hpp"

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

// The 16 draws of one half of a word register, zero-extended to 32-bit lanes (stream order).
inline __m512i draws_low(__m512i words) { return _mm512_cvtepu16_epi32(_mm512_castsi512_si256(words)); }
inline __m512i draws_high(__m512i words) { return _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(words, 1)); }

// normal_from_bits of 16 draws: magnitude kNormalTable[d & 4095], sign bit = bit 15 of d. The
// magnitudes by one 16-lane gather (Wide) or two 8-lane gathers, the same loads: on Zen 4 the two
// were 5% faster per value, on an Intel Xeon (Emerald Rapids) the one 10-19% faster
// (bench/noise_throughput); fill_normal_avx512 picks by vendor.
template <bool Wide>
inline void store_normal(__m512i d, float* out) {
  const __m512i idx = _mm512_and_si512(d, _mm512_set1_epi32(kNormalTableSize - 1));
  __m512 magnitude;
  if constexpr (Wide) {
    magnitude = _mm512_i32gather_ps(idx, kNormalTable, 4);
  } else {
    const __m256 lo = _mm256_i32gather_ps(kNormalTable, _mm512_castsi512_si256(idx), 4);
    const __m256 hi = _mm256_i32gather_ps(kNormalTable, _mm512_extracti64x4_epi64(idx, 1), 4);
    magnitude = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
  }
  const __m512i sign = _mm512_slli_epi32(d, 16);  // bit 15 -> bit 31
  const __m512i v = _mm512_ternarylogic_epi32(_mm512_castps_si512(magnitude), sign,
                                              _mm512_set1_epi32(static_cast<int>(0x80000000u)), 0x78);  // a ^ (b & c)
  store_unaligned(out, v);
}

// int8_from_bits of the 32 draws of a word register, without a table read. kInt8NormalTable
// (4096 entries, values 0..61, non-decreasing) rises by at most one inside each bucket of 32
// entries below kTailStart, so there the magnitude of index j is the bucket's first value plus
// one from the bucket's step on; the last 128 entries are read directly. A 128-entry table of
// 16-bit values is four registers: two word permutes (vpermt2w, 64 entries each) and a blend.
constexpr int kBucket = 32;
constexpr int kTailStart = kNormalTableSize - 128;

struct Int8Search {
  __m512i bucket[4];  // per bucket: its first value | its step's offset << 8 (kBucket: none)
  __m512i tail[4];    // the last 128 entries
};

// Built on first use (not at load time: this file's code runs only on AVX-512 machines), and
// checked: a table without the bucket property is an error rather than wrong values
// (tests/test_noise_simd.cpp checks the property too).
Int8Search int8_search() {
  struct Tables {
    alignas(64) std::uint16_t bucket[128], tail[128];
  };
  static const Tables tables = [] {
    Tables t{};
    for (int h = 0; h < kTailStart / kBucket; ++h) {
      const std::int8_t* b = kInt8NormalTable + h * kBucket;
      int step = kBucket;
      for (int o = kBucket - 1; o >= 1; --o)
        if (b[o] != b[o - 1]) step = o;
      if (b[kBucket - 1] - b[0] > 1)
        throw_error("int8 noise table: entries ", h * kBucket, " to ", h * kBucket + kBucket - 1, " rise by ",
                    b[kBucket - 1] - b[0], ", more than the AVX-512 lookup's one step per bucket; regenerate the "
                    "table with scripts/gen_normal_table.py or widen the lookup's tail");
      t.bucket[h] = static_cast<std::uint16_t>(b[0] | step << 8);
    }
    for (int i = 0; i < 128; ++i) t.tail[i] = static_cast<std::uint16_t>(kInt8NormalTable[kTailStart + i]);
    return t;
  }();
  Int8Search s;
  for (int q = 0; q < 4; ++q) {
    s.bucket[q] = _mm512_load_si512(tables.bucket + 32 * q);
    s.tail[q] = _mm512_load_si512(tables.tail + 32 * q);
  }
  return s;
}

// table[index & 127] for 16-bit lanes.
inline __m512i lookup128(const __m512i (&table)[4], __m512i index) {
  const __m512i low = _mm512_permutex2var_epi16(table[0], index, table[1]);
  const __m512i high = _mm512_permutex2var_epi16(table[2], index, table[3]);
  return _mm512_mask_mov_epi16(low, _mm512_test_epi16_mask(index, _mm512_set1_epi16(64)), high);
}

inline void store_int8(const Int8Search& search, __m512i draws, std::int8_t* out) {
  const __m512i j = _mm512_and_si512(draws, _mm512_set1_epi16(kNormalTableSize - 1));
  const __m512i entry = lookup128(search.bucket, _mm512_srli_epi16(j, 5));
  const __mmask32 stepped = _mm512_cmpge_epu16_mask(_mm512_and_si512(j, _mm512_set1_epi16(kBucket - 1)),
                                                    _mm512_srli_epi16(entry, 8));
  const __m512i base = _mm512_and_si512(entry, _mm512_set1_epi16(0xFF));
  __m512i magnitude = _mm512_mask_add_epi16(base, stepped, base, _mm512_set1_epi16(1));
  // the tail: j - kTailStart is j's low 7 bits (kTailStart is a multiple of 128)
  magnitude = _mm512_mask_mov_epi16(magnitude, _mm512_cmpge_epu16_mask(j, _mm512_set1_epi16(kTailStart)),
                                    lookup128(search.tail, j));
  const __mmask32 negative = _mm512_movepi16_mask(draws);  // bit 15
  const __m512i v = _mm512_mask_sub_epi16(magnitude, negative, _mm512_setzero_si512(), magnitude);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi16_epi8(v));
}

template <bool Wide>
void fill_normal_with(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, float* out) {
  const PhiloxRoundKeys rk = philox_round_keys(stream.key);
  fill_range<8, kSetBlocks, kMainSets>(first, count, out, [&](auto n_sets, std::uint32_t block, float* dst) {
    constexpr int N = decltype(n_sets)::value;
    __m512i words[2 * N];
    philox_sets<N>(stream, rk, block, words);
    for (int i = 0; i < 2 * N; ++i) {
      store_normal<Wide>(draws_low(words[i]), dst + 32 * i);
      store_normal<Wide>(draws_high(words[i]), dst + 32 * i + 16);
    }
  });
}

}  // namespace

void fill_normal_avx512_gathers(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, float* out,
                                bool wide) {
  if (wide)
    fill_normal_with<true>(stream, first, count, out);
  else
    fill_normal_with<false>(stream, first, count, out);
}

void fill_normal_avx512(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, float* out) {
  static const bool wide = [] {  // one 16-lane gather on Intel (store_normal)
    __builtin_cpu_init();
    return __builtin_cpu_is("intel") != 0;
  }();
  fill_normal_avx512_gathers(stream, first, count, out, wide);
}

void fill_int8_avx512(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::int8_t* out) {
  const PhiloxRoundKeys rk = philox_round_keys(stream.key);
  const Int8Search search = int8_search();
  fill_range<8, kSetBlocks, kMainSets>(first, count, out, [&](auto n_sets, std::uint32_t block, std::int8_t* dst) {
    constexpr int N = decltype(n_sets)::value;
    __m512i words[2 * N];
    philox_sets<N>(stream, rk, block, words);
    for (int i = 0; i < 2 * N; ++i) store_int8(search, words[i], dst + 32 * i);
  });
}

void fill_bits_avx512(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
  const PhiloxRoundKeys rk = philox_round_keys(stream.key);
  fill_range<4, kSetBlocks, kMainSets>(first, count, out, [&](auto n_sets, std::uint32_t block, std::uint32_t* dst) {
    constexpr int N = decltype(n_sets)::value;
    __m512i words[2 * N];
    philox_sets<N>(stream, rk, block, words);
    for (int i = 0; i < 2 * N; ++i) store_unaligned(dst + 16 * i, words[i]);
  });
}

}  // namespace eggroll::noise_simd
#endif  // __x86_64__
