// The fused float ops against the ops they stand for, bit for bit, at every level and backend:
// perturbed_matmul against gemm_nt then lowrank_correction, and linear (the layer's bias and
// activation in the GEMM's stores) against its ops in sequence. The cross-backend harness with
// its math in double is test_backend_ops.cpp.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/cpu_sgemm.hpp"
#include "eggroll/backend/backend.hpp"
#include "support/lowrank_factors.hpp"
#include "support/test_support.hpp"

namespace eggroll {
namespace {

using testing::Factors;
using testing::simd_levels;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

std::vector<float> values(std::int64_t n, std::uint64_t seed) { return testing::random_values(n, seed); }

// A backend may fuse perturbed_matmul (the cpu backend does at its avx512 level); the header
// promises the bits of gemm_nt followed by lowrank_correction, at every level.
TEST(BackendOps, PerturbedMatmulEqualsGemmThenCorrection) {
  struct S { std::int64_t members, rpm, m, n, r; };
  for (BackendKind kind : {BackendKind::reference, BackendKind::cpu})
  for (const std::string& level : simd_levels(*make_backend(kind)))
  // Tiles of one member, of two, of many, and with the unperturbed member 2; ranks in and out of
  // the unrolled set; one row tile shared by threads (12 rows, 3 threads) and rows split; a
  // member whose rows straddle two blocks of rows (20 rows per member: rows 80-99 across the
  // first block's end at 96) and two threads' shares. {8, 20}, {21, 5} and {11, 10} split a
  // member's rows at 96 so that a row summed alone in the fused call is summed with others in the
  // separate one (the x . B products of several rows at once must give each row's bits).
  // {100, 1}, {40, 1} and {250, 1} take one row per member over several blocks of rows, whose
  // size follows the factor blocks' (whole tiles, the next block's factors queued; 12-row blocks
  // whose factors do not fit; 108 rows). Rank 1 with several rows per member sums x . B four
  // rows at a time: {6, 16} (a masked tail of k) and {21, 5, .., 1} (four rows and one, and a
  // member across the block's end). Rank 1 with n >= 1024 and 64 or more outputs sums x . B in
  // the first panel's tiles: {5, 16, .., 1278, 1} over five k blocks of 256, the last ending in 62
  // past n's multiples of 64; {40, 1, ..} one row per member; {7, 5, ..} blocks whose last rows
  // are not a whole tile (prepare sums theirs); {3, 4, 100, 1024, 1} a narrow last panel.
  // {30, 4, 100, 70, 4}: factors transposed with tails of 6 (n) and 4 (m) values past a vector,
  // and the next blocks' rows of x queued. Ranks 3, 6 and 12 with several rows per member and
  // full tiles: the correction on the accumulators with the rank a loop bound. Ranks 3, 5, 6, 7 and
  // 12 with one row per member: the blocks copied with zero columns to the next power of two
  // (pairs in one copy), over several blocks of rows, with tails of m and n past a vector (at
  // AVX2, rank 12 transposed per pair). Ranks 20 and 33 with one row per member: the blocks
  // transposed once per pair. Rank 16 with 16 rows per member: A^T rows, the rank a loop bound.
  for (S s : {S{37, 1, 512, 64, 1}, S{9, 16, 64, 512, 4}, S{30, 1, 2, 300, 2}, S{5, 3, 33, 65, 3},
              S{26, 1, 96, 40, 4}, S{4, 12, 512, 64, 4}, S{3, 4, 512, 64, 8}, S{7, 24, 40, 24, 2},
              S{8, 20, 64, 80, 4}, S{21, 5, 64, 80, 4}, S{11, 10, 48, 40, 2}, S{21, 5, 40, 72, 8},
              S{100, 1, 600, 300, 4}, S{40, 1, 2048, 256, 4}, S{250, 1, 64, 512, 1}, S{6, 16, 64, 200, 1},
              S{21, 5, 64, 70, 1}, S{5, 16, 64, 1278, 1}, S{40, 1, 64, 1278, 1},
              S{7, 5, 64, 1278, 1}, S{3, 4, 100, 1024, 1}, S{30, 4, 100, 70, 4}, S{9, 16, 64, 512, 3},
              S{6, 8, 128, 100, 6}, S{4, 12, 70, 40, 12}, S{37, 1, 512, 64, 3}, S{30, 1, 70, 300, 6},
              S{100, 1, 600, 300, 5}, S{26, 1, 96, 40, 7}, S{21, 1, 64, 70, 12}, S{9, 1, 2048, 256, 6},
              S{30, 1, 70, 40, 20}, S{13, 1, 100, 130, 33}, S{5, 16, 64, 100, 16}})
  for (int threads : {1, 3}) {
    auto be = make_backend(kind);
    be->set_simd(level);
    be->set_threads(threads);
    SCOPED_TRACE(be->name() + " " + level + " m=" + std::to_string(s.m) + " r=" + std::to_string(s.r) +
                 " threads=" + std::to_string(threads));
    const std::int64_t rows = s.members * s.rpm;
    const auto x = values(rows * s.n, 81), w = values(s.m * s.n, 82);
    Factors f(s.members, s.m, s.n, s.r, 83, 2, true);
    for (bool pairs : {false, true}) {
      // pairs: members 2p and 2p + 1 share one factor block with opposite signs, as antithetic
      // pairs do (the pair of member 2 is unperturbed).
      if (pairs)
        for (std::int64_t j = 1; j < s.members; j += 2) {
          f.blocks[j] = f.blocks[j - 1];
          f.coef[j] = -f.coef[j - 1];
        }
      std::vector<float> apart(static_cast<std::size_t>(rows * s.m), kNan);
      be->gemm_nt(rows, s.m, s.n, x.data(), w.data(), apart.data());
      be->lowrank_correction({s.members, s.rpm}, f.view(), x.data(), apart.data());
      // the cpu backend's blocks of rows at one row per member, either size whatever this L2
      for (cpu_sgemm::FusedBlockRows rule : {cpu_sgemm::FusedBlockRows::fetch_budget, cpu_sgemm::FusedBlockRows::whole}) {
        cpu_sgemm::set_fused_block_rows(rule);
        std::vector<float> fused(apart.size(), kNan);
        be->perturbed_matmul({s.members, s.rpm}, f.view(), x.data(), w.data(), fused.data());
        cpu_sgemm::set_fused_block_rows(cpu_sgemm::FusedBlockRows::automatic);
        ASSERT_EQ(0, std::memcmp(fused.data(), apart.data(), fused.size() * sizeof(float)))
            << "pairs " << pairs << (rule == cpu_sgemm::FusedBlockRows::whole ? ", whole blocks" : ", limited blocks");
      }
    }
  }
}

// Backend::linear promises the bits of its ops in sequence (gemm_nt or perturbed_matmul, add_rows,
// activation); the cpu backend applies the bias and the activation in the GEMM's stores at its
// vector levels: on the accumulators (bias, relu) or on each tile's stored rows (the correction
// added after the store: ranks outside 1, 2, 4, 8, 16, edge tiles, unperturbed members; tanh,
// gelu and silu by the backend's own kernel). Shapes: one row per member with pairs sharing
// factors; x . B in the first panel's tiles over k blocks (n 1278, rank 1); A columns by shuffles
// (rank 4) with a narrow last panel (m 96); the 4-lane tiles (m 3); rank 3; A^T by rank (rank 4,
// 16 rows per member); rank 6 with one row per member (padded to 8). Row 1 of x holds a NaN (relu
// gives 0 for it, as the separate relu does).
TEST(BackendOps, LinearEqualsItsOpsInSequence) {
  struct S { std::int64_t members, rpm, m, n, r; };
  for (BackendKind kind : {BackendKind::reference, BackendKind::cpu})
  for (const std::string& level : simd_levels(*make_backend(kind)))
  for (S s : {S{37, 1, 512, 64, 1}, S{5, 16, 64, 1278, 1}, S{26, 1, 96, 40, 4}, S{7, 2, 3, 17, 4}, S{5, 3, 33, 65, 3},
              S{9, 16, 64, 512, 4}, S{26, 1, 96, 40, 6}})
  for (int threads : {1, 3}) {
    auto be = make_backend(kind);
    be->set_simd(level);
    be->set_threads(threads);
    SCOPED_TRACE(be->name() + " " + level + " members=" + std::to_string(s.members) + " m=" + std::to_string(s.m) +
                 " n=" + std::to_string(s.n) + " r=" + std::to_string(s.r) + " threads=" + std::to_string(threads));
    const std::int64_t rows = s.members * s.rpm;
    auto x = values(rows * s.n, 91);
    x[s.n + 3] = kNan;
    const auto w = values(s.m * s.n, 92), bias = values(s.members * s.m, 93);
    Factors f(s.members, s.m, s.n, s.r, 94, 2, true);
    for (std::int64_t j = 1; j < s.members; j += 4) {  // some antithetic pairs sharing a block
      f.blocks[j] = f.blocks[j - 1];
      f.coef[j] = -f.coef[j - 1];
    }
    const LowRankFactors lf = f.view();
    for (bool use_pack : {false, true})
    for (bool perturbed : {false, true}) {
    // W's pack: the first call below fills it (threads sharing the panels), the others read it
    const auto packed = use_pack ? be->pack(s.m, s.n, w.data()) : nullptr;
    if (use_pack && kind == BackendKind::cpu && level != "scalar") {
      ASSERT_NE(packed, nullptr);
    }
    for (std::int64_t stride : {std::int64_t{-1}, std::int64_t{0}, s.m})  // no bias, one for all, per member
    for (Activation a : {Activation::none, Activation::relu, Activation::tanh, Activation::gelu, Activation::silu}) {
      SCOPED_TRACE(std::string(perturbed ? "perturbed" : "plain") + (use_pack ? ", packed" : "") + " bias stride " +
                   std::to_string(stride) + " " + activation_name(a));
      const MemberRows batch{s.members, s.rpm};
      std::vector<float> apart(static_cast<std::size_t>(rows * s.m), kNan), fused(apart.size(), kNan);
      if (perturbed)
        be->perturbed_matmul(batch, lf, x.data(), w.data(), apart.data());
      else
        be->gemm_nt(rows, s.m, s.n, x.data(), w.data(), apart.data());
      if (stride >= 0) be->add_rows(batch, s.m, bias.data(), stride, apart.data());
      if (a != Activation::none) be->activation(a, rows * s.m, apart.data(), apart.data());
      const RowEpilogue e{stride >= 0 ? bias.data() : nullptr, std::max<std::int64_t>(stride, 0), a};
      be->linear(batch, s.m, s.n, x.data(), w.data(), perturbed ? &lf : nullptr, e, fused.data(), packed.get());
      ASSERT_EQ(0, std::memcmp(fused.data(), apart.data(), fused.size() * sizeof(float)));
    }
    }
  }
}

// A pack serves only the layout it was made for: one made at another level (other panels), or
// for another shape, is ignored, and the call packs W itself. A pack, once filled, is what the
// calls read: a pack of W passed with another matrix gives W's product.
TEST(BackendOps, PackOfAnotherLayoutIsIgnored) {
  auto be = make_backend(BackendKind::cpu);
  const auto levels = simd_levels(*be);
  if (std::find(levels.begin(), levels.end(), "avx512") == levels.end()) GTEST_SKIP() << "no avx512 level here";
  const std::int64_t rows = 20, m = 70, n = 33;
  const auto x = values(rows * n, 101), w = values(m * n, 102), w_other = values(m * n, 103);
  be->set_simd("avx512");
  const auto at_avx512 = be->pack(m, n, w.data());
  const auto narrow = be->pack(4, n, w.data());  // the 4-lane panels of an m <= 4 matrix
  std::vector<float> want(static_cast<std::size_t>(rows * m)), got(want.size()), other(want.size());
  be->linear({rows, 1}, m, n, x.data(), w.data(), nullptr, {}, got.data(), at_avx512.get());  // fills it
  for (const std::string& level : levels) {
    be->set_simd(level);
    SCOPED_TRACE(level);
    be->linear({rows, 1}, m, n, x.data(), w.data(), nullptr, {}, want.data(), nullptr);
    be->linear({rows, 1}, m, n, x.data(), w.data(), nullptr, {}, got.data(), at_avx512.get());
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
    be->linear({rows, 1}, m, n, x.data(), w.data(), nullptr, {}, got.data(), narrow.get());
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
    be->linear({rows, 1}, m, n, x.data(), w_other.data(), nullptr, {}, other.data(), at_avx512.get());
    const bool avx512_gemm = level.rfind("avx512", 0) == 0;  // avx512, avx512_vnni, avx512_amx
    EXPECT_EQ(avx512_gemm, 0 == std::memcmp(want.data(), other.data(), want.size() * sizeof(float)));
  }
  be->set_simd("auto");
}

// Independent callers on one empty pack (each thread its own rows, as the trainer's and the
// bench's threads run their chunks of members, nesting off) fill it together: every thread's rows
// come out as without a pack, plain and perturbed, and the pack ends filled, so that later calls
// read it. At every vector level; with 1 to 4 callers and matrices of 1 to 33 panels.
TEST(BackendOps, CallersFillOnePackTogether) {
  auto be = make_backend(BackendKind::cpu);
  for (const std::string& level : simd_levels(*be)) {
    if (level == "scalar") continue;
    be->set_simd(level);
    for (std::int64_t m : {std::int64_t{40}, std::int64_t{2100}})
    for (int callers : {1, 2, 4}) {
      SCOPED_TRACE(level + " m=" + std::to_string(m) + " callers=" + std::to_string(callers));
      const std::int64_t members = 12, n = 70, rows = members * callers;
      const auto x = values(rows * n, 111), w = values(m * n, 112);
      Factors f(members, m, n, 2, 113, 2, true);
      const LowRankFactors lf = f.view();
      for (bool perturbed : {false, true}) {
        std::vector<float> want(static_cast<std::size_t>(rows * m)), got(want.size(), kNan);
        for (int c = 0; c < callers; ++c)
          be->linear({members, 1}, m, n, x.data() + c * members * n, w.data(), perturbed ? &lf : nullptr, {},
                     want.data() + c * members * m, nullptr);
        const auto packed = be->pack(m, n, w.data());
        ASSERT_NE(packed, nullptr);
        const auto* panels = dynamic_cast<const cpu_sgemm::detail::PackedPanels*>(packed.get());
        ASSERT_NE(panels, nullptr);
        EXPECT_FALSE(panels->filled());
#pragma omp parallel num_threads(callers)
        {
          const int c = omp_get_thread_num();
          be->linear({members, 1}, m, n, x.data() + c * members * n, w.data(), perturbed ? &lf : nullptr, {},
                     got.data() + c * members * m, packed.get());
        }
        EXPECT_TRUE(panels->filled());
        EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
        // filled: a later call reads the panels (W's values are not read again)
        std::vector<float> later(static_cast<std::size_t>(members * m)), zero_w(w.size(), 0.0f);
        be->linear({members, 1}, m, n, x.data(), zero_w.data(), perturbed ? &lf : nullptr, {}, later.data(),
                   packed.get());
        EXPECT_EQ(0, std::memcmp(want.data(), later.data(), later.size() * sizeof(float)));
      }
    }
  }
  be->set_simd("auto");
}

}  // namespace
}  // namespace eggroll
