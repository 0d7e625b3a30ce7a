// The noise fills' SIMD levels (internal): the scalar oracles, the per-level kernels and the
// run-time choice between them. Every level writes the same bits as the scalar one.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "eggroll/noise/noise.hpp"

namespace eggroll {

// The level fill_normal, fill_int8 and fill_bits use: "scalar", "avx2" or "avx512". Also accepts
// "auto" (the best this machine runs) and "avx512_vnni" (run.simd's cpu spelling of avx512).
// Throws for a level the machine lacks. Meant for tests and benchmarks: the output is the same.
void set_noise_simd(const char* level);
// The levels this machine runs, lowest first.
std::vector<std::string> noise_simd_levels();

// The scalar oracles (the definitions of the streams; noise.hpp describes the layout).
void fill_normal_scalar(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, float* out);
void fill_int8_scalar(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::int8_t* out);
void fill_bits_scalar(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::uint32_t* out);

namespace noise_simd {

// kInt8NormalTable as the AVX-512 fills read it without a table read per value: the table
// (values 0..61, non-decreasing) rises by at most one inside each bucket of kInt8Bucket entries
// below kInt8TailStart, so there entry j is base[j / 32] plus one from offset step[j / 32] of its
// bucket on (step 32: no rise); the last 128 entries are tail[j - kInt8TailStart]. base of a tail
// bucket is 0x80 (no table value has that bit). Built on first use and checked: a table without the
// bucket property throws (regenerate it, or widen the tail).
inline constexpr int kInt8Bucket = 32;
inline constexpr int kInt8TailStart = kNormalTableSize - 128;
struct Int8Buckets {
  std::uint8_t base[128], step[128];
  std::int8_t tail[128];
};
const Int8Buckets& int8_buckets();

// kInt8NormalTable as the AVX2 fill reads it, by byte shuffles of 16 entries a register. The table
// is non-decreasing, so it is the largest of four levels that each give its value on their own
// range of indices j, 0 below that range and at most its value above it. The bucketed levels rise
// by at most one inside each bucket (stored: base + 1, and the offset of the rise, the bucket's
// size where there is none):
//   coarse: buckets of 64 entries, j >> 6, on [0, kInt8MidStart) (the buckets past it: the range's
//           top value);
//   mid:    buckets of 16, entry (j >> 4) & 15, on [kInt8MidStart, kInt8FineStart);
//   fine:   buckets of 8, entry (j >> 3) & 15, on [kInt8FineStart, kInt8LastStart) (entries 12-15:
//           the range's top value);
//   last:   the entries from kInt8LastStart on, as they are (two registers).
// Built on first use and checked: a table without these properties throws.
inline constexpr int kInt8MidStart = 3712, kInt8FineStart = 3968, kInt8LastStart = 4064;
struct Int8Levels {
  std::uint8_t coarse_base1[64], coarse_step[64], mid_base1[16], mid_step[16], fine_base1[16], fine_step[16];
  std::int8_t last[32];
};
const Int8Levels& int8_levels();

// Level kernels: same contract as fill_* for any first and count whose counter blocks are below
// 2^32 (the caller checks that). Defined only on x86-64, in noise_avx2.cpp and noise_avx512.cpp.
void fill_normal_avx2(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, float* out);
void fill_int8_avx2(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::int8_t* out);
void fill_bits_avx2(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::uint32_t* out);
void fill_normal_avx512(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, float* out);
// fill_normal_avx512 with the table read by one 16-lane gather per 16 values (wide) or two 8-lane
// ones; fill_normal_avx512 picks by the CPU's vendor. Both write the same bits (tests run both).
void fill_normal_avx512_gathers(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, float* out,
                                bool wide);
void fill_int8_avx512(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::int8_t* out);
// fill_int8_avx512's two lookups of Int8Buckets: word permutes (AVX-512BW, 32 values a step) and
// byte permutes (AVX-512 VBMI, noise_avx512_vbmi.cpp, 64 a step; only where the CPU has VBMI).
// fill_int8_avx512 takes the bytes where it can. Both write the same bits (tests run both).
void fill_int8_avx512_words(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::int8_t* out);
void fill_int8_avx512_vbmi(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::int8_t* out);
bool cpu_has_vbmi();
void fill_bits_avx512(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::uint32_t* out);

}  // namespace noise_simd
}  // namespace eggroll
