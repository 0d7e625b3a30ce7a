// Tests of the integer EGGROLL helpers (ALGORITHM.md 2.1, 2.3, 2.5, 2.6): exact EXP2/THRESH tables
// (checked with big integers), LOG2, the integer log-likelihood's error, isqrt, the rank shift,
// the libm-free normal quantile, the alpha schedule and the update threshold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "eggroll/core/error.hpp"
#include "eggroll/quant/qmath.hpp"

namespace eggroll::q {
namespace {

// ---- a tiny unsigned big integer: little-endian 32-bit limbs ----

using Big = std::vector<std::uint32_t>;

Big big_from(std::uint64_t v) {
  Big out;
  while (v != 0) { out.push_back(static_cast<std::uint32_t>(v)); v >>= 32; }
  return out;
}

Big big_mul(const Big& a, const Big& b) {
  Big out(a.size() + b.size(), 0);
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::uint64_t carry = 0;
    for (std::size_t j = 0; j < b.size(); ++j) {
      const std::uint64_t cur = std::uint64_t{a[i]} * b[j] + out[i + j] + carry;
      out[i + j] = static_cast<std::uint32_t>(cur);
      carry = cur >> 32;
    }
    out[i + b.size()] += static_cast<std::uint32_t>(carry);
  }
  while (!out.empty() && out.back() == 0) out.pop_back();
  return out;
}

// x^16 by four squarings.
Big pow16(std::uint64_t x) {
  Big r = big_from(x);
  for (int i = 0; i < 4; ++i) r = big_mul(r, r);
  return r;
}

// Number of significant bits (0 for zero).
int bit_length(const Big& a) {
  if (a.empty()) return 0;
  return 32 * static_cast<int>(a.size() - 1) + (32 - __builtin_clz(a.back()));
}

// floor(16 log2(S / 16)) = floor(log2(S^16)) - 64 = bit_length(S^16) - 65, exactly.
int log2_by_bigint(std::uint32_t s) { return bit_length(pow16(s)) - 65; }

// ---- tables ----

// Compares normalised big integers: -1, 0, 1.
int big_cmp(const Big& a, const Big& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  for (std::size_t i = a.size(); i-- > 0;) {
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  }
  return 0;
}

Big big_pow2(int e) {
  Big out(static_cast<std::size_t>(e / 32 + 1), 0);
  out.back() = 1u << (e % 32);
  return out;
}

TEST(LoglikTables, Exp2IsExactFloor) {
  for (int u = 0; u < 256; ++u) {
    const Big p = big_pow2(64 + u);
    const auto e = static_cast<std::uint64_t>(kExp2[u]);
    EXPECT_LE(big_cmp(pow16(e), p), 0) << "EXP2[" << u << "] = " << e;
    EXPECT_GT(big_cmp(pow16(e + 1), p), 0) << "EXP2[" << u << "] = " << e;
  }
  EXPECT_EQ(kExp2[0], 16);
  EXPECT_EQ(kExp2[128], 4096);
  EXPECT_EQ(kExp2[255], 1004119);
  EXPECT_LT(256 * static_cast<std::int64_t>(kExp2[255]), std::int64_t{1} << 28);  // the sum fits in 2^28
}

TEST(LoglikTables, ThreshIsLeastRoot) {
  for (int k = 0; k < kLog2Entries; ++k) {
    const Big p = big_pow2(k + 64);
    const auto s = static_cast<std::uint64_t>(kLog2Thresh[k]);
    EXPECT_GE(big_cmp(pow16(s), p), 0) << "THRESH[" << k << "] = " << s;
    EXPECT_LT(big_cmp(pow16(s - 1), p), 0) << "THRESH[" << k << "] = " << s;
    if (k > 0) {
      EXPECT_LE(kLog2Thresh[k - 1], kLog2Thresh[k]);
    }
    if (k % 16 == 0) {
      EXPECT_EQ(kLog2Thresh[k], 1u << (k / 16 + 4));
    }
  }
  EXPECT_EQ(kLog2Thresh[kLog2Entries - 1], 1u << 28);
}

// ---- LOG2 ----

TEST(Log2Fixed, AtEveryThreshold) {
  for (int k = 0; k < kLog2Entries - 1; ++k) {
    const std::uint32_t s = kLog2Thresh[k];
    EXPECT_EQ(log2_fixed(s), log2_by_bigint(s)) << "S = " << s;
    EXPECT_GE(log2_fixed(s), k) << "S = THRESH[" << k << "]";
    if (s > 16) {
      EXPECT_EQ(log2_fixed(s - 1), log2_by_bigint(s - 1)) << "S = " << s - 1;
      EXPECT_LT(log2_fixed(s - 1), k) << "S = THRESH[" << k << "] - 1";
    }
    EXPECT_EQ(log2_fixed(s + 1), log2_by_bigint(s + 1)) << "S = " << s + 1;
  }
  EXPECT_EQ(log2_fixed(16), 0);
  EXPECT_EQ(log2_fixed(17), 1);
  EXPECT_EQ(log2_fixed(20), 5);  // THRESH[4] = THRESH[5] = 20
  EXPECT_EQ(log2_fixed(4096), 128);
  EXPECT_EQ(log2_fixed((1u << 28) - 1), 383);
}

TEST(Log2Fixed, MatchesBigIntegerDefinition) {
  for (std::uint32_t s = 16; s < 20000; ++s) ASSERT_EQ(log2_fixed(s), log2_by_bigint(s)) << "S = " << s;
  std::mt19937 rng(12345);
  for (int i = 0; i < 20000; ++i) {
    const std::uint32_t s = 16 + rng() % ((1u << 28) - 16);
    ASSERT_EQ(log2_fixed(s), log2_by_bigint(s)) << "S = " << s;
  }
}

// ---- log-likelihood ----

// log2 sum_u 2^(l_u/16) of one row of int8 logits, in double.
double log2_sum_exp2(const std::int8_t* logits) {
  double sum = 0.0;
  for (int j = 0; j < 256; ++j) sum += std::exp2(logits[j] / 16.0);
  return std::log2(sum);
}

// 16 * (ll_t / 16 - log2 p(t)) in 1/16 bit, with log2 p(t) = l_t / 16 - log2_sum.
double ll_error_sixteenths(const std::int8_t* logits, double log2_sum, int t) {
  return loglik(logits, t) - 16.0 * (logits[t] / 16.0 - log2_sum);
}

double ll_error_sixteenths(const std::int8_t* logits, int t) {
  return ll_error_sixteenths(logits, log2_sum_exp2(logits), t);
}

// ll >= 16 log2 p exactly (LOG2 floors and EXP2 floors both raise ll), and below by < 2.1.
struct ErrorRange {
  double lo = 1e9, hi = -1e9;
  void add(double e) { lo = std::min(lo, e); hi = std::max(hi, e); }
};

TEST(Loglik, GoldenValues) {
  std::vector<std::int8_t> row(256, 0);
  EXPECT_EQ(loglik(row.data(), 7), -128);  // exactly -8 bits: EXP2[128] = 2^12, Ssum = 2^20
  std::fill(row.begin(), row.end(), 127);
  EXPECT_EQ(loglik(row.data(), 0), -127);
  std::fill(row.begin(), row.end(), -127);
  EXPECT_EQ(loglik(row.data(), 255), -127);
  std::fill(row.begin(), row.end(), -128);  // u = 0 is handled too
  EXPECT_EQ(loglik(row.data(), 3), -128);
  row.assign(256, -127);
  row[0] = 127;
  EXPECT_EQ(loglik(row.data(), 0), 0);
  EXPECT_EQ(loglik(row.data(), 1), -254);
}

TEST(Loglik, ErrorOnRandomRows) {
  std::mt19937 rng(20240601);
  std::vector<std::int8_t> row(256);
  ErrorRange range;
  for (int r = 0; r < 2000; ++r) {
    // Half the rows uniform over [-127, 127]; half peaked: a few large logits over a low floor.
    for (auto& l : row) l = static_cast<std::int8_t>(static_cast<int>(rng() % 255) - 127);
    if (r % 2 == 1) {
      for (auto& l : row) l = static_cast<std::int8_t>(l / 4 - 80);
      for (int i = 0; i < 3; ++i) row[rng() % 256] = static_cast<std::int8_t>(100 + rng() % 28);
    }
    const double log2_sum = log2_sum_exp2(row.data());
    for (int t = 0; t < 256; ++t) range.add(ll_error_sixteenths(row.data(), log2_sum, t));
  }
  std::printf("random rows: ll - 16 log2 p in [%.4f, %.4f] (1/16 bit)\n", range.lo, range.hi);
  EXPECT_GT(range.lo, -1e-9);
  EXPECT_LT(range.hi, 2.1);
}

TEST(Loglik, ErrorOnTwoValuedRows) {
  std::vector<std::int8_t> row(256);
  ErrorRange range;
  for (int count : {1, 128, 255}) {
    for (int a = -127; a <= 127; ++a) {
      for (int b = -127; b <= 127; b += (count == 128 ? 1 : 2)) {
        std::fill(row.begin(), row.begin() + count, static_cast<std::int8_t>(a));
        std::fill(row.begin() + count, row.end(), static_cast<std::int8_t>(b));
        range.add(ll_error_sixteenths(row.data(), 0));    // target with value a
        range.add(ll_error_sixteenths(row.data(), 255));  // target with value b
      }
    }
  }
  std::printf("two-valued rows: ll - 16 log2 p in [%.4f, %.4f] (1/16 bit)\n", range.lo, range.hi);
  EXPECT_GT(range.lo, -1e-9);
  EXPECT_LT(range.hi, 2.1);
}

TEST(Loglik, ErrorOnExtremes) {
  std::vector<std::int8_t> row(256);
  for (int v : {127, -127, 0}) {
    std::fill(row.begin(), row.end(), static_cast<std::int8_t>(v));
    const double e = ll_error_sixteenths(row.data(), 5);
    EXPECT_GE(e, -1e-9) << "all " << v;
    EXPECT_LT(e, 2.1) << "all " << v;
  }
  row.assign(256, -127);
  row[9] = 127;
  for (int t : {9, 0, 255}) {
    const double e = ll_error_sixteenths(row.data(), t);
    EXPECT_GE(e, -1e-9) << "target " << t;
    EXPECT_LT(e, 2.1) << "target " << t;
  }
}

// ---- integer helpers ----

TEST(Isqrt, SmallValuesExhaustive) {
  for (std::int64_t n = 0; n <= 1000000; ++n) {
    const std::int64_t r = isqrt(n);
    ASSERT_TRUE(r * r <= n && (r + 1) * (r + 1) > n) << "n = " << n << " gave " << r;
  }
}

TEST(Isqrt, NearSquaresUpTo2To62) {
  for (std::int64_t k : {std::int64_t{1000003}, std::int64_t{67108863}, std::int64_t{67108864},
                         std::int64_t{94906265}, std::int64_t{1} << 31, (std::int64_t{1} << 31) + 12345,
                         std::int64_t{3037000498}}) {  // (3037000498 + 1)^2 < 2^63
    EXPECT_EQ(isqrt(k * k), k);
    EXPECT_EQ(isqrt(k * k - 1), k - 1);
    EXPECT_EQ(isqrt(k * k + 1), k);
    EXPECT_EQ(isqrt(k * k + 2 * k), k);      // (k + 1)^2 - 1
    EXPECT_EQ(isqrt(k * k + 2 * k + 1), k + 1);
  }
  EXPECT_EQ(isqrt(std::int64_t{1} << 62), std::int64_t{1} << 31);
  EXPECT_EQ(isqrt((std::int64_t{1} << 62) - 1), (std::int64_t{1} << 31) - 1);
  EXPECT_EQ(isqrt(INT64_MAX), 3037000499);
  EXPECT_THROW(isqrt(-1), Error);
}

TEST(RankShift, OneToSixteen) {
  const int expected[17] = {0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2};
  for (int r = 1; r <= 16; ++r) EXPECT_EQ(rank_shift(r), expected[r]) << "r = " << r;
  EXPECT_EQ(rank_shift(32), 3);
  EXPECT_THROW(rank_shift(0), Error);
}

// ---- normal quantile, schedule, threshold ----

TEST(NormalQuantile, KnownValues) {
  EXPECT_EQ(normal_quantile(0.5), 0.0);
  EXPECT_NEAR(normal_quantile(0.975), 1.959963984540054, 1e-9);
  EXPECT_NEAR(normal_quantile(0.995), 2.5758293035489004, 1e-9);
  EXPECT_NEAR(normal_quantile(0.9999), 3.719016485455709, 1e-9);
  EXPECT_NEAR(normal_quantile(0.8413447460685429), 1.0, 1e-9);
  EXPECT_NEAR(normal_quantile(0.025), -1.959963984540054, 1e-9);
  // Tails (values from a 40-digit evaluation): the continued fraction keeps full precision.
  EXPECT_NEAR(normal_quantile(1e-15), -7.941345326170997, 1e-9);
  EXPECT_NEAR(normal_quantile(1.0 - 1e-15), 7.941444487415979, 1e-9);  // 1 - 1e-15 rounds up
  EXPECT_NEAR(normal_quantile(1e-300), -37.047096299361199, 1e-9);
  EXPECT_THROW(normal_quantile(0.0), Error);
  EXPECT_THROW(normal_quantile(1.0), Error);
  EXPECT_THROW(normal_quantile(-0.1), Error);
  EXPECT_THROW(normal_quantile(std::nan("")), Error);
}

TEST(NormalQuantile, SymmetricAndMonotone) {
  for (double p : {0.5000001, 0.6, 0.75, 0.8413447460685429, 0.975, 0.995, 0.9999, 1.0 - 1e-12, 1.0 - 1e-15}) {
    EXPECT_EQ(normal_quantile(1.0 - p), -normal_quantile(p)) << "p = " << p;  // 1 - p is exact here
  }
  double previous = normal_quantile(1e-15);
  for (int i = 1; i < 1000; ++i) {
    const double z = normal_quantile(i / 1000.0);
    EXPECT_GT(z, previous) << "p = " << i / 1000.0;
    previous = z;
  }
  EXPECT_GT(normal_quantile(1.0 - 1e-15), previous);
}

TEST(AlphaSchedule, Values) {
  EXPECT_EQ(alpha_schedule(4000, 4, 1000), 1.0 / 61.0);
  EXPECT_EQ(alpha_schedule(0, 4, 1000), 1.0);
  EXPECT_EQ(alpha_schedule(1000, 4, 1000), 1.0 / 16.0);
  EXPECT_EQ(alpha_schedule(500, 1, 1000), 1.0 / 1.5);
  EXPECT_THROW(alpha_schedule(-1, 4, 1000), Error);
  EXPECT_THROW(alpha_schedule(10, 4, 0), Error);
}

TEST(UpdateThreshold, HandComputedExamples) {
  // ceil(v sqrt(P r) z_{1 - alpha/2}), the products evaluated to 20 digits by hand (mpmath).
  EXPECT_EQ(update_threshold(1.0, 4, 1, 0.05), 4);            // 2 * 1.95996... = 3.9199...
  EXPECT_EQ(update_threshold(100.0, 100, 1, 0.01), 2576);     // 1000 * 2.57583... = 2575.829...
  EXPECT_EQ(update_threshold(243.5, 64, 4, 0.05), 7637);      // 3896 * 1.95996... = 7636.0197...
  EXPECT_EQ(update_threshold(200.0, 32768, 2, 1.0 / 61.0), 122882);  // 51200 * 2.40004 = 122881.86...
  EXPECT_EQ(update_threshold(10.0, 1, 1, 1e-4), 39);          // 10 * 3.89059... = 38.906
  EXPECT_EQ(update_threshold(1.0, 1, 1, 1e-15), 9);           // 8.02686...
  EXPECT_EQ(update_threshold(243.5, 64, 4, 1.0), 0);          // z_0.5 = 0: only Z = 0 is excluded by the caller
  EXPECT_EQ(update_threshold(243.5, 0, 4, 0.05), 0);          // no pairs
  EXPECT_THROW(update_threshold(1.0, 4, 1, 0.0), Error);
  EXPECT_THROW(update_threshold(1.0, 4, 1, 1.5), Error);
  EXPECT_THROW(update_threshold(-1.0, 4, 1, 0.05), Error);
  EXPECT_THROW(update_threshold(1.0, -1, 1, 0.05), Error);
  EXPECT_THROW(update_threshold(1.0, 4, 0, 0.05), Error);
}

}  // namespace
}  // namespace eggroll::q
