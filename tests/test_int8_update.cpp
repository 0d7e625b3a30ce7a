// The int8 update's ops (ALGORITHM.md 2.6): the z-test's sums (qupdate_accumulate) and the
// integer step (qapply_moves), every SIMD level against the reference bit for bit, at every
// thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/int8_ops.hpp"
#include "eggroll/backend/backend.hpp"
#include "support/int8_test_support.hpp"

namespace eggroll {
namespace {

using namespace int8_test;

// Random factor blocks of len values for `pairs` pairs, every fifth pair's block missing (null).
struct RandomBlocks {
  std::vector<I8> storage;
  std::vector<const std::int8_t*> blocks;
};
RandomBlocks random_blocks(Rng& rng, std::int64_t pairs, std::int64_t len) {
  RandomBlocks f;
  for (std::int64_t k = 0; k < pairs; ++k) {
    f.storage.push_back(rng.int8s(len, -128, 127));
    f.blocks.push_back(k % 5 == 4 ? nullptr : f.storage.back().data());
  }
  return f;
}

TEST(Int8Random, UpdateAccumulate) {
  Rng rng{5};
  // signs: 0 mixed, 1 mostly +, 2 all -; all_min: every factor value -128
  // noise_a: A and B within [-63, 63] (the int8 noise's range), where the AVX2 level sums eight
  // terms per lane and step at rank 1 and ranks that are multiples of 4 (noise_a 2: A mostly -63,
  // some 63, against B mostly 63, some -63, so that a chunk's int32 sums come near their bound;
  // 3: one A of 64; 4: one B of -64)
  struct S { std::int64_t m, n, r, pairs; int max_d; int signs = 0; bool all_min = false; int noise_a = 0; };
  // The AVX-512 level sums four terms per lane when every |d| <= 1, else int16 pairs. 70000 pairs
  // of rank 4 and 125000 of rank 2: two chunks of its int32 partial sums per sign, each term at
  // its largest (-128 * (127 + 128); the u8 operand is A + 128 at rank 4, B + 128 at ranks 1 and
  // 2). 70 x 37 at ranks 1, 2, 4: whole blocks of 64 terms (their A interleaved and transposed 16
  // rows at a time) with a partial block of rows after them, and a partial block of terms. Both
  // signs are summed in one pass over z: also one sign only, and two chunks of + terms against
  // one of - terms (90000 pairs, one in nine -). 20 x 130 at rank 4 with 3100 pairs: the in-place
  // sum's passes of quads over three column blocks. 21 x 40 at rank 4 with |d| up to 127: the
  // int16 terms at every level, their coefficients packed eight rows x four pairs at a time (and
  // the rows and pairs left over one by one). Ranks 8, 12 and 16: a quad is four columns of one
  // pair, summed in place at ranks 8 and 16 as at rank 4, packed by a gather at rank 12 (70 x 37,
  // 21 x 50 and 19 x 130 with partial blocks of rows and terms; 70000 pairs of rank 8: several
  // chunks, each term at its largest). The AMX level sums signed bytes at ranks 4, 8, 16: 70000
  // pairs of rank 4 with every value -128 and about 50000 + quads, each 4 * 2^14, more than int32
  // holds unless the quads go to z in runs (m < n, and m > n where the sums come out transposed).
  for (S s : {S{1, 1, 1, 1, 1}, S{3, 17, 2, 7, 1}, S{47, 63, 3, 64, 1}, S{65, 1000, 1, 9, 1}, S{16, 256, 8, 33, 127},
              S{5, 3, 1, 1200, 127}, S{13, 70, 4, 40, 1}, S{70, 37, 4, 200, 1}, S{70, 37, 2, 300, 1},
              S{70, 37, 1, 500, 1}, S{3, 5, 4, 70000, 1}, S{3, 5, 2, 125000, 1}, S{9, 70, 4, 30, 1, 2},
              S{3, 70, 4, 90000, 1, 1}, S{20, 130, 4, 3100, 1}, S{21, 40, 4, 50, 127}, S{70, 37, 8, 100, 1},
              S{19, 130, 16, 45, 1}, S{3, 5, 8, 70000, 1}, S{21, 50, 12, 30, 1}, S{2, 17, 4, 70000, 1, 1, true},
              S{17, 2, 4, 70000, 1, 1, true},
              // Rank 1's vector packing: 26 terms (three groups of eight and two left over) by 40
              // rows (two groups of 16 and eight left over), B in a whole block of 16 rows and a part.
              S{40, 20, 1, 47, 1},
              // The AVX2 level's quads: rows and quads in whole groups of eight and left over,
              // an odd and an even number of quads a sign, columns past the last block of 16,
              // ranks 4, 8, 12 and 16; 70000 pairs of rank 4, each term at its largest: two chunks
              // of + quads; one A value of 64 or one B value of -64: the int16 pairs instead
              // (ranks 4 and 1).
              S{19, 37, 4, 40, 1, 0, false, 1}, S{19, 37, 4, 41, 1, 2, false, 1}, S{70, 33, 8, 21, 1, 0, false, 1},
              S{9, 16, 12, 11, 1, 2, false, 1}, S{17, 50, 16, 9, 1, 1, false, 1}, S{5, 3, 4, 70000, 1, 1, false, 2},
              S{13, 40, 4, 30, 1, 0, false, 3}, S{13, 40, 4, 30, 1, 0, false, 4},
              // rank 1: four pairs a quad, the last one short; 140000 pairs: two chunks of + quads
              S{40, 37, 1, 303, 1, 0, false, 1}, S{70, 20, 1, 90, 1, 1, false, 1}, S{5, 3, 1, 140000, 1, 1, false, 2},
              S{13, 40, 1, 30, 1, 0, false, 3}, S{13, 40, 1, 30, 1, 0, false, 4},
              // The AVX-512 level's signs in one tile: both at their largest terms (the u8 factor
              // 127 for d = +1, -128 for d = -1, against -128: 4 * 255 * -128 a quad either way),
              // chunks holding quads of both signs (ranks 1 and 2, packed; rank 4, in place).
              S{3, 5, 1, 140000, 1, 0, false, 5}, S{3, 5, 2, 125000, 1, 0, false, 5}, S{3, 5, 4, 70000, 1, 0, false, 5},
              // The AVX2 level's signs in one tile: B 63 for d = +1 and -63 for d = -1 against A
              // -63 (126 * -63 a term either way), two chunks of each sign at rank 4.
              S{5, 3, 4, 70000, 1, 0, false, 6}, S{5, 3, 1, 140000, 1, 0, false, 6},
              // Ranks 8 and 16 with more rows of z than a pass's A lines leave in an L2 of up to
              // 2 MiB: the packed quads at the AVX-512 level.
              S{1100, 9, 16, 40, 1}, S{1100, 9, 8, 60, 1, 1},
              // Ranks 5, 6, 7, 13 and 14, which the AVX-512 level sums at 8 and 16 on copies with
              // zero columns (in place, and packed at 1100 rows; 70000 pairs of rank 6 at their
              // largest terms: two chunks of copies).
              S{30, 45, 6, 50, 1}, S{19, 70, 5, 40, 1, 1}, S{21, 33, 7, 30, 1, 2}, S{13, 40, 14, 25, 1},
              S{17, 20, 13, 33, 1}, S{1100, 9, 6, 40, 1}, S{3, 5, 6, 70000, 1}}) {
    RandomBlocks f = random_blocks(rng, s.pairs, s.r * (s.n + s.m));
    std::vector<I8>& storage = f.storage;
    const std::vector<const std::int8_t*>& blocks = f.blocks;
    I8 d;
    for (std::int64_t k = 0; k < s.pairs; ++k) {
      const bool minus = s.signs == 0 ? k % 2 == 1 : (s.signs == 1 ? k % 9 == 0 : true);
      d.push_back(static_cast<std::int8_t>(s.signs == 0 && k % 3 == 2 ? 0 : (minus ? -s.max_d : s.max_d)));
    }
    if (s.noise_a != 0)
      for (auto& b : storage) {
        for (auto& v : b) v = static_cast<std::int8_t>(v % 64);
        if (s.noise_a == 2) {  // B = 63 and -63 against A = -63 and 63
          for (std::int64_t e = 0; e < static_cast<std::int64_t>(b.size()); ++e)
            b[static_cast<std::size_t>(e)] = e < s.r * s.n ? (e % 9 == 0 ? -63 : 63) : (e % 8 == 0 ? 63 : -63);
        }
      }
    if (s.noise_a == 3) storage[7][static_cast<std::size_t>(s.r * s.n + 5)] = 64;
    if (s.noise_a == 4) storage[7][static_cast<std::size_t>(s.r * s.n - 3)] = -64;
    if (s.pairs == 1200)  // every term -128 * -128 * 127: an int32 sum over the pairs would overflow
      for (auto& b : storage) std::fill(b.begin(), b.end(), std::int8_t{-128});
    if (s.all_min)
      for (auto& b : storage) std::fill(b.begin(), b.end(), std::int8_t{-128});
    else if (s.pairs >= 70000 && s.noise_a == 0) {  // the u8 operand at 255 against -128: B = 127, A = -128 (summed in place: the reverse)
      // (ranks 3, 5 .. 7 and 13 .. 15 as the power of two above them at the AVX-512 level)
      const bool in_place = s.r == 4 || s.r == 8 || s.r == 16 || s.r == 3 || (s.r >= 5 && s.r <= 7) || s.r >= 13;
      for (auto& b : storage) {
        const std::int8_t big = 127, small = -128;
        std::fill(b.begin(), b.begin() + s.r * s.n, in_place ? small : big);
        std::fill(b.begin() + s.r * s.n, b.end(), in_place ? big : small);
      }
    }
    if (s.noise_a == 6)  // B by sign at +-63, A -63
      for (std::int64_t k = 0; k < s.pairs; ++k) {
        I8& b = storage[static_cast<std::size_t>(k)];
        std::fill(b.begin(), b.begin() + s.r * s.n, static_cast<std::int8_t>(d[static_cast<std::size_t>(k)] > 0 ? 63 : -63));
        std::fill(b.begin() + s.r * s.n, b.end(), std::int8_t{-63});
      }
    if (s.noise_a == 5)  // the u8 operand's factor (B at ranks 1 and 2, A at 4) by sign, the other -128
      for (std::int64_t k = 0; k < s.pairs; ++k) {
        I8& b = storage[static_cast<std::size_t>(k)];
        const bool b_u8 = s.r == 1 || s.r == 2;
        const std::int8_t u8_factor = d[static_cast<std::size_t>(k)] > 0 ? 127 : -128;
        std::fill(b.begin(), b.begin() + s.r * s.n, b_u8 ? u8_factor : std::int8_t{-128});
        std::fill(b.begin() + s.r * s.n, b.end(), b_u8 ? std::int8_t{-128} : u8_factor);
      }
    std::vector<std::int64_t> z0(static_cast<std::size_t>(s.m * s.n));
    for (auto& v : z0) v = static_cast<std::int64_t>(rng.next() % 2000001) - 1000000;
    expect_all_levels_equal<std::int64_t>("qupdate_accumulate", s.m * s.n, [&](Backend& be, std::int64_t* z) {
      std::copy(z0.begin(), z0.end(), z);
      be.qupdate_accumulate(s.m, s.n, s.r, s.pairs, blocks.data(), d.data(), z);
    });
  }
}

TEST(Int8Random, UpdateApply) {
  // qupdate_apply (the sums and the step in one) against the reference's two ops, at every level:
  // one pass of quads and several (3100 and 700 pairs at ranks 4 and 8, where the AVX-512 level
  // stores, adds, then applies), ranks 16, 1 and 12 (the last two through a z of their own), |d|
  // up to 127, thresholds that move most values, some and none, w at the clip's ends; rank 16 with
  // 1100 rows (the AVX-512 level's packed quads into a z of its own, then the step), rank 6 (its
  // copies padded to 8 into a z of its own).
  Rng rng{13};
  struct S { std::int64_t m, n, r, pairs; int max_d; };
  for (S s : {S{70, 37, 4, 200, 1}, S{20, 130, 4, 3100, 1}, S{19, 130, 16, 45, 1}, S{70, 37, 8, 700, 1},
              S{40, 20, 1, 47, 1}, S{21, 50, 12, 30, 1}, S{13, 40, 4, 50, 127}, S{1100, 7, 16, 30, 1},
              S{30, 45, 6, 50, 1}}) {
    const RandomBlocks f = random_blocks(rng, s.pairs, s.r * (s.n + s.m));
    const std::vector<const std::int8_t*>& blocks = f.blocks;
    I8 d;
    for (std::int64_t k = 0; k < s.pairs; ++k)
      d.push_back(static_cast<std::int8_t>(static_cast<std::int64_t>(rng.next() % 3) - 1) * s.max_d);
    const std::int64_t count = s.m * s.n;
    auto ref = make_backend(BackendKind::reference);
    std::vector<std::int64_t> z(static_cast<std::size_t>(count), 0);
    ref->qupdate_accumulate(s.m, s.n, s.r, s.pairs, blocks.data(), d.data(), z.data());
    std::vector<std::int64_t> magnitudes;
    for (std::int64_t v : z) magnitudes.push_back(v < 0 ? -v : v);
    std::sort(magnitudes.begin(), magnitudes.end());
    I8 w0 = rng.int8s(count, -127, 127);
    for (std::int64_t i = 0; i < count; i += 7) w0[static_cast<std::size_t>(i)] = static_cast<std::int8_t>(i % 2 ? 127 : -127);
    for (std::int64_t threshold : {std::int64_t{1}, magnitudes[magnitudes.size() / 2], std::int64_t{1} << 50}) {
      expect_all_levels_equal<std::int64_t>("qupdate_apply", count + 1, [&](Backend& be, std::int64_t* out) {
        I8 w = w0;
        const std::int64_t moved = be.qupdate_apply(s.m, s.n, s.r, s.pairs, blocks.data(), d.data(), threshold, w.data());
        for (std::int64_t i = 0; i < count; ++i) out[i] = w[static_cast<std::size_t>(i)];
        out[count] = moved;
      });
    }
  }
}

TEST(Int8Random, ApplyMoves) {
  // z around the threshold (both signs, zero, far beyond it) and w at the clip's ends, at lengths
  // with a partial vector and with several chunks; every threshold kind (below 1, 1, large).
  Rng rng{12};
  for (std::int64_t n : {1, 15, 17, 4096 + 33, 3 * 4096}) {
    std::vector<std::int64_t> z(static_cast<std::size_t>(n));
    for (auto& v : z) {
      const std::int64_t t = static_cast<std::int64_t>(rng.next() % 7);
      const std::int64_t pick[7] = {0, 5, -5, 4, -4, std::int64_t{1} << 40, -(std::int64_t{1} << 40)};
      v = pick[t] + static_cast<std::int64_t>(rng.next() % 3) - 1;
    }
    const I8 w0 = rng.int8s(n, -127, 127);
    I8 w_edges = w0;
    for (std::int64_t i = 0; i < n; i += 3) w_edges[i] = static_cast<std::int8_t>(i % 2 ? 127 : -127);
    for (std::int64_t threshold :
         {std::int64_t{-3}, std::int64_t{0}, std::int64_t{1}, std::int64_t{5}, std::int64_t{1} << 50})
      for (const I8* w : std::vector<const I8*>{&w0, &w_edges}) {
        std::int64_t want_moved = -1;
        expect_all_levels_equal<std::int8_t>("qapply_moves", n, [&](Backend& be, std::int8_t* out) {
          std::copy(w->begin(), w->end(), out);
          const std::int64_t moved = be.qapply_moves(n, z.data(), threshold, out);
          if (want_moved < 0) want_moved = moved;
          EXPECT_EQ(want_moved, moved) << "n " << n << " threshold " << threshold;
        });
      }
  }
}

TEST(Int8Random, UpdateThreadsDoNotChangeBits) {
  Rng rng{6};
  const std::int64_t m = 130, n = 1000;
  auto cpu = make_backend(BackendKind::cpu);
  LevelGuard guard;
  // the update accumulator: 1 vs 2 and 3 threads (rank 4: the AVX-512 level reads the factors in
  // place, a thread's share of column blocks starting inside one; 3100 pairs: several passes of
  // quads; ranks 1 and 3, packed, with m >= n and m < n)
  struct U { std::int64_t m, n, rank, pairs; };
  for (U u : {U{m, n, 3, 20}, U{m, n, 4, 20}, U{20, 130, 4, 3100}, U{n, 70, 1, 300}, U{70, 200, 1, 300},
              U{200, 130, 3, 40}}) {
    std::vector<I8> storage;
    std::vector<const std::int8_t*> blocks;
    for (std::int64_t k = 0; k < u.pairs; ++k) {
      storage.push_back(rng.int8s(u.rank * (u.n + u.m), -128, 127));
      blocks.push_back(storage.back().data());
    }
    const I8 d = rng.int8s(u.pairs, -1, 1);
    for (const std::string& l : levels()) {
      cpu_int8::set_level(l.c_str());
      std::vector<std::int64_t> z1(static_cast<std::size_t>(u.m * u.n), 7), z2 = z1;
      cpu->set_threads(1);
      cpu->qupdate_accumulate(u.m, u.n, u.rank, u.pairs, blocks.data(), d.data(), z1.data());
      for (int threads : {2, 3}) {
        std::fill(z2.begin(), z2.end(), 7);
        cpu->set_threads(threads);
        cpu->qupdate_accumulate(u.m, u.n, u.rank, u.pairs, blocks.data(), d.data(), z2.data());
        EXPECT_EQ(z1, z2) << l << " rank " << u.rank << " pairs " << u.pairs << " threads " << threads;
      }
    }
  }
  cpu->set_threads(omp_get_num_procs());
}

}  // namespace
}  // namespace eggroll
