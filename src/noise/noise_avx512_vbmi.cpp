// fill_int8 at the AVX-512 level on CPUs with VBMI (compiled with -mavx512vbmi besides the AVX-512
// level's flags; noise_avx512.cpp calls it only where the CPU has VBMI): Philox as there, and the
// int8 transform by byte permutes of Int8Buckets (noise_simd.hpp), 64 values a step where the word
// permutes take 32 with three times the instructions. Every output equals the scalar oracle's bit
// for bit (integer math only).
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

// Int8Buckets as byte registers: each 128-byte table is two (one byte permute reads both).
struct ByteTables {
  __m512i base[2], step[2], tail[2];
  __m512i even, odd;  // byte indices 2i and 2i + 1: the low and high bytes of 64 words
};

ByteTables byte_tables() {
  const Int8Buckets& b = int8_buckets();
  ByteTables t;
  for (int h = 0; h < 2; ++h) {
    t.base[h] = _mm512_loadu_si512(b.base + 64 * h);
    t.step[h] = _mm512_loadu_si512(b.step + 64 * h);
    t.tail[h] = _mm512_loadu_si512(b.tail + 64 * h);
  }
  alignas(64) std::uint8_t even[64], odd[64];
  for (int i = 0; i < 64; ++i) {
    even[i] = static_cast<std::uint8_t>(2 * i);
    odd[i] = static_cast<std::uint8_t>(2 * i + 1);
  }
  t.even = _mm512_load_si512(even);
  t.odd = _mm512_load_si512(odd);
  return t;
}

// int8_from_bits of the 64 draws of w0 then w1 (32 each, stream order). With lo and hi a draw's
// bytes, j = d & 4095 and its bucket j >> 5 = (lo >> 5) | (hi & 15) << 3; the byte permutes read
// an index's low 7 bits only, so the bucket's bit 7 and the tail's index (j & 127 = lo & 127)
// need no masking.
inline void store_int8_bytes(const ByteTables& t, __m512i w0, __m512i w1, std::int8_t* out) {
  const __m512i lo = _mm512_permutex2var_epi8(w0, t.even, w1);
  const __m512i hi = _mm512_permutex2var_epi8(w0, t.odd, w1);
  // 16-bit shifts: each byte's bits 0-2 (lo >> 5) and 3-6 (hi << 3) come from that byte alone;
  // the select (imm 0xE4: c ? a : b) takes bits 0-2 from the first and the rest from the second
  const __m512i bucket =
      _mm512_ternarylogic_epi32(_mm512_srli_epi16(lo, 5), _mm512_slli_epi16(hi, 3), _mm512_set1_epi8(7), 0xE4);
  const __m512i base = _mm512_permutex2var_epi8(t.base[0], bucket, t.base[1]);
  const __m512i step = _mm512_permutex2var_epi8(t.step[0], bucket, t.step[1]);
  const __mmask64 stepped = _mm512_cmpge_epu8_mask(_mm512_and_si512(lo, _mm512_set1_epi8(kInt8Bucket - 1)), step);
  __m512i magnitude = _mm512_mask_add_epi8(base, stepped, base, _mm512_set1_epi8(1));
  // the tail's buckets have base 0x80
  magnitude = _mm512_mask_mov_epi8(magnitude, _mm512_movepi8_mask(base), _mm512_permutex2var_epi8(t.tail[0], lo, t.tail[1]));
  const __mmask64 negative = _mm512_movepi8_mask(hi);  // bit 15 of the draw
  _mm512_storeu_si512(out, _mm512_mask_sub_epi8(magnitude, negative, _mm512_setzero_si512(), magnitude));
}

}  // namespace

void fill_int8_avx512_vbmi(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::int8_t* out) {
  const PhiloxRoundKeys rk = philox_round_keys(stream.key);
  const ByteTables tables = byte_tables();
  fill_range<8, kSetBlocks, kMainSets>(first, count, out, [&](auto n_sets, std::uint32_t block, std::int8_t* dst) {
    constexpr int N = decltype(n_sets)::value;
    __m512i words[2 * N];
    philox_sets<N>(stream, rk, block, words);
    for (int i = 0; i < 2 * N; i += 2) store_int8_bytes(tables, words[i], words[i + 1], dst + 32 * i);
  });
}

}  // namespace eggroll::noise_simd
#endif  // __x86_64__
