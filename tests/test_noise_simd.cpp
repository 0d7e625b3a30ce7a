// The noise fills' SIMD levels against the scalar oracles (DESIGN.md contract 1): for every level
// this machine runs, fill_normal, fill_int8 and fill_bits write the oracle's bits for random
// streams and ranges (unaligned starts, short and long counts, the end of the counter range) and
// nothing outside the range.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "eggroll/core/error.hpp"
#include "eggroll/noise/noise.hpp"
#include "noise/noise_simd.hpp"

namespace eggroll {
namespace {

// The levels this machine runs, scalar first.
std::vector<std::string> available_levels() { return noise_simd_levels(); }

// Forces a level for one scope, then returns to the detected one.
class LevelScope {
 public:
  explicit LevelScope(const std::string& level) { set_noise_simd(level.c_str()); }
  ~LevelScope() { set_noise_simd("auto"); }
};

struct Case {
  NoiseStream stream;
  std::uint64_t first, count;
};

constexpr std::uint64_t kLastValue = (std::uint64_t{1} << 35) - 1;  // last element of a normal/int8 stream
constexpr int kGuard = 80;                                            // poisoned slots after the range

// Random streams and ranges: counts 0..100 at any start, then longer counts and far starts.
std::vector<Case> random_cases(int n_cases, std::uint64_t rng_seed) {
  std::mt19937_64 rng(rng_seed);
  std::vector<Case> cases;
  for (int i = 0; i < n_cases; ++i) {
    const auto tag = static_cast<NoiseTag>(rng() % 5);
    const NoiseStream s = noise_stream(rng(), rng(), rng() & 0xFFFFFFFFu, rng() & 0xFFFFFFFFu, tag);
    std::uint64_t count = static_cast<std::uint64_t>(i % 101);                      // 0..100 each
    if (i % 7 == 6) count = 101 + rng() % 5000;                                      // longer tails
    std::uint64_t first = rng() % 300;                                               // any first % 8
    if (i % 5 == 4) first = rng() % (kLastValue - count);                            // far into the stream
    cases.push_back({s, first, count});
  }
  // Long fills and the very end of the counter range (SIMD lanes past it must be dropped).
  std::mt19937_64 more(rng_seed + 1);
  const NoiseStream s = noise_stream(more(), 7, 3, 11, NoiseTag::factors);
  cases.push_back({s, 0, 1u << 20});
  cases.push_back({s, 5, (1u << 20) + 3});
  cases.push_back({s, 2048 + 256 + 3, 2304});
  for (std::uint64_t back : {1, 7, 8, 9, 64, 100, 129, 1000}) cases.push_back({s, kLastValue + 1 - back, back});
  return cases;
}

// Runs fill at the given level into a poisoned buffer with a guard band; returns the range only.
template <typename T, typename Fill>
std::vector<T> fill_at(const std::string& level, const Case& c, Fill fill, unsigned char poison) {
  std::vector<T> out(c.count + kGuard);
  std::memset(out.data(), poison, out.size() * sizeof(T));
  {
    LevelScope scope(level);
    fill(c.stream, c.first, c.count, out.data());
  }
  for (int g = 0; g < kGuard; ++g) {
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, &out[c.count + g], sizeof(T));
    for (unsigned char b : bytes) EXPECT_EQ(b, poison) << level << ": wrote past the range at +" << g;
  }
  out.resize(c.count);
  return out;
}

template <typename T, typename Fill, typename Oracle>
void expect_levels_match_oracle(Fill fill, Oracle oracle, std::uint64_t values_per_block, std::uint64_t rng_seed) {
  const std::vector<std::string> levels = available_levels();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), "scalar");
  for (Case c : random_cases(400, rng_seed)) {
    // fill_bits counts words (4 per block): scale the far starts into its range.
    if (values_per_block == 4 && c.first + c.count > kLastValue / 2 + 1) c.first = kLastValue / 2 + 1 - c.count;
    std::vector<T> expected(c.count);
    oracle(c.stream, c.first, c.count, expected.data());
    for (const std::string& level : levels) {
      for (unsigned char poison : {0xA5, 0x5A}) {
        const std::vector<T> got = fill_at<T>(level, c, fill, poison);
        // (an empty vector's data() may be null, which memcmp may not be given even for 0 bytes)
        ASSERT_TRUE(c.count == 0 || std::memcmp(got.data(), expected.data(), c.count * sizeof(T)) == 0)
            << "level " << level << ", first " << c.first << ", count " << c.count << ", tag " << c.stream.tag
            << ", pair " << c.stream.pair << ", epoch " << c.stream.epoch;
      }
    }
  }
}

TEST(NoiseSimd, LevelsAreListedAndSettable) {
  const std::vector<std::string> levels = available_levels();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), "scalar");
  EXPECT_EQ(std::string(noise_simd_level()), levels.back());  // "auto" picks the best
  for (const std::string& level : levels) {
    LevelScope scope(level);
    EXPECT_EQ(std::string(noise_simd_level()), level);
  }
  EXPECT_THROW(set_noise_simd("sse9"), Error);
  EXPECT_THROW(set_noise_simd(nullptr), Error);
  std::printf("noise SIMD levels here: %zu (best %s)\n", levels.size(), levels.back().c_str());
}

TEST(NoiseSimd, FillNormalEqualsScalarOracle) {
  expect_levels_match_oracle<float>(fill_normal, fill_normal_scalar, 8, 101);
}

#if defined(__x86_64__)
// The AVX-512 normal fill's two ways to read the table (one 16-lane gather or two 8-lane ones; the
// vendor picks one at run time, so a machine runs only one through fill_normal) against the oracle.
TEST(NoiseSimd, FillNormalBothGatherWidthsEqualScalarOracle) {
  const std::vector<std::string> levels = available_levels();
  if (levels.back() != "avx512") GTEST_SKIP() << "no AVX-512 here";
  for (const Case& c : random_cases(200, 103)) {
    std::vector<float> expected(c.count);
    fill_normal_scalar(c.stream, c.first, c.count, expected.data());
    for (bool wide : {false, true}) {
      std::vector<float> got(c.count + kGuard, -1.0f);
      noise_simd::fill_normal_avx512_gathers(c.stream, c.first, c.count, got.data(), wide);
      for (int g = 0; g < kGuard; ++g) ASSERT_EQ(got[c.count + g], -1.0f) << "wide " << wide << ": wrote past the range";
      ASSERT_TRUE(c.count == 0 || std::memcmp(got.data(), expected.data(), c.count * sizeof(float)) == 0)
          << "wide " << wide << ", first " << c.first << ", count " << c.count;
    }
  }
}
#endif

#if defined(__x86_64__)
// fill_int8 at AVX-512 by word permutes and, where the CPU has VBMI, by byte permutes (the one it
// takes where it can), each against the oracle.
TEST(NoiseSimd, FillInt8BothLookupsEqualScalarOracle) {
  const std::vector<std::string> levels = available_levels();
  if (levels.back() != "avx512") GTEST_SKIP() << "no AVX-512 here";
  for (const Case& c : random_cases(200, 107)) {
    std::vector<std::int8_t> expected(c.count);
    fill_int8_scalar(c.stream, c.first, c.count, expected.data());
    for (bool bytes : {false, true}) {
      if (bytes && !noise_simd::cpu_has_vbmi()) continue;
      std::vector<std::int8_t> got(c.count + kGuard, 99);
      (bytes ? noise_simd::fill_int8_avx512_vbmi : noise_simd::fill_int8_avx512_words)(c.stream, c.first, c.count,
                                                                                      got.data());
      for (int g = 0; g < kGuard; ++g) ASSERT_EQ(got[c.count + g], 99) << "bytes " << bytes << ": wrote past the range";
      ASSERT_TRUE(c.count == 0 || std::memcmp(got.data(), expected.data(), c.count) == 0)
          << "bytes " << bytes << ", first " << c.first << ", count " << c.count;
    }
  }
}
#endif

TEST(NoiseSimd, FillInt8EqualsScalarOracle) {
  expect_levels_match_oracle<std::int8_t>(fill_int8, fill_int8_scalar, 8, 202);
}

TEST(NoiseSimd, FillBitsEqualsScalarOracle) {
  expect_levels_match_oracle<std::uint32_t>(fill_bits, fill_bits_scalar, 4, 303);
}

TEST(NoiseSimd, RangePastTheCounterEndThrowsAtEveryLevel) {
  const NoiseStream s = noise_stream(1, 2, 3, 4, NoiseTag::factors);
  std::vector<float> f(16);
  std::vector<std::int8_t> q(16);
  std::vector<std::uint32_t> w(16);
  for (const std::string& level : available_levels()) {
    LevelScope scope(level);
    EXPECT_THROW(fill_normal(s, kLastValue - 4, 6, f.data()), Error) << level;
    EXPECT_THROW(fill_int8(s, kLastValue + 1, 1, q.data()), Error) << level;
    EXPECT_THROW(fill_bits(s, kLastValue / 2, 2, w.data()), Error) << level;
    EXPECT_NO_THROW(fill_bits(s, kLastValue / 2, 1, w.data())) << level;
    EXPECT_NO_THROW(fill_normal(s, kLastValue + 1, 0, f.data())) << level;
  }
}

// The AVX-512 int8 level finds a magnitude from bucket tables instead of reading the table: that
// needs kInt8NormalTable non-decreasing, rising by at most one inside each bucket of 32 entries
// below its last 128 (which it reads directly), with values below 128. The AVX2 level reads it by
// byte shuffles of bucket tables too (Int8Levels), built and checked on first use.
TEST(NoiseSimd, Int8TableFitsTheSimdLookups) {
  EXPECT_EQ(kInt8NormalTable[0], 0);
  for (int j = 1; j < kNormalTableSize; ++j) ASSERT_LE(kInt8NormalTable[j - 1], kInt8NormalTable[j]) << j;
  for (int h = 0; h < (kNormalTableSize - 128) / 32; ++h)
    ASSERT_LE(kInt8NormalTable[32 * h + 31] - kInt8NormalTable[32 * h], 1) << "bucket " << h;
  EXPECT_EQ(kInt8NormalTable[kNormalTableSize - 1], 61);
  EXPECT_NO_THROW(noise_simd::int8_buckets());
  EXPECT_NO_THROW(noise_simd::int8_levels());
}

TEST(NoiseSimd, NoiseTablesAreTheSameAtEveryLevel) {
  std::vector<float> normal_ref;
  std::vector<std::int8_t> int8_ref;
  for (const std::string& level : available_levels()) {
    LevelScope scope(level);
    const NoiseTable table(9, 17);
    const Int8NoiseTable int8_table(9, 17);
    std::vector<float> normal(table.data(), table.data() + table.size());
    std::vector<std::int8_t> int8(int8_table.data(), int8_table.data() + int8_table.size());
    if (normal_ref.empty()) {
      normal_ref = normal;
      int8_ref = int8;
      continue;
    }
    EXPECT_EQ(0, std::memcmp(normal.data(), normal_ref.data(), normal.size() * sizeof(float))) << level;
    EXPECT_EQ(int8, int8_ref) << level;
  }
}

}  // namespace
}  // namespace eggroll
