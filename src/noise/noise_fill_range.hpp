// The range walk shared by the SIMD noise levels (internal): splits [first, first + count) of a
// stream into whole "sets" of counter blocks written in place and partial sets (an unaligned
// start, a short tail) generated into a buffer and copied, so any range gives the oracle's bits.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "eggroll/noise/philox.hpp"

namespace eggroll::noise_simd {
// Internal linkage: each level's file gets its own copy compiled for its instruction set, so the
// linker can never hand one level's instructions to another.
namespace {

// Calls gen with n (1 <= n <= kMax) as a compile-time constant.
template <int kMax, typename T, typename Gen>
inline void gen_sets(int n, Gen& gen, std::uint32_t block, T* dst) {
  if constexpr (kMax > 1) {
    if (n < kMax) return gen_sets<kMax - 1>(n, gen, block, dst);
  }
  gen(std::integral_constant<int, kMax>{}, block, dst);
}

// gen(std::integral_constant<int, N>, block, dst) writes the kSetValues * N values of the
// kSetBlocks * N counter blocks starting at `block` to dst; whole sets go up to kMainSets per call.
template <int kPerBlock, int kSetBlocks, int kMainSets, typename T, typename Gen>
inline void fill_range(std::uint64_t first, std::uint64_t count, T* out, Gen&& gen) {
  constexpr std::uint64_t kSetValues = std::uint64_t{kPerBlock} * kSetBlocks;
  std::uint64_t e = first;
  const std::uint64_t end = first + count;
  while (e < end) {
    const auto block = static_cast<std::uint32_t>(e / kPerBlock);
    const std::uint64_t skip = e % kPerBlock, left = end - e;
    std::uint64_t step;
    if (skip == 0 && left >= kSetValues) {
      const auto n_sets = static_cast<int>(std::min<std::uint64_t>(kMainSets, left / kSetValues));
      gen_sets<kMainSets>(n_sets, gen, block, out);
      step = n_sets * kSetValues;
    } else {
      alignas(64) T tmp[kSetValues];
      gen(std::integral_constant<int, 1>{}, block, tmp);
      step = std::min(kSetValues - skip, left);
      std::memcpy(out, tmp + skip, step * sizeof(T));
    }
    out += step;
    e += step;
  }
}

// Philox4x32-10's round keys: round r uses key + r * (0x9E3779B9, 0xBB67AE85) mod 2^32.
struct PhiloxRoundKeys {
  std::uint32_t k0[10], k1[10];
};

inline PhiloxRoundKeys philox_round_keys(const PhiloxKey& key) {
  PhiloxRoundKeys rk;
  std::uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; ++r, k0 += 0x9E3779B9u, k1 += 0xBB67AE85u) {
    rk.k0[r] = k0;
    rk.k1[r] = k1;
  }
  return rk;
}

}  // namespace
}  // namespace eggroll::noise_simd
