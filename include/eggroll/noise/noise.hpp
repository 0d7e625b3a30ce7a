// Noise as a pure function of (seed, parameter id, effective epoch, pair, element) (DESIGN.md
// contract 1): key derivation, the normal transform, and filling factor blocks.
//
// Stream layout: for a stream (seed, param_id, epoch, pair, tag) the Philox key is
// mix64(seed, param_id) split into two 32-bit words and the counter is
// {element / 8, tag, pair, epoch}. The four 32-bit outputs give eight 16-bit draws, element
// e taking the low half of word (e % 8) / 2 when e is even and the high half when it is odd.
// A draw d becomes a standard-normal-shaped value by the symmetric quantile table:
// sign from bit 15, magnitude kNormalTable[d & 4095] (4096 half-normal midpoint quantiles
// scaled to unit mean square; scripts/gen_normal_table.py).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "eggroll/core/system.hpp"
#include "eggroll/noise/philox.hpp"

namespace eggroll {

inline constexpr int kNormalTableSize = 4096;
extern const float kNormalTable[kNormalTableSize];

// Stable 64-bit id of a parameter name (FNV-1a 64), so adding a layer keeps the others' noise.
std::uint64_t param_id(std::string_view name);

// SplitMix64 finaliser: the mixing step used by every key and offset derivation.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Streams of one (parameter, epoch, pair): tag tells apart the uses of one pair's noise.
enum class NoiseTag : std::uint32_t {
  factors = 0,      // low-rank block: B (n x r) then A (m x r), or a vector's eps
  full = 1,         // open_es full-rank matrices
  sparse_index = 2, // sparse noiser: entry positions
  table = 3,        // filling the noise table itself
  init = 4,         // parameter initialisation
};

struct NoiseStream {
  PhiloxKey key;
  std::uint32_t tag, pair, epoch;
};

NoiseStream noise_stream(std::uint64_t seed, std::uint64_t param, std::uint64_t epoch,
                         std::uint64_t pair, NoiseTag tag);

inline float normal_from_bits(std::uint32_t draw16) {
  float magnitude = kNormalTable[draw16 & (kNormalTableSize - 1)];
  return (draw16 & 0x8000u) ? -magnitude : magnitude;
}

// Writes elements [first, first + count) of the stream's normal values to out.
void fill_normal(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, float* out);

// Integer noise (ALGORITHM.md 2.2): e = clip(trunc(16 z)) of the same draws, so the int8 value of
// a draw is sign * kInt8NormalTable[d & 4095] with kInt8NormalTable[j] = trunc(16 kNormalTable[j]).
extern const std::int8_t kInt8NormalTable[kNormalTableSize];
inline std::int8_t int8_from_bits(std::uint32_t draw16) {
  const std::int8_t magnitude = kInt8NormalTable[draw16 & (kNormalTableSize - 1)];
  return (draw16 & 0x8000u) ? static_cast<std::int8_t>(-magnitude) : magnitude;
}
void fill_int8(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::int8_t* out);
// The exact mean square v of the int8 noise: sum_j kInt8NormalTable[j]^2 / 4096 (a dyadic
// rational, exact in double), the v of the discrete update's z-test.
double int8_noise_variance();

// Writes count raw 32-bit words of the stream (word w = output w % 4 of counter block w / 4).
void fill_bits(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::uint32_t* out);

// The SIMD level the fills above run at ("scalar", "avx2" or "avx512"), chosen once from the CPU.
// Every level writes the same bits, so it never changes a result, only the speed.
const char* noise_simd_level();

// The offset of a pair's slice in a noise table of table_size values holding slice_len values
// (ALGORITHM.md 1.6): H(seed, param, epoch, pair) mod (table_size - slice_len + 1), with
// H = mix64 chained over the key words.
std::uint64_t table_offset(std::uint64_t seed, std::uint64_t param, std::uint64_t epoch,
                           std::uint64_t pair, std::uint64_t table_size, std::uint64_t slice_len);

// The pre-generated noise table of ALGORITHM.md 1.6: 2^log2_size normal values drawn from the
// generator with the key (seed, param_id("noise_table")).
class NoiseTable {
 public:
  NoiseTable(std::uint64_t seed, int log2_size);
  const float* data() const { return values_.get(); }
  std::uint64_t size() const { return size_; }
  // The slice of a pair's factors (or a vector's values): slice_len values from table_offset.
  const float* slice(std::uint64_t param, std::uint64_t epoch, std::uint64_t pair,
                     std::uint64_t slice_len) const {
    return data() + table_offset(seed_, param, epoch, pair, size(), slice_len);
  }

 private:
  std::uint64_t seed_;
  HugePageArray<float> values_;  // read at random offsets: on huge pages where the system has them
  std::uint64_t size_;
};

// The int8 noise table: the int8 transform of the same draws as NoiseTable (q_eggroll).
class Int8NoiseTable {
 public:
  Int8NoiseTable(std::uint64_t seed, int log2_size);
  const std::int8_t* data() const { return values_.get(); }
  std::uint64_t size() const { return size_; }
  const std::int8_t* slice(std::uint64_t param, std::uint64_t epoch, std::uint64_t pair,
                           std::uint64_t slice_len) const {
    return data() + table_offset(seed_, param, epoch, pair, size(), slice_len);
  }

 private:
  std::uint64_t seed_;
  HugePageArray<std::int8_t> values_;  // read at random offsets: on huge pages where the system has them
  std::uint64_t size_;
};

}  // namespace eggroll
