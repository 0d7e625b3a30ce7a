// The int8 ops (ALGORITHM.md section 2): hand-computed cases pin every rounding of the reference,
// then the cpu backend at every SIMD level this machine runs must equal the reference bit for bit
// on random inputs (extremes included), for any thread count and any batch split.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/int8_ops.hpp"
#include "eggroll/backend/backend.hpp"
#include "eggroll/core/error.hpp"
#include "eggroll/quant/qmath.hpp"
#include "support/int8_test_support.hpp"

namespace eggroll {
namespace {

using namespace int8_test;

// ---- hand-computed cases: the reference's roundings ----

TEST(Int8Hand, QmmDivisor) {
  EXPECT_EQ(qmm_divisor(1), 16);
  EXPECT_EQ(qmm_divisor(16), 64);    // power of 4: a shift
  EXPECT_EQ(qmm_divisor(17), 64);    // 16 * 4
  EXPECT_EQ(qmm_divisor(1000), 496); // 16 * 31
  EXPECT_EQ(qmm_divisor(1024), 512);
  EXPECT_THROW(qmm_divisor(0), Error);
}

TEST(Int8Hand, QmmFloorsNegativeAccumulators) {
  auto ref = make_backend(BackendKind::reference);
  // n = 16, D = 64: rows of W giving acc = -64, -65, 63, 64, 127 * 127 * 16.
  const I8 x(16, 1);
  I8 w(5 * 16, 0);
  for (int k = 0; k < 16; ++k) w[k] = -4;
  w[16] = -65;
  w[32] = 63;
  w[48] = 64;
  I8 x2(16, 127), w2(16, 127);
  std::int8_t y[5], y2[1];
  ref->qmm({1, 1}, 5, 16, x.data(), w.data(), QFactors{}, y);
  EXPECT_EQ(y[0], -1);  // floor(-64 / 64)
  EXPECT_EQ(y[1], -2);  // floor(-65 / 64), not -1
  EXPECT_EQ(y[2], 0);
  EXPECT_EQ(y[3], 1);
  EXPECT_EQ(y[4], 0);  // acc = 0
  ref->qmm({1, 1}, 1, 16, x2.data(), w2.data(), QFactors{}, y2);
  EXPECT_EQ(y2[0], 127);  // 127^2 16 / 64 clipped
  // n = 1000, D = 496: acc = -497 -> -2, acc = 495 -> 0.
  I8 x3(1000, 0), w3(2 * 1000, 0);
  x3[0] = 1;
  w3[0] = -127;
  x3[1] = 2;
  w3[1] = -127;
  x3[2] = 1;
  w3[2] = -116;  // -127 - 254 - 116 = -497
  w3[1000] = 127;
  w3[1001] = 127;
  w3[1002] = 114;  // 127 + 254 + 114 = 495
  std::int8_t y3[2];
  ref->qmm({1, 1}, 2, 1000, x3.data(), w3.data(), QFactors{}, y3);
  EXPECT_EQ(y3[0], -2);
  EXPECT_EQ(y3[1], 0);
}

TEST(Int8Hand, QmmPerturbationIsSignTimesFloor) {
  // n = m = r = 1, D = 16, W = 0, B = 5, A = 13, x = 1, shift 2: P = 65, floor(65 / 4) = 16.
  // Member 0: acc = 16 -> 1; member 1: acc = -16 -> -1 (floor(-65 / 4) = -17 would give -2).
  auto ref = make_backend(BackendKind::reference);
  const I8 x{1, 1}, w{0}, block{5, 13};
  const std::int8_t* blocks[2] = {block.data(), block.data()};
  const std::int8_t sign[2] = {1, -1};
  std::int8_t y[2];
  ref->qmm({2, 1}, 1, 1, x.data(), w.data(), QFactors{1, 1, 1, blocks, sign, 2}, y);
  EXPECT_EQ(y[0], 1);
  EXPECT_EQ(y[1], -1);
}

TEST(Int8Hand, Embedding) {
  // W[t] = 10, A[t] = 3, B = 5, shift 2: p = 15, floor(15 / 4) = 3: +1 -> 13, -1 -> 7 (not 6).
  auto ref = make_backend(BackendKind::reference);
  const I8 w{0, 10}, block{5, 0, 3};  // B (1, 1), A (2, 1)
  const std::int8_t* blocks[2] = {block.data(), block.data()};
  const std::int8_t sign[2] = {1, -1};
  const std::int32_t tokens[2] = {1, 1};
  std::int8_t y[2];
  ref->qembedding({2, 1}, 2, 1, tokens, w.data(), QFactors{2, 1, 1, blocks, sign, 2}, y);
  EXPECT_EQ(y[0], 13);
  EXPECT_EQ(y[1], 7);
}

TEST(Int8Hand, L1NormAddGru) {
  auto ref = make_backend(BackendKind::reference);
  const I8 x{-5, 3, 0, 1, 0, 0, 127, 0, 0}, w{3, 3, 16};
  std::int8_t y[9];
  ref->ql1_norm({3, 1}, 3, x.data(), w.data(), 0, y);
  // sum 8, mav 2: floor(-15/2) = -8, floor(9/2) = 4; sum 1 < d: mav 1; mav 42: floor(381 / 42) = 9.
  EXPECT_EQ((I8{y, y + 9}), (I8{-8, 4, 0, 3, 0, 0, 9, 0, 0}));
  const I8 a{100, -100, 1}, b{100, -100, 2}, v{0, -10, 3};
  ref->qadd({1, 1}, 3, a.data(), b.data(), v.data(), 0, y);
  EXPECT_EQ((I8{y, y + 3}), (I8{127, -127, 6}));
  const I8 f{-127, 127, 0}, h{50, -1, 100};
  ref->qgru_gate(3, f.data(), h.data(), y);
  EXPECT_EQ((I8{y, y + 3}), (I8{0, -1, 49}));  // floor(-254 / 256) = -1, floor(12700 / 256) = 49
  const I8 f2{0, 127, -127}, hh{-10, 127, 100};
  I8 h2{10, -120, 5};
  ref->qgru_update(3, f2.data(), hh.data(), h2.data());
  EXPECT_EQ(h2, (I8{0, 125, 5}));  // floor(-2540 / 256) = -10; floor(254 * 247 / 256) = 245; f = -127 keeps h
}

TEST(Int8Hand, LogLikAndUpdate) {
  auto ref = make_backend(BackendKind::reference);
  const I8 logits(256, 0);
  const std::int32_t target = 7;
  std::int32_t ll = 0;
  ref->qloglik(1, logits.data(), &target, &ll);
  EXPECT_EQ(ll, -128);  // uniform: log2(1/256) = -8 bits
  // m = 1, n = 2, r = 2: pair 0 (d = 1): B = [[1,2],[3,4]], A = [[5,6]] -> [17, 39];
  // pair 1 (d = -1): B = I, A = [[7,8]] -> [7, 8]; pair 2 has d = 0.
  const I8 b0{1, 2, 3, 4, 5, 6}, b1{1, 0, 0, 1, 7, 8};
  const std::int8_t* blocks[3] = {b0.data(), b1.data(), b0.data()};
  const std::int8_t d[3] = {1, -1, 0};
  std::int64_t z[2] = {0, 100};
  ref->qupdate_accumulate(1, 2, 2, 3, blocks, d, z);
  EXPECT_EQ(z[0], 10);
  EXPECT_EQ(z[1], 131);
}

TEST(Int8Hand, FloorClipIsExactForEveryDivisor) {
  // Every D_n for n <= 133,143 (16 q, q <= 364) over the whole range where the clip is not decided.
  for (std::int64_t q = 1; q <= 364; ++q) {
    const std::int64_t d = 16 * q;
    const cpu_int8::FloorClip div(d);
    std::int64_t want = -129, rem = 0;  // floor(acc / d) = want, acc = want d + rem
    for (std::int64_t acc = -129 * d; acc <= 128 * d + 1; ++acc, ++rem) {
      if (rem == d) rem = 0, ++want;
      const std::int64_t clipped = want < -127 ? -127 : (want > 127 ? 127 : want);
      if (div(acc) != clipped) FAIL() << "d = " << d << " acc = " << acc;
    }
    EXPECT_EQ(div(-(std::int64_t{1} << 40)), -127);
    EXPECT_EQ(div(std::int64_t{1} << 40), 127);
  }
}

TEST(Int8Hand, SimdFloorClipIsExactForEveryDivisor) {
  // The AVX-512 writer (float arithmetic for the divisors that are not powers of two) against
  // FloorClip on every accumulator where the clip is not decided, for every D_n, and at the int32
  // extremes. Every value the writer takes is an int32 (its callers saturate wider sums first).
  const std::vector<std::string> all = cpu_int8::levels();
  if (std::find(all.begin(), all.end(), "avx512_vnni") == all.end()) GTEST_SKIP() << "no avx512_vnni level here";
  std::vector<std::int32_t> t;
  std::vector<std::int8_t> got;
  for (std::int64_t q = 1; q <= 364; ++q) {
    const std::int64_t d = 16 * q;
    const cpu_int8::FloorClip div(d);
    t.clear();
    for (std::int64_t acc = -129 * d; acc <= 128 * d + 1; ++acc) t.push_back(static_cast<std::int32_t>(acc));
    for (std::int64_t e : {INT32_MIN, INT32_MIN + 1, -(1 << 24) - 1, 1 << 24, (1 << 24) + 1, INT32_MAX - 1, INT32_MAX})
      t.push_back(static_cast<std::int32_t>(e));
    got.assign(t.size(), 0);
    cpu_int8::detail::floor_clip_avx512(d, t.data(), static_cast<std::int64_t>(t.size()), got.data());
    for (std::size_t i = 0; i < t.size(); ++i)
      if (got[i] != div(t[i])) FAIL() << "d = " << d << " acc = " << t[i] << ": " << int{got[i]} << " against " << int{div(t[i])};
  }
}

TEST(Int8Hand, L1NormReciprocalFloorIsExact) {
  // The AVX-512 ql1_norm's floor(fma(p, float(1 / mav), 2^-8)) against floor(p / mav) for every
  // product p = x w and every mav it can meet.
  for (int mav = 1; mav <= 128; ++mav) {
    const float inv = 1.0f / static_cast<float>(mav);
    for (int p = -16384; p <= 16384; ++p) {
      const auto got = static_cast<int>(std::floor(std::fma(static_cast<float>(p), inv, 1.0f / 256)));
      const int want = p >= 0 ? p / mav : -((-p + mav - 1) / mav);
      if (got != want) FAIL() << "p = " << p << " mav = " << mav;
    }
  }
}

// ---- random cases: every level against the reference ----

struct Batch {
  std::int64_t members, rpm;
};
const Batch kBatches[] = {{1, 1}, {5, 1}, {37, 1}, {2, 3}, {13, 3}, {4, 16}};
const std::int64_t kWidths[] = {1, 3, 17, 63, 65, 255, 256, 1000, 1024};

TEST(Int8Random, Qmm) {
  Rng rng{1};
  int c = 0;
  for (std::int64_t n : kWidths)
    for (std::int64_t m : {1, 16, 47, 130})
      for (const Batch& bt : kBatches) {
        const std::int64_t r = 1 + c % 8, rows = bt.members * bt.rpm;
        const int lo = c % 5 == 0 ? -128 : -127;  // some cases use the whole int8 range
        const int shift = (c % 3 == 0) ? c % 4 : 8 + q::rank_shift(static_cast<int>(r));
        ++c;
        const I8 x = rng.int8s(rows * n, lo), w = rng.int8s(m * n, lo);
        QF f(rng, bt.members, m, n, r, shift, c % 4 == 1 ? 1 : -1, c % 4 == 2 ? bt.members - 1 : -1, lo);
        const QFactors use = c % 7 == 3 ? QFactors{} : f.f;
        const std::string what = "qmm n=" + std::to_string(n) + " m=" + std::to_string(m) + " rows=" +
                                 std::to_string(rows) + " r=" + std::to_string(r);
        expect_all_levels_equal<std::int8_t>(what, rows * m, [&](Backend& be, std::int8_t* y) {
          be.qmm({bt.members, bt.rpm}, m, n, x.data(), w.data(), use, y);
        });
      }
}

// avx512 names the VNNI tiles on every machine that has them (AMX or not), and a machine without
// AMX refuses avx512_amx by name.
TEST(Int8Hand, LevelNames) {
  LevelGuard guard;
  const std::vector<std::string> all = levels();
  const bool amx = all.back() == "avx512_amx";
  EXPECT_EQ(cpu_int8::amx_available(), amx);
  if (std::find(all.begin(), all.end(), "avx512_vnni") != all.end()) {
    cpu_int8::set_level("avx512");
    EXPECT_STREQ(cpu_int8::level(), "avx512_vnni");
  }
  if (amx) {
    cpu_int8::set_level("auto");
    EXPECT_STREQ(cpu_int8::level(), "avx512_amx");
  } else {
    EXPECT_THAT([] { cpu_int8::set_level("avx512_amx"); },
                ::testing::ThrowsMessage<Error>(::testing::HasSubstr("SIMD level 'avx512_amx' is not available")));
  }
}

TEST(Int8Hand, QmmRefusesPackedWeightsOfAnotherShape) {
  auto cpu = make_backend(BackendKind::cpu);
  const I8 w(16 * 32, 1), x(32, 1);
  Out<std::int8_t> y(16);
  const auto packed = cpu->qpack(16, 32, w.data());
  if (!packed) GTEST_SKIP() << "no packed layout at this machine's level";
  EXPECT_THAT([&] { cpu->qmm({1, 1}, 8, 32, x.data(), w.data(), QFactors{}, y.ptr(), QAddend{}, packed.get()); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("packed weights are for (16, 32), expected (8, 32)")));
}

TEST(Int8Random, QmmWithAddendIsQmmThenQadd) {
  // The fused residual / bias add: every level against the reference, and the reference against
  // its own qmm followed by qadd, with rows only, a vector only (shared or per member) and both.
  Rng rng{11};
  auto ref = make_backend(BackendKind::reference);
  int c = 0;
  for (std::int64_t n : {17, 256, 1000})
    for (std::int64_t m : {1, 47, 130, 256})
      for (const Batch& bt : kBatches) {
        const std::int64_t r = 1 + c % 4, rows = bt.members * bt.rpm, stride = c % 2 ? m : 0;
        ++c;
        const I8 x = rng.int8s(rows * n, -128), w = rng.int8s(m * n, -128);
        const I8 b = rng.int8s(rows * m, -128), v = rng.int8s(bt.members * m, -128);
        QF f(rng, bt.members, m, n, r, 6, c % 4 == 1 ? 1 : -1);
        for (int kind = 1; kind < 4; ++kind) {
          const QAddend add{kind & 1 ? b.data() : nullptr, kind & 2 ? v.data() : nullptr, stride};
          Out<std::int8_t> plain(rows * m), want(rows * m), fused(rows * m);
          ref->qmm({bt.members, bt.rpm}, m, n, x.data(), w.data(), f.f, plain.ptr());
          ref->qadd({bt.members, bt.rpm}, m, plain.ptr(), add.rows, add.vec, stride, want.ptr());
          ref->qmm({bt.members, bt.rpm}, m, n, x.data(), w.data(), f.f, fused.ptr(), add, nullptr);
          ASSERT_EQ(want.data, fused.data) << "reference n=" << n << " m=" << m << " kind " << kind;
          // every level, with W packed by the backend beforehand (qpack; the AVX-512 level has it)
          // and without
          for (bool prepack : {false, true})
            expect_all_levels_equal<std::int8_t>(
                "qmm + addend n=" + std::to_string(n) + " m=" + std::to_string(m) + (prepack ? " prepacked" : ""),
                rows * m, [&](Backend& be, std::int8_t* y) {
                  const auto packed = prepack ? be.qpack(m, n, w.data()) : nullptr;
                  be.qmm({bt.members, bt.rpm}, m, n, x.data(), w.data(), f.f, y, add, packed.get());
                });
        }
      }
}

TEST(Int8Random, QmmSaturates) {
  for (int sx : {127, -127})
    for (std::int64_t n : {256, 1000}) {
      Rng rng{static_cast<std::uint64_t>(n + sx)};
      const I8 x(static_cast<std::size_t>(3 * n), static_cast<std::int8_t>(sx)), w(static_cast<std::size_t>(33 * n), 127);
      QF f(rng, 3, 33, n, 4, 0);
      for (auto& s : f.storage) std::fill(s.begin(), s.end(), std::int8_t{127});
      expect_all_levels_equal<std::int8_t>("qmm saturating", 3 * 33, [&](Backend& be, std::int8_t* y) {
        be.qmm({3, 1}, 33, n, x.data(), w.data(), f.f, y);
      });
    }
}

TEST(Int8Random, Embedding) {
  Rng rng{2};
  int c = 0;
  for (std::int64_t d : kWidths)
    for (const Batch& bt : kBatches) {
      const std::int64_t r = 1 + c % 17, rows = bt.members * bt.rpm, vocab = c % 2 ? 256 : 7;
      ++c;
      const I8 w = rng.int8s(vocab * d);
      std::vector<std::int32_t> tokens(static_cast<std::size_t>(rows));
      for (auto& t : tokens) t = static_cast<std::int32_t>(rng.next() % static_cast<std::uint64_t>(vocab));
      tokens[0] = static_cast<std::int32_t>(vocab - 1);
      QF f(rng, bt.members, vocab, d, r, c % 5 == 1 ? 17 : 4 + c % 7, 1, bt.members - 1);  // shift 17: all 0 or -1
      expect_all_levels_equal<std::int8_t>("qembedding d=" + std::to_string(d), rows * d, [&](Backend& be, std::int8_t* y) {
        be.qembedding({bt.members, bt.rpm}, vocab, d, tokens.data(), w.data(), f.f, y);
      });
    }
}

TEST(Int8Random, ElementwiseOps) {
  Rng rng{3};
  for (std::int64_t d : kWidths)
    for (const Batch& bt : kBatches) {
      const std::int64_t rows = bt.members * bt.rpm;
      I8 x = rng.int8s(rows * d), a = rng.int8s(rows * d), b = rng.int8s(rows * d), w = rng.int8s(bt.members * d);
      for (std::int64_t k = 0; k < d; ++k) x[k] = static_cast<std::int8_t>(k % 3 == 0);  // a row with small sum
      for (std::int64_t stride : {std::int64_t{0}, d}) {
        expect_all_levels_equal<std::int8_t>("ql1_norm", rows * d, [&](Backend& be, std::int8_t* y) {
          be.ql1_norm({bt.members, bt.rpm}, d, x.data(), w.data(), stride, y);
        });
        for (bool with_b : {false, true})
          for (bool with_v : {false, true})
            expect_all_levels_equal<std::int8_t>("qadd", rows * d, [&](Backend& be, std::int8_t* y) {
              be.qadd({bt.members, bt.rpm}, d, a.data(), with_b ? b.data() : nullptr, with_v ? w.data() : nullptr,
                      stride, y);
            });
      }
    }
}

TEST(Int8Random, GruExhaustiveAndLogLik) {
  I8 f, h, hh;  // every (f, h) pair, hh random
  Rng rng{4};
  for (int i = -128; i <= 127; ++i)
    for (int j = -128; j <= 127; ++j) {
      f.push_back(static_cast<std::int8_t>(i));
      h.push_back(static_cast<std::int8_t>(j));
    }
  hh = rng.int8s(static_cast<std::int64_t>(f.size()), -128, 127);
  const auto n = static_cast<std::int64_t>(f.size());
  expect_all_levels_equal<std::int8_t>("qgru_gate", n, [&](Backend& be, std::int8_t* g) {
    be.qgru_gate(n, f.data(), h.data(), g);
  });
  expect_all_levels_equal<std::int8_t>("qgru_update", n, [&](Backend& be, std::int8_t* out) {
    std::memcpy(out, h.data(), h.size());
    be.qgru_update(n, f.data(), hh.data(), out);
  });
  const std::int64_t part = n - 4096 - 7;  // a partial chunk and a partial vector at the end
  expect_all_levels_equal<std::int8_t>("qgru_gate, partial", part, [&](Backend& be, std::int8_t* g) {
    be.qgru_gate(part, f.data() + 3, h.data() + 3, g);
  });
  expect_all_levels_equal<std::int8_t>("qgru_update, partial", part, [&](Backend& be, std::int8_t* out) {
    std::memcpy(out, h.data() + 5, static_cast<std::size_t>(part));
    be.qgru_update(part, f.data() + 5, hh.data() + 5, out);
  });
  // The update with the block's residual: h' as qgru_update, y = clip(x + h') as qadd (the
  // reference runs the two ops), whole and partial.
  const I8 x = rng.int8s(n, -128, 127);
  for (const std::int64_t count : {n, part})
    expect_all_levels_equal<std::int8_t>("qgru_update_add", 2 * count, [&](Backend& be, std::int8_t* out) {
      std::memcpy(out, h.data(), static_cast<std::size_t>(count));
      be.qgru_update_add(count, f.data(), hh.data(), out, x.data(), out + count);
    });
  const std::int64_t rows = 37;
  const I8 logits = rng.int8s(rows * 256, -128, 127);
  std::vector<std::int32_t> targets(rows);
  for (auto& t : targets) t = static_cast<std::int32_t>(rng.next() % 256);
  expect_all_levels_equal<std::int32_t>("qloglik", rows, [&](Backend& be, std::int32_t* ll) {
    be.qloglik(rows, logits.data(), targets.data(), ll);
  });
}

TEST(Int8Random, ThreadsAndBatchSplitDoNotChangeBits) {
  Rng rng{6};
  const std::int64_t members = 37, m = 130, n = 1000, r = 2;
  const I8 x = rng.int8s(members * n), w = rng.int8s(m * n);
  QF f(rng, members, m, n, r, 9, 4, 7);
  auto cpu = make_backend(BackendKind::cpu);
  LevelGuard guard;
  for (const std::string& l : levels()) {
    cpu_int8::set_level(l.c_str());
    I8 y1(members * m), y2(members * m), one(m);
    cpu->set_threads(1);
    cpu->qmm({members, 1}, m, n, x.data(), w.data(), f.f, y1.data());
    cpu->set_threads(2);
    cpu->qmm({members, 1}, m, n, x.data(), w.data(), f.f, y2.data());
    EXPECT_EQ(y1, y2) << l;
    for (std::int64_t j : {0, 4, 7, 36}) {  // member j alone
      const QFactors fj{m, n, r, f.blocks.data() + j, f.sign.data() + j, 9};
      cpu->qmm({1, 1}, m, n, x.data() + j * n, w.data(), fj, one.data());
      EXPECT_EQ(0, std::memcmp(one.data(), y1.data() + j * m, static_cast<std::size_t>(m))) << l << " member " << j;
    }
  }
  cpu->set_threads(omp_get_num_procs());
}

// Not an assertion: qmm's speed per level and thread count (int8 multiply-accumulates per second;
// the fastest of several calls, since other processes may share the machine).
double qmm_gmacs(Backend& cpu, std::int64_t rows, std::int64_t m, std::int64_t n, const I8& x, const I8& w,
                 const QFactors& f, int reps) {
  I8 y(static_cast<std::size_t>(rows * m));
  double best = 1e30;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    cpu.qmm({rows, 1}, m, n, x.data(), w.data(), f, y.data());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return static_cast<double>(rows * m * n) / best * 1e-9;
}

// A benchmark, not a test (it asserts nothing): run it with
//   tests/test_int8_ops --gtest_also_run_disabled_tests --gtest_filter="*Speed*"
TEST(Int8Speed, DISABLED_QmmPrintsGMacPerSecond) {
  Rng rng{7};
  auto cpu = make_backend(BackendKind::cpu);
  LevelGuard guard;
  const std::int64_t rows = 1024, n = 256;
  const int max_threads = omp_get_max_threads();
  for (std::int64_t m : {256, 1024}) {
    const I8 x = rng.int8s(rows * n), w = rng.int8s(m * n);
    QF f(rng, rows, m, n, 1, 8);  // one rank-1 block per pair, as the language model
    for (const std::string& l : levels()) {
      cpu_int8::set_level(l.c_str());
      for (int threads : {1, max_threads}) {
        cpu->set_threads(threads);
        const int reps = l == "scalar" ? 2 : 15;
        std::printf("qmm rows=%lld m=%lld n=%lld %-12s threads=%d: %7.1f G MAC/s unperturbed, %7.1f rank 1\n",
                    static_cast<long long>(rows), static_cast<long long>(m), static_cast<long long>(n), l.c_str(),
                    threads, qmm_gmacs(*cpu, rows, m, n, x, w, QFactors{}, reps),
                    qmm_gmacs(*cpu, rows, m, n, x, w, f.f, reps));
      }
    }
  }
  cpu->set_threads(max_threads);
}

}  // namespace
}  // namespace eggroll
