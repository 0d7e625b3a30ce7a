// The int8 matmul at ranks whose rows take their own paths at the SIMD levels: int16 pairs in the
// tile (ranks 2 to 16, split in hi and lo), ranks between the powers of two (run padded to the
// next one), ranks above 16 (the row epilogue), and the int32 / int64 bounds of each, every level
// against the reference bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "eggroll/backend/backend.hpp"
#include "eggroll/quant/qmath.hpp"
#include "support/int8_test_support.hpp"

namespace eggroll {
namespace {

using namespace int8_test;

TEST(Int8Random, QmmHighRanksWideInputsAndLargeSums) {
  Rng rng{8};
  struct S { std::int64_t m, n, r; int lo; };
  for (S s : {S{17, 63, 9, 127}, S{40, 256, 12, -127}, S{33, 100, 16, -128}, S{5, 65, 17, -127}, S{20, 30, 20, -127},
              S{3, 70001, 1, -127}, S{4, 65537, 3, -127}}) {
    const std::int64_t members = 5;
    const I8 x = rng.int8s(members * s.n, s.lo), w = rng.int8s(s.m * s.n, s.lo);
    QF f(rng, members, s.m, s.n, s.r, 9, 2, -1, s.lo);
    expect_all_levels_equal<std::int8_t>("qmm r=" + std::to_string(s.r) + " n=" + std::to_string(s.n), members * s.m,
                                         [&](Backend& be, std::int8_t* y) {
                                           be.qmm({members, 1}, s.m, s.n, x.data(), w.data(), f.f, y);
                                         });
  }
  // |x . B| on both sides of 2^23, where the SIMD levels switch from int32 to int64 corrections:
  // 127 * 64 * 1024 = 8,323,072 < 2^23 < 127 * 127 * 1024.
  for (int b : {64, 127, -127})
    for (std::int64_t r : {1, 2, 5}) {
      const std::int64_t n = 1024, m = 70;
      const I8 x(static_cast<std::size_t>(2 * n), 127), w = rng.int8s(m * n);
      QF f(rng, 2, m, n, r, 1);
      for (auto& st : f.storage)
        for (std::int64_t k = 0; k < n * r; ++k) st[static_cast<std::size_t>(k)] = static_cast<std::int8_t>(b);
      expect_all_levels_equal<std::int8_t>("qmm |xB| near 2^23", 2 * m, [&](Backend& be, std::int8_t* y) {
        be.qmm({2, 1}, m, n, x.data(), w.data(), f.f, y);
      });
    }
  // The largest |x . B[:, c]| on both sides of 2^15, where the AVX-512 level's ranks 2 .. 8 split
  // x . B into two bytes instead of three: 127 * 258 = 32,766 < 2^15 < 127 * 259; members of
  // several rows (B shared) and of one.
  for (std::int64_t n : {258, 259})
    for (int b : {1, -1})
      for (std::int64_t r : {2, 4, 7}) {
        const std::int64_t m = 40;
        const I8 x(static_cast<std::size_t>(6 * n), 127), w = rng.int8s(m * n);
        QF f(rng, 2, m, n, r, 4);
        for (auto& st : f.storage)
          for (std::int64_t k = 0; k < n * r; ++k) st[static_cast<std::size_t>(k)] = static_cast<std::int8_t>(b);
        for (std::int64_t rpm : {1, 3})
          expect_all_levels_equal<std::int8_t>("qmm |xB| near 2^15, n=" + std::to_string(n) + " r=" + std::to_string(r),
                                               2 * rpm * m, [&](Backend& be, std::int8_t* y) {
                                                 be.qmm({2, rpm}, m, n, x.data(), w.data(), f.f, y);
                                               });
      }
}

// Every level against the reference on random operands (values from lo) and factors of rank r
// at the rank's own shift: members of rpm rows each (4 of 16 rows, else 9), member zero_member
// unperturbed.
void expect_random_qmm(Rng& rng, std::int64_t r, std::int64_t n, std::int64_t m, std::int64_t rpm, int lo,
                       std::int64_t zero_member) {
  const std::int64_t members = rpm == 16 ? 4 : 9, rows = members * rpm;
  const I8 x = rng.int8s(rows * n, lo), w = rng.int8s(m * n, lo);
  QF f(rng, members, m, n, r, 8 + q::rank_shift(static_cast<int>(r)), zero_member, -1, lo);
  expect_all_levels_equal<std::int8_t>("qmm r=" + std::to_string(r) + " n=" + std::to_string(n) + " m=" +
                                           std::to_string(m) + " rpm=" + std::to_string(rpm),
                                       rows * m, [&](Backend& be, std::int8_t* y) {
                                         be.qmm({members, rpm}, m, n, x.data(), w.data(), f.f, y);
                                       });
}

TEST(Int8Random, QmmRank16) {
  // Rank 16 at the AVX-512 level runs in int16 pairs, split in hi and lo when some |x . B[:, c]|
  // >= 2^15, and in int64 when sum_c |x . B[:, c]| >= 2^23: random factors at members of one, three
  // and sixteen rows, then factors of one value on both sides of each bound (127 * 258 < 2^15 <
  // 127 * 259; 16 * 127 * 4 * 1024 < 2^23 < 16 * 127 * 5 * 1024).
  Rng rng{16};
  constexpr std::int64_t r = 16;
  int c = 0;
  for (std::int64_t n : {17, 64, 256, 1000})
    for (std::int64_t m : {1, 47, 130})
      for (std::int64_t rpm : {1, 3, 16}) {
        const int lo = c % 2 == 0 ? -128 : -127;
        ++c;
        expect_random_qmm(rng, r, n, m, rpm, lo, c % 3 == 1 ? 1 : -1);
      }
  struct Edge { std::int64_t n; int b; };
  for (Edge e : {Edge{258, 1}, Edge{259, -1}, Edge{1024, 4}, Edge{1024, -5}})
    for (std::int64_t rpm : {1, 3}) {
      const std::int64_t m = 40;
      const I8 x(static_cast<std::size_t>(2 * rpm * e.n), 127), w = rng.int8s(m * e.n);
      QF f(rng, 2, m, e.n, r, 4);
      for (auto& st : f.storage)
        for (std::int64_t k = 0; k < e.n * r; ++k) st[static_cast<std::size_t>(k)] = static_cast<std::int8_t>(e.b);
      expect_all_levels_equal<std::int8_t>("qmm r=16 one-value factors, n=" + std::to_string(e.n) + " b=" +
                                               std::to_string(e.b) + " rpm=" + std::to_string(rpm),
                                           2 * rpm * m, [&](Backend& be, std::int8_t* y) {
                                             be.qmm({2, rpm}, m, e.n, x.data(), w.data(), f.f, y);
                                           });
    }
}

TEST(Int8Random, QmmPaddedRanks) {
  // Ranks between the powers of two with several rows per member run at the AVX-512 level as the
  // next power of two, their factors copied with zero columns: random factors, then factors of one
  // value on both sides of 2^15 (the int16 pairs' hi and lo split: 127 * 258 < 2^15 < 127 * 259)
  // and of sum_c |x . B[:, c]| = 2^23 (r 127 * 127 n against 2^23: the int64 rows beyond it).
  Rng rng{17};
  int c = 0;
  for (std::int64_t r : {3, 5, 6, 7, 9, 12, 15})
    for (std::int64_t n : {17, 64, 259, 1000})
      for (std::int64_t rpm : {3, 16}) {
        const int lo = c % 3 == 0 ? -128 : -127;
        ++c;
        expect_random_qmm(rng, r, n, c % 2 == 0 ? 130 : 47, rpm, lo, c % 3 == 1 ? 1 : -1);
      }
  // Rows past the int32 bounds (n > 65,536: the row epilogue's int64 correction, on the padded factors).
  expect_random_qmm(rng, 3, 65537, 4, 3, -127, -1);
  // More members than one call pads at once (4 MiB of copies: 18 KiB a member here), with the
  // addend's rows and per-member vectors, W packed beforehand or not.
  {
    const std::int64_t r = 12, n = 1000, m = 130, members = 250, rpm = 2, rows = members * rpm;
    const I8 x = rng.int8s(rows * n, -127), w = rng.int8s(m * n, -127);
    const I8 b = rng.int8s(rows * m, -128), v = rng.int8s(members * m, -128);
    QF f(rng, members, m, n, r, 8 + q::rank_shift(static_cast<int>(r)), 3, 231);  // a null block in the second call
    const QAddend add{b.data(), v.data(), m};
    for (bool prepack : {false, true})
      expect_all_levels_equal<std::int8_t>("qmm r=12 in several calls" + std::string(prepack ? ", prepacked" : ""),
                                           rows * m, [&](Backend& be, std::int8_t* y) {
                                             const auto packed = prepack ? be.qpack(m, n, w.data()) : nullptr;
                                             be.qmm({members, rpm}, m, n, x.data(), w.data(), f.f, y, add, packed.get());
                                           });
  }
  struct Edge { std::int64_t n; int b; };
  for (std::int64_t r : {3, 6, 12}) {
    const std::int64_t below = ((std::int64_t{1} << 23) - 1) / (r * 127 * 127);  // the largest n under 2^23
    for (Edge e : {Edge{258, 1}, Edge{259, -1}, Edge{below, 127}, Edge{below + 1, -127}}) {
      const std::int64_t m = 40, rpm = 3;
      const I8 x(static_cast<std::size_t>(2 * rpm * e.n), 127), w = rng.int8s(m * e.n);
      QF f(rng, 2, m, e.n, r, 4);
      for (auto& st : f.storage)
        for (std::int64_t k = 0; k < e.n * r; ++k) st[static_cast<std::size_t>(k)] = static_cast<std::int8_t>(e.b);
      expect_all_levels_equal<std::int8_t>("qmm one-value factors r=" + std::to_string(r) + " n=" +
                                               std::to_string(e.n) + " b=" + std::to_string(e.b),
                                           2 * rpm * m, [&](Backend& be, std::int8_t* y) {
                                             be.qmm({2, rpm}, m, e.n, x.data(), w.data(), f.f, y);
                                           });
    }
  }
}

TEST(Int8Random, QmmRanksAbove16) {
  // Ranks above 16 finish in the row epilogue: x . B four ranks at a time from B^T, the rank
  // product in int64 from A^T. Random operands at one, three and sixteen rows per member (ranks
  // not a multiple of 4 included), the rank product on both sides of the int32 bound, then x at
  // 127 against factors of -128 at n = 65,536, the largest |x . B| the int32 dot products serve.
  Rng rng{18};
  int c = 0;
  for (std::int64_t r : {17, 24, 33, 64})
    for (std::int64_t rpm : {1, 3, 16}) {
      ++c;
      expect_random_qmm(rng, r, c % 2 == 0 ? 1000 : 70, c % 2 == 0 ? 47 : 130, rpm, c % 3 == 0 ? -128 : -127,
                        c % 3 == 1 ? 1 : -1);
    }
  // The rank product at the int32 bound: x 127, B 1, A -128 at rank 17 make p = -128 * 17 * 127 n,
  // which n = 7770 keeps within int32 (the 16-lane path) and n = 7771 does not (the int64 one).
  for (std::int64_t n : {7770, 7771}) {
    const std::int64_t r = 17, m = 20, rpm = 3;
    const I8 x(static_cast<std::size_t>(2 * rpm * n), 127), w = rng.int8s(m * n);
    QF f(rng, 2, m, n, r, 4);
    for (auto& st : f.storage)
      for (std::size_t k = 0; k < st.size(); ++k) st[k] = static_cast<std::int8_t>(k < static_cast<std::size_t>(n * r) ? 1 : -128);
    expect_all_levels_equal<std::int8_t>("qmm r=17 rank product at the int32 bound, n=" + std::to_string(n), 2 * rpm * m,
                                         [&](Backend& be, std::int8_t* y) {
                                           be.qmm({2, rpm}, m, n, x.data(), w.data(), f.f, y);
                                         });
  }
  for (std::int64_t r : {17, 64}) {
    const std::int64_t n = 65536, m = 20, rpm = 3;
    const I8 x(static_cast<std::size_t>(2 * rpm * n), 127), w = rng.int8s(m * n);
    QF f(rng, 2, m, n, r, 4);
    for (auto& st : f.storage) std::fill(st.begin(), st.end(), std::int8_t{-128});
    expect_all_levels_equal<std::int8_t>("qmm r=" + std::to_string(r) + " largest x . B", 2 * rpm * m,
                                         [&](Backend& be, std::int8_t* y) {
                                           be.qmm({2, rpm}, m, n, x.data(), w.data(), f.f, y);
                                         });
  }
}

}  // namespace
}  // namespace eggroll
