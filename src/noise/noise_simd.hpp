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

// kInt8NormalTable followed by 4 zero bytes, so that a 32-bit load at any index stays inside
// (the SIMD levels gather 32-bit words from it and keep the low byte).
extern const std::int8_t kInt8NormalTablePadded[kNormalTableSize + 4];

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
