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

#include "noise/noise_fill_range.hpp"
#include "noise/noise_philox_avx512.hpp"
#include "noise/noise_simd.hpp"

namespace eggroll::noise_simd {
namespace {

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

// int8_from_bits of the 32 draws of a word register by Int8Buckets (noise_simd.hpp): a 128-entry
// table of 16-bit values is four registers, read by two word permutes (vpermt2w, 64 entries each)
// and a blend.
struct Int8Search {
  __m512i bucket[4];  // per bucket: its base | its step << 8
  __m512i tail[4];    // the last 128 entries
};

Int8Search int8_search() {
  struct Tables {
    alignas(64) std::uint16_t bucket[128], tail[128];
  };
  static const Tables tables = [] {
    const Int8Buckets& b = int8_buckets();
    Tables t{};
    for (int h = 0; h < 128; ++h) t.bucket[h] = static_cast<std::uint16_t>((b.base[h] & 0x7F) | b.step[h] << 8);
    for (int i = 0; i < 128; ++i) t.tail[i] = static_cast<std::uint16_t>(b.tail[i]);
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
  const __mmask32 stepped = _mm512_cmpge_epu16_mask(_mm512_and_si512(j, _mm512_set1_epi16(kInt8Bucket - 1)),
                                                    _mm512_srli_epi16(entry, 8));
  const __m512i base = _mm512_and_si512(entry, _mm512_set1_epi16(0xFF));
  __m512i magnitude = _mm512_mask_add_epi16(base, stepped, base, _mm512_set1_epi16(1));
  // the tail: j - kInt8TailStart is j's low 7 bits (kInt8TailStart is a multiple of 128)
  magnitude = _mm512_mask_mov_epi16(magnitude, _mm512_cmpge_epu16_mask(j, _mm512_set1_epi16(kInt8TailStart)),
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
  if (cpu_has_vbmi()) return fill_int8_avx512_vbmi(stream, first, count, out);
  fill_int8_avx512_words(stream, first, count, out);
}

void fill_int8_avx512_words(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::int8_t* out) {
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
