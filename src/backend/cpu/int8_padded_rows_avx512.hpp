// Rank-r int8 factor rows widened to a power of two p with zero bytes, at the AVX-512 VBMI level
// (the int8 files compiled for it): the forward's ranks between the powers of two with several
// rows per member (cpu_int8_avx512.cpp) and the update's (cpu_int8_update_avx512.cpp) run as rank
// p on such copies. The zero columns add nothing to any sum, so the integers are the same.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/avx512_columns.hpp"

namespace eggroll::cpu_int8::detail {

// The power of two that rank r (3, 5 .. 7, 9 .. 15) is padded to; r itself for 1, 2, 4, 8, 16 and
// above 16.
inline std::int64_t next_power_of_two_rank(std::int64_t r) {
  if (r <= 2 || r >= 16 || (r & (r - 1)) == 0) return r;
  std::int64_t p = 4;
  while (p < r) p *= 2;
  return p;
}

// Rows of r bytes widened to p (r < p <= 16) with p - r zero bytes after each: 64 / p rows a step,
// their r-byte rows loaded at once and spread to p bytes each by one byte permute, the pad bytes
// zeroed by its mask. Made once per (r, p), then applied to each block.
class BytePad {
 public:
  BytePad(std::int64_t r, std::int64_t p) : r_(r), p_(p), per_step_(64 / p) {
    // output byte e = row e / p's byte e % p: input byte (e / p) r + e % p, kept where e % p < r
    alignas(64) std::uint8_t spread_bytes[64];
    for (std::int64_t e = 0; e < 64; ++e) {
      spread_bytes[e] = static_cast<std::uint8_t>(e % p < r ? (e / p) * r + e % p : 0);
      if (e % p < r) keep_ |= __mmask64{1} << e;
    }
    spread_ = _mm512_load_si512(spread_bytes);
  }
  // to (rows, p) = from (rows, r) with the zero bytes.
  void operator()(const std::int8_t* from, std::int64_t rows, std::int8_t* to) const {
    for (std::int64_t k = 0; k < rows; k += per_step_) {
      const std::int64_t count = rows - k < per_step_ ? rows - k : per_step_;
      const __m512i in = _mm512_maskz_loadu_epi8(avx512::byte_mask(count * r_), from + k * r_);
      _mm512_mask_storeu_epi8(to + k * p_, avx512::byte_mask(count * p_), _mm512_maskz_permutexvar_epi8(keep_, spread_, in));
    }
  }

 private:
  std::int64_t r_, p_, per_step_;
  __mmask64 keep_ = 0;
  __m512i spread_;
};

}  // namespace eggroll::cpu_int8::detail
