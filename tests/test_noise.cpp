// Tests of the noise layer (DESIGN.md contract 1, ALGORITHM.md 1.1 and 1.6): Philox4x32-10
// known answers, parameter ids, stream filling, the moments of the normal transform, golden
// factor blocks from the generator and from the table, table offsets and their collisions.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <thread>
#include <unordered_map>
#include <vector>

#include "eggroll/backend/backend.hpp"
#include "eggroll/core/error.hpp"
#include "eggroll/es/noiser.hpp"
#include "eggroll/noise/noise.hpp"
#include "eggroll/noise/philox.hpp"

namespace eggroll {
namespace {

// ---- Philox4x32-10 ----

// Known-answer vectors of Random123 (kat_vectors, philox4x32 with 10 rounds).
TEST(Philox, KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            (PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

// ---- parameter ids and keys ----

TEST(ParamId, IsFnv1a64AndStable) {
  // FNV-1a 64 reference values: the empty string is the offset basis.
  EXPECT_EQ(param_id(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(param_id("a"), 0xaf63dc4c8601ec8cull);
  // Pinned: changing it changes every run's noise.
  EXPECT_EQ(param_id("layers.0.weight"), 0x718a5d75ec8bf0d9ull);
  EXPECT_NE(param_id("layers.0.weight"), param_id("layers.0.bias"));
  EXPECT_NE(param_id("layers.0.weight"), param_id("layers.1.weight"));
}

TEST(NoiseStream, CounterWordsAndRangeChecks) {
  const NoiseStream s = noise_stream(7, 11, 3, 5, NoiseTag::full);
  EXPECT_EQ(s.tag, 1u);
  EXPECT_EQ(s.pair, 5u);
  EXPECT_EQ(s.epoch, 3u);
  const std::uint64_t k = mix64(7 ^ mix64(11));
  EXPECT_EQ(s.key[0], static_cast<std::uint32_t>(k));
  EXPECT_EQ(s.key[1], static_cast<std::uint32_t>(k >> 32));
  EXPECT_THROW(noise_stream(7, 11, std::uint64_t{1} << 32, 0, NoiseTag::factors), Error);
  EXPECT_THROW(noise_stream(7, 11, 0, std::uint64_t{1} << 32, NoiseTag::factors), Error);
}

TEST(FillNormal, ElementLayoutFollowsTheHeader) {
  // Element e: the low half of word (e % 8) / 2 of counter block e / 8 when e is even, else the high half.
  const NoiseStream s = noise_stream(42, param_id("x"), 1, 2, NoiseTag::factors);
  std::vector<float> v(24);
  fill_normal(s, 0, v.size(), v.data());
  for (std::uint32_t e = 0; e < v.size(); ++e) {
    const PhiloxCounter w = philox4x32_10({e / 8, s.tag, s.pair, s.epoch}, s.key);
    const std::uint32_t word = w[(e % 8) / 2];
    EXPECT_EQ(v[e], normal_from_bits((e & 1) ? word >> 16 : word & 0xFFFFu)) << "element " << e;
  }
  std::vector<std::uint32_t> bits(9);
  fill_bits(s, 0, bits.size(), bits.data());
  for (std::uint32_t w = 0; w < bits.size(); ++w)
    EXPECT_EQ(bits[w], philox4x32_10({w / 4, s.tag, s.pair, s.epoch}, s.key)[w % 4]);
}

TEST(FillNormal, AnyRangeEqualsTheSameElementsOfAFullFill) {
  const NoiseStream s = noise_stream(3, param_id("layers.2.weight"), 9, 17, NoiseTag::factors);
  constexpr std::uint64_t kLen = 300;
  std::vector<float> all(kLen);
  fill_normal(s, 0, kLen, all.data());
  std::vector<std::uint32_t> all_bits(kLen);
  fill_bits(s, 0, kLen, all_bits.data());
  for (std::uint64_t first : {0, 1, 3, 7, 8, 9, 15, 16, 63, 129}) {
    for (std::uint64_t count : {0, 1, 2, 5, 7, 8, 9, 31, 100, 171}) {
      if (first + count > kLen) continue;
      std::vector<float> part(count + 1, 12345.0f);  // one guard value past the range
      fill_normal(s, first, count, part.data());
      for (std::uint64_t i = 0; i < count; ++i)
        ASSERT_EQ(part[i], all[first + i]) << "first " << first << " count " << count << " i " << i;
      EXPECT_EQ(part[count], 12345.0f) << "fill_normal wrote past its range";
      std::vector<std::uint32_t> pbits(count + 1, 0xdeadbeefu);
      fill_bits(s, first, count, pbits.data());
      for (std::uint64_t i = 0; i < count; ++i) ASSERT_EQ(pbits[i], all_bits[first + i]);
      EXPECT_EQ(pbits[count], 0xdeadbeefu);
    }
  }
}

// ---- the normal transform ----

// Exact moments of the transform's distribution: a uniform 16-bit draw picks a sign (bit 15) and
// a table entry (bits 0..11) independently, so the even moments are the table's and the odd
// moments are exactly 0.
struct TableMoments {
  double m2 = 0, m4 = 0, m6 = 0, m8 = 0;
};
TableMoments table_moments() {
  TableMoments t;
  for (int i = 0; i < kNormalTableSize; ++i) {
    const double x2 = static_cast<double>(kNormalTable[i]) * kNormalTable[i];
    t.m2 += x2;
    t.m4 += x2 * x2;
    t.m6 += x2 * x2 * x2;
    t.m8 += x2 * x2 * x2 * x2;
  }
  t.m2 /= kNormalTableSize;
  t.m4 /= kNormalTableSize;
  t.m6 /= kNormalTableSize;
  t.m8 /= kNormalTableSize;
  return t;
}

TEST(NormalTransform, TableIsSymmetricIncreasingWithUnitMeanSquare) {
  for (int i = 0; i < kNormalTableSize; ++i) {
    ASSERT_GT(kNormalTable[i], 0.0f) << i;
    if (i > 0) {
      ASSERT_GT(kNormalTable[i], kNormalTable[i - 1]) << i;
    }
  }
  // Exact symmetry over all 2^16 draws: flipping bit 15 negates the value, so every odd moment
  // of the transform is exactly 0 (summed per +-pair, each term is exactly 0).
  double odd1 = 0.0, odd3 = 0.0, odd5 = 0.0;
  for (std::uint32_t d = 0; d < 0x8000u; ++d) {
    const double p = normal_from_bits(d), q = normal_from_bits(d | 0x8000u);
    ASSERT_EQ(q, -p) << "draw " << d;
    odd1 += p + q;
    odd3 += p * p * p + q * q * q;
    odd5 += p * p * p * p * p + q * q * q * q * q;
  }
  EXPECT_EQ(odd1, 0.0);
  EXPECT_EQ(odd3, 0.0);
  EXPECT_EQ(odd5, 0.0);
  const TableMoments t = table_moments();
  EXPECT_NEAR(t.m2, 1.0, 1e-6);
  // The 4096 midpoint quantiles cut the tails beyond about 3.84: the fourth moment is 2.9953.
  EXPECT_NEAR(t.m4, 3.0, 0.01);
  EXPECT_LT(kNormalTable[kNormalTableSize - 1], 4.0f);
  EXPECT_GT(kNormalTable[kNormalTableSize - 1], 3.7f);
}

// Sample moments of 2^20 generated values. Each sample moment M_k = (1/N) sum x^k has standard
// deviation sqrt((E x^{2k} - (E x^k)^2) / N) with the exact moments of the transform; every
// check allows 5 of those (N = 2^20: mean +-4.9e-3, second moment +-6.9e-3, third +-1.9e-2,
// fourth +-4.8e-2).
TEST(NormalTransform, SampleMomentsOfGeneratedValues) {
  constexpr std::uint64_t kN = std::uint64_t{1} << 20;
  std::vector<float> v(kN);
  // Four streams of 2^18 values: different pairs and tags of one parameter.
  for (std::uint32_t s = 0; s < 4; ++s)
    fill_normal(noise_stream(2024, param_id("stats"), 1, s, s < 2 ? NoiseTag::factors : NoiseTag::full), 0, kN / 4,
                v.data() + s * (kN / 4));
  double s1 = 0, s2 = 0, s3 = 0, s4 = 0;
  for (float f : v) {
    const double x = f, x2 = x * x;
    s1 += x;
    s2 += x2;
    s3 += x2 * x;
    s4 += x2 * x2;
  }
  const double n = static_cast<double>(kN);
  const double mean = s1 / n, m2 = s2 / n, m3 = s3 / n, m4 = s4 / n;
  const TableMoments t = table_moments();
  const double tol_mean = 5.0 * std::sqrt(t.m2 / n);
  const double tol_m2 = 5.0 * std::sqrt((t.m4 - t.m2 * t.m2) / n);
  const double tol_m3 = 5.0 * std::sqrt(t.m6 / n);
  const double tol_m4 = 5.0 * std::sqrt((t.m8 - t.m4 * t.m4) / n);
  EXPECT_NEAR(mean, 0.0, tol_mean);
  EXPECT_NEAR(m2, 1.0, tol_m2);                 // variance (mean is ~0)
  EXPECT_NEAR(m2 - mean * mean, 1.0, tol_m2 + tol_mean * tol_mean);
  EXPECT_NEAR(m3, 0.0, tol_m3);                 // skewness
  EXPECT_NEAR(m4, t.m4, tol_m4);                // kurtosis of the transform
  EXPECT_NEAR(m4 / (m2 * m2), 3.0, 0.01 + 2.0 * tol_m4);
  // Tails: |x| > 2 has probability 0.0455 for a standard normal; its count is binomial.
  std::int64_t beyond2 = 0;
  for (float f : v) beyond2 += std::fabs(f) > 2.0f;
  const double p = 0.0455, sd = std::sqrt(n * p * (1 - p));
  EXPECT_NEAR(static_cast<double>(beyond2), n * p, 5.0 * sd + 0.002 * n);
}

// ---- golden factor blocks ----

constexpr std::uint64_t kSeed = 42;
constexpr const char* kName = "layers.0.weight";
constexpr std::uint64_t kEpoch = 3, kPair = 5;
constexpr std::int64_t kM = 4, kN = 3, kR = 2;  // block of r (n + m) = 14 values: B (3, 2) then A (4, 2)

// Pinned from the code (exact float values): any change to the noise shows up here.
constexpr std::array<float, 6> kGeneratorB = {-0x1.b8d38ep-1f, -0x1.4565b8p+0f, 0x1.8570eep-2f,
                                              -0x1.2639fcp-1f, -0x1.033a74p-1f, -0x1.319ccap+1f};
constexpr std::array<float, 6> kGeneratorA = {-0x1.e48a98p-2f, 0x1.a700ecp-2f, 0x1.52387ep-1f,
                                              0x1.2db80ap-4f,  -0x1.e7205cp-1f, -0x1.89e9f8p+0f};
constexpr std::uint64_t kTableOffset = 985344;  // in NoiseTable(42, 2^20)
constexpr std::array<float, 6> kTableB = {-0x1.1eae74p-1f, 0x1.8c5872p-3f, -0x1.0b6c02p-3f,
                                          0x1.a7d1d6p-1f,  -0x1.bf027cp-2f, 0x1.1ea39ap-4f};
constexpr std::array<float, 6> kTableA = {-0x1.61f8c4p-1f, -0x1.cd41f6p-9f, -0x1.893b7ep-1f,
                                          0x1.e815dap-3f,  -0x1.c3691cp-3f, 0x1.72324cp-3f};

void expect_block(const float* block, const std::array<float, 6>& b, const std::array<float, 6>& a) {
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(block[i], b[i]) << "B element " << i;
    EXPECT_EQ(block[kN * kR + i], a[i]) << "A element " << i;
  }
}

Param golden_param() {
  Param p{kName, ParamKind::matrix, Tensor(DType::f32, {kM, kN}), param_id(kName), false};
  return p;
}

TEST(GoldenNoise, GeneratorFactorBlock) {
  std::vector<float> block(kR * (kN + kM));
  fill_normal(noise_stream(kSeed, param_id(kName), kEpoch, kPair, NoiseTag::factors), 0, block.size(), block.data());
  expect_block(block.data(), kGeneratorB, kGeneratorA);

  // The same block through a noiser's population view (members 10, 11 form pair 5).
  EsConfig es;
  es.population = 16;
  es.rank = static_cast<int>(kR);
  auto noiser = make_noiser(es, kSeed);
  Param p = golden_param();
  PopulationView view(*noiser, static_cast<std::int64_t>(kEpoch), 0.1, 10, 12);
  expect_block(view.normals(p, kPair, NoiseTag::factors, kR * (kN + kM)), kGeneratorB, kGeneratorA);
}

TEST(GoldenNoise, TableFactorBlock) {
  const NoiseTable table(kSeed, 20);
  const std::uint64_t len = kR * (kN + kM);
  EXPECT_EQ(table_offset(kSeed, param_id(kName), kEpoch, kPair, table.size(), len), kTableOffset);
  const float* slice = table.slice(param_id(kName), kEpoch, kPair, len);
  EXPECT_EQ(slice, table.data() + kTableOffset);
  expect_block(slice, kTableB, kTableA);

  // The same slice through a noiser with es.noise_source = table.
  EsConfig es;
  es.population = 16;
  es.rank = static_cast<int>(kR);
  es.noise_source = "table";
  es.table_log2_size = 20;
  auto noiser = make_noiser(es, kSeed);
  ASSERT_NE(noiser->table(), nullptr);
  Param p = golden_param();
  PopulationView view(*noiser, static_cast<std::int64_t>(kEpoch), 0.1, 10, 12);
  expect_block(view.normals(p, kPair, NoiseTag::factors, static_cast<std::int64_t>(len)), kTableB, kTableA);
}

// ---- the noise table ----

TEST(NoiseTable, DeterministicForASeedAndFilledFromTheGenerator) {
  const NoiseTable a(5, 20), b(5, 20), c(6, 20);
  ASSERT_EQ(a.size(), std::uint64_t{1} << 20);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % (std::uintptr_t{2} << 20), 0u);  // on 2 MiB pages
  EXPECT_TRUE(std::equal(a.data(), a.data() + a.size(), b.data()));
  std::int64_t same = 0;
  for (std::uint64_t i = 0; i < a.size(); ++i) same += a.data()[i] == c.data()[i];
  // Two independent draws agree with probability sum_x P(x)^2 = 1/8192 per element (~128 of 2^20).
  EXPECT_LT(same, 400);
  // Element i of the table is element i of the stream (seed, "noise_table", 0, 0, tag table).
  std::vector<float> head(100), tail(100);
  const NoiseStream s = noise_stream(5, param_id("noise_table"), 0, 0, NoiseTag::table);
  fill_normal(s, 0, 100, head.data());
  fill_normal(s, a.size() - 100, 100, tail.data());
  EXPECT_TRUE(std::equal(head.begin(), head.end(), a.data()));
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), a.data() + a.size() - 100));
  EXPECT_THROW(NoiseTable(5, 9), Error);
  EXPECT_THROW(NoiseTable(5, 31), Error);
}

// Tables smaller than one fill chunk (2^16 values) are filled too: every allowed size holds the
// stream's first values.
TEST(NoiseTable, SmallTablesAreFilled) {
  const NoiseStream s = noise_stream(5, param_id("noise_table"), 0, 0, NoiseTag::table);
  for (int log2 : {10, 12, 15, 16, 17}) {
    SCOPED_TRACE(log2);
    const NoiseTable t(5, log2);
    ASSERT_EQ(t.size(), std::uint64_t{1} << log2);
    std::vector<float> want(t.size());
    fill_normal(s, 0, want.size(), want.data());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), t.data()));
  }
}

TEST(NoiseTable, OffsetsInRangeAndSlicesFit) {
  const std::uint64_t size = std::uint64_t{1} << 20;
  for (std::uint64_t len : {std::uint64_t{1}, std::uint64_t{14}, std::uint64_t{4097}, size / 2, size - 3}) {
    std::uint64_t lo = size, hi = 0;
    for (std::uint64_t pair = 0; pair < 2000; ++pair) {
      const std::uint64_t o = table_offset(9, param_id("w"), 4, pair, size, len);
      ASSERT_LE(o + len, size) << "len " << len << " pair " << pair;
      lo = std::min(lo, o);
      hi = std::max(hi, o);
    }
    // The offsets spread over the allowed range [0, size - len].
    const double range = static_cast<double>(size - len + 1);
    if (range > 1000) {
      EXPECT_LT(static_cast<double>(lo), 0.01 * range);
      EXPECT_GT(static_cast<double>(hi), 0.99 * range);
    }
  }
  EXPECT_EQ(table_offset(9, 1, 2, 3, size, size), 0u);  // a slice of the whole table
  EXPECT_THROW(table_offset(9, 1, 2, 3, size, size + 1), Error);
}

// Number of pairs (i < j) of the P pairs with identical offsets.
std::int64_t identical_offsets(std::uint64_t seed, std::uint64_t param, std::uint64_t epoch, std::uint64_t n_pairs,
                               std::uint64_t table_size, std::uint64_t len) {
  std::unordered_map<std::uint64_t, std::int64_t> count;
  for (std::uint64_t k = 0; k < n_pairs; ++k) ++count[table_offset(seed, param, epoch, k, table_size, len)];
  std::int64_t same = 0;
  for (auto& [o, c] : count) same += c * (c - 1) / 2;
  return same;
}

// P = 16384 pairs in a table of 2^24 values: about P^2 / 2^25 = 8 identical offsets per epoch
// (Poisson). One epoch: at most 8 + 5 sqrt(8) = 22. Sixteen epochs together: mean 128 with
// standard deviation sqrt(128) = 11.3, so within 128 +- 5 * 11.3.
TEST(NoiseTable, IdenticalOffsetsMatchTheBirthdayBound) {
  constexpr std::uint64_t kPairs = 16384, kSize = std::uint64_t{1} << 24, kLen = 4 * (64 + 32);
  const double expected = static_cast<double>(kPairs) * (kPairs - 1) / 2.0 / static_cast<double>(kSize - kLen + 1);
  ASSERT_NEAR(expected, 8.0, 0.01);
  const std::int64_t one = identical_offsets(1234, param_id("layers.0.weight"), 0, kPairs, kSize, kLen);
  RecordProperty("identical_offsets_epoch0", static_cast<int>(one));
  EXPECT_LE(static_cast<double>(one), expected + 5.0 * std::sqrt(expected));
  std::int64_t total = one;
  for (std::uint64_t epoch = 1; epoch < 16; ++epoch)
    total += identical_offsets(1234, param_id("layers.0.weight"), epoch, kPairs, kSize, kLen);
  RecordProperty("identical_offsets_16_epochs", static_cast<int>(total));
  EXPECT_NEAR(static_cast<double>(total), 16.0 * expected, 5.0 * std::sqrt(16.0 * expected));
}

// ---- independence of the key words ----

TEST(Noise, DiffersAcrossEpochsPairsParamsTagsAndSeeds) {
  constexpr std::uint64_t kLen = 64;
  auto draw = [](std::uint64_t seed, std::uint64_t param, std::uint64_t epoch, std::uint64_t pair, NoiseTag tag) {
    std::vector<float> v(kLen);
    fill_normal(noise_stream(seed, param, epoch, pair, tag), 0, kLen, v.data());
    return v;
  };
  const std::uint64_t w = param_id("layers.0.weight"), b = param_id("layers.0.bias");
  const auto base = draw(1, w, 0, 0, NoiseTag::factors);
  EXPECT_EQ(base, draw(1, w, 0, 0, NoiseTag::factors));
  const std::vector<std::vector<float>> others = {
      draw(1, w, 1, 0, NoiseTag::factors), draw(1, w, 0, 1, NoiseTag::factors), draw(1, b, 0, 0, NoiseTag::factors),
      draw(1, w, 0, 0, NoiseTag::full),    draw(2, w, 0, 0, NoiseTag::factors)};
  for (std::size_t o = 0; o < others.size(); ++o) {
    int same = 0;
    for (std::uint64_t i = 0; i < kLen; ++i) same += others[o][i] == base[i];
    EXPECT_LE(same, 3) << "variant " << o << " repeats the base stream";
    double dot = 0;
    for (std::uint64_t i = 0; i < kLen; ++i) dot += static_cast<double>(others[o][i]) * base[i];
    EXPECT_LT(std::fabs(dot) / kLen, 5.0 / std::sqrt(static_cast<double>(kLen))) << "variant " << o;
  }
  // Table slices differ across epochs and pairs too.
  const NoiseTable table(1, 20);
  EXPECT_NE(table.slice(w, 0, 0, 32), table.slice(w, 1, 0, 32));
  EXPECT_NE(table.slice(w, 0, 0, 32), table.slice(w, 0, 1, 32));
  EXPECT_NE(table.slice(w, 0, 0, 32), table.slice(b, 0, 0, 32));
}

// ---- the population view's cache ----

// Every pair's factor block of p in the view, from the stream itself.
std::vector<float> stream_block(std::uint64_t seed, const Param& p, std::uint64_t epoch, std::int64_t pair,
                                std::int64_t len) {
  std::vector<float> v(static_cast<std::size_t>(len));
  fill_normal(noise_stream(seed, p.id, epoch, static_cast<std::uint64_t>(pair), NoiseTag::factors), 0, v.size(),
              v.data());
  return v;
}

std::unique_ptr<Noiser> eggroll_noiser(std::int64_t population, int rank, std::uint64_t seed) {
  EsConfig es;
  es.population = population;
  es.rank = rank;
  return make_noiser(es, seed);
}

TEST(PopulationViewCache, RangesFilledByThreadsInAnyOrderHoldTheStreams) {
  auto noiser = eggroll_noiser(128, 2, 7);
  Param p{"w", ParamKind::matrix, Tensor(DType::f32, {9, 5}), param_id("w"), false};
  const std::int64_t len = 2 * (9 + 5), pairs = 64;
  PopulationView view(*noiser, 3, 0.1, 0, 128);
  // Where the values will be, before any is generated; then overlapping ranges from three threads.
  std::vector<const float*> where(pairs);
  view.normals_range(p, NoiseTag::factors, len, 0, pairs, where.data(), false);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (std::int64_t first = t; first < pairs; first += 5)
        view.fill_normals(p, NoiseTag::factors, len, first, std::min<std::int64_t>(7, pairs - first));
    });
  for (std::thread& t : threads) t.join();
  for (std::int64_t k = 0; k < pairs; ++k) {
    EXPECT_EQ(view.normals(p, k, NoiseTag::factors, len), where[k]) << "pair " << k;
    EXPECT_EQ(std::vector<float>(where[k], where[k] + len), stream_block(7, p, 3, k, len)) << "pair " << k;
  }
}

// normals_range reports whether its range is present (a forward's kernel fetches factor blocks
// ahead only then): not before generation, for a part, yes after it; a table's slices always.
TEST(PopulationViewCache, RangesSayWhetherTheirValuesArePresent) {
  auto noiser = eggroll_noiser(64, 2, 9);
  Param p{"w", ParamKind::matrix, Tensor(DType::f32, {9, 5}), param_id("w"), false};
  const std::int64_t len = 2 * (9 + 5);
  PopulationView view(*noiser, 0, 0.1, 0, 64);
  std::vector<const float*> where(32);
  EXPECT_FALSE(view.normals_range(p, NoiseTag::factors, len, 0, 32, where.data(), false));
  view.fill_normals(p, NoiseTag::factors, len, 4, 6);
  EXPECT_TRUE(view.normals_range(p, NoiseTag::factors, len, 4, 6, where.data(), false));
  EXPECT_FALSE(view.normals_range(p, NoiseTag::factors, len, 3, 6, where.data(), false));
  EXPECT_TRUE(view.normals_range(p, NoiseTag::factors, len, 0, 32, where.data(), true));  // made present
  EsConfig es;
  es.population = 64;
  es.rank = 2;
  es.noise_source = "table";
  es.table_log2_size = 20;
  auto tabled = make_noiser(es, 9);
  PopulationView table_view(*tabled, 0, 0.1, 0, 64);
  EXPECT_TRUE(table_view.normals_range(p, NoiseTag::factors, len, 0, 32, where.data(), false));
}

TEST(PopulationViewCache, StreamIndicesOutOfRangeAreRefusedWhenTheViewIsMade) {
  auto noiser = eggroll_noiser(8, 1, 3);
  try {
    PopulationView view(*noiser, std::int64_t{1} << 32, 0.1, 0, 8);
    FAIL() << "an epoch of 2^32 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("epoch 4294967296"), std::string::npos) << e.what();
  }
}

TEST(PopulationViewCache, ALaterViewReusesTheMemoryWithItsOwnValues) {
  auto noiser = eggroll_noiser(64, 4, 11);
  Param p{"w", ParamKind::matrix, Tensor(DType::f32, {16, 8}), param_id("w"), false};
  const std::int64_t len = 4 * (16 + 8);
  const float* first_memory = nullptr;
  {
    PopulationView view(*noiser, 0, 0.1, 0, 64);
    first_memory = view.normals(p, 0, NoiseTag::factors, len);  // every pair generated
  }
  PopulationView view(*noiser, 1, 0.1, 0, 64);
  std::vector<const float*> where(32);
  view.normals_range(p, NoiseTag::factors, len, 0, 32, where.data(), false);
  EXPECT_EQ(where[0], first_memory);  // the first view's memory, given back to the noiser
  view.fill_normals(p, NoiseTag::factors, len, 5, 3);  // a range first, then the rest on first use
  for (std::int64_t k = 0; k < 32; ++k)
    EXPECT_EQ(std::vector<float>(view.normals(p, k, NoiseTag::factors, len),
                                 view.normals(p, k, NoiseTag::factors, len) + len),
              stream_block(11, p, 1, k, len))
        << "pair " << k << " holds another epoch's values";
}

TEST(PopulationViewCache, ForwardGeneratingFactorsPerBlockEqualsFactorsGeneratedFirst) {
  auto backend = make_backend(BackendKind::cpu);
  for (const std::int64_t rows : {1, 16})
    for (const int rank : {1, 4}) {
      auto noiser = eggroll_noiser(96, rank, 5);
      Param w{"w", ParamKind::matrix, Tensor(DType::f32, {40, 70}), param_id("w"), false};
      float* wv = w.value.data<float>();
      for (std::int64_t i = 0; i < w.value.numel(); ++i) wv[i] = std::sin(0.37f * static_cast<float>(i));
      std::vector<float> x(static_cast<std::size_t>(96 * rows * 70));
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.11f * static_cast<float>(i));
      std::vector<float> y_block(static_cast<std::size_t>(96 * rows * 40)), y_first(y_block.size());
      PopulationView lazy(*noiser, 2, 0.1, 0, 96), eager(*noiser, 2, 0.1, 0, 96);
      eager.normals(w, 0, NoiseTag::factors, rank * (40 + 70));  // every pair generated before the forward
      ForwardContext a{*backend, &lazy, rows}, b{*backend, &eager, rows};
      noiser->matmul(a, w, x.data(), y_block.data());
      noiser->matmul(b, w, x.data(), y_first.data());
      EXPECT_EQ(y_block, y_first) << "rows " << rows << ", rank " << rank;
    }
}

}  // namespace
}  // namespace eggroll
