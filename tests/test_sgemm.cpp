// The cpu fp32 GEMM y = x W^T (cpu_sgemm.hpp): at every SIMD level this machine runs, each
// element must equal the FMA chain over k = 0 .. n-1 bit for bit and agree with a double-precision
// product and the reference backend within rounding bounds, on odd and model shapes; a row's bits
// must not depend on the rows of the call, the thread count or an enclosing parallel region.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_sgemm.hpp"
#include "eggroll/backend/backend.hpp"
#include "eggroll/core/error.hpp"
#include "support/test_support.hpp"

namespace eggroll {
namespace {

using testing::random_values;

constexpr std::int64_t kGuard = 19;  // floats past every output that gemm_nt must not touch
constexpr float kPoison = -7.25e30f;

// The SIMD levels this machine runs, lowest first; the guard restores the detected level.
std::vector<std::string> levels() { return cpu_sgemm::levels(); }
struct LevelGuard {
  std::string saved = cpu_sgemm::level();
  ~LevelGuard() { cpu_sgemm::set_level(saved.c_str()); }
};
struct ThreadGuard {
  int saved = omp_get_max_threads();
  ~ThreadGuard() { omp_set_num_threads(saved); }
};

// gemm_nt into a poisoned buffer; fails the test if the guard tail past rows * m was written.
std::vector<float> run_gemm(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w) {
  std::vector<float> y(static_cast<std::size_t>(rows * m + kGuard), kPoison);
  cpu_sgemm::gemm_nt(rows, m, n, x, w, y.data());
  for (std::int64_t i = rows * m; i < rows * m + kGuard; ++i)
    EXPECT_EQ(y[static_cast<std::size_t>(i)], kPoison) << "wrote past the output at " << i;
  y.resize(static_cast<std::size_t>(rows * m));
  return y;
}

// The defining order: fma(x[k], W[a][k], acc) for k = 0 .. n-1 from +0.
float fma_chain(const float* xi, const float* wa, std::int64_t n) {
  float acc = 0.0f;
  for (std::int64_t k = 0; k < n; ++k) acc = std::fma(xi[k], wa[k], acc);
  return acc;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// The FMA chain of every element of x W^T: the bits every level must produce.
std::vector<float> chain_product(std::int64_t rows, std::int64_t m, std::int64_t n, const std::vector<float>& x,
                                 const std::vector<float>& w) {
  std::vector<float> y(static_cast<std::size_t>(rows * m));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t a = 0; a < m; ++a) y[static_cast<std::size_t>(i * m + a)] = fma_chain(&x[i * n], &w[a * n], n);
  return y;
}

// y within the rounding bound n u sum_k |x_k w_k| of the double-precision product (u = 2^-24; the
// bound for any order of the n - 1 float additions), at most 5 failures reported.
void expect_near_exact(std::int64_t rows, std::int64_t m, std::int64_t n, const std::vector<float>& x,
                       const std::vector<float>& w, const std::vector<float>& y) {
  int reported = 0;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t a = 0; a < m; ++a) {
      double exact = 0.0, magnitude = 0.0;
      for (std::int64_t k = 0; k < n; ++k) {
        const double p = static_cast<double>(x[i * n + k]) * w[a * n + k];
        exact += p;
        magnitude += std::fabs(p);
      }
      const double got = y[static_cast<std::size_t>(i * m + a)], bound = n * std::ldexp(1.0, -24) * magnitude;
      if (std::fabs(got - exact) > bound && reported++ < 5)
        ADD_FAILURE() << "rows " << rows << " m " << m << " n " << n << ": y[" << i << "][" << a << "] = " << got
                      << ", exact " << exact << ", bound " << bound;
    }
}

// y equals want bit for bit; reports the first differing element.
void expect_same_bits(const std::vector<float>& y, const std::vector<float>& want, std::int64_t m,
                      const std::string& what) {
  ASSERT_EQ(y.size(), want.size()) << what;
  for (std::size_t e = 0; e < y.size(); ++e)
    if (!same_bits(y[e], want[e])) {
      ADD_FAILURE() << what << ": y[" << e / m << "][" << e % m << "] = " << y[e] << ", FMA chain " << want[e];
      return;
    }
}

TEST(Sgemm, HandComputedChain) {
  // x = (2^-25, 1 + 2^-12), W[a] = (1, 1 + 2^-12). The chain fma(1 + 2^-12, 1 + 2^-12, 2^-25) sees
  // the exact 1 + 2^-11 + 2^-24 + 2^-25 and rounds up to 1 + 2^-11 + 2^-23. A separate multiply
  // (1 + 2^-11 + 2^-24 ties to 1 + 2^-11) then add, or the reverse k order, gives 1 + 2^-11.
  // 13 rows x 33 outputs put the value in full micro-tiles and in row and column tails.
  LevelGuard guard;
  const std::int64_t rows = 13, m = 33;
  const float e12 = std::ldexp(1.0f, -12);
  std::vector<float> x, w;
  for (std::int64_t i = 0; i < rows; ++i) x.insert(x.end(), {std::ldexp(1.0f, -25), 1.0f + e12});
  for (std::int64_t a = 0; a < m; ++a) w.insert(w.end(), {1.0f, 1.0f + e12});
  const float want = 1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -23);
  for (const std::string& l : levels()) {
    cpu_sgemm::set_level(l.c_str());
    for (float v : run_gemm(rows, m, 2, x.data(), w.data())) ASSERT_EQ(v, want) << l;
  }
}

TEST(Sgemm, OddShapesEqualTheChainAtEveryLevel) {
  LevelGuard guard;
  const auto all_levels = levels();
  const std::int64_t row_counts[] = {1, 5, 11, 12, 13, 25, 37};
  const std::int64_t ms[] = {1, 2, 15, 16, 17, 31, 32, 33, 48, 49, 64, 65, 70, 95, 96, 121};
  const std::int64_t ns[] = {1, 2, 3, 4, 7, 16, 17, 64, 65, 255, 256, 257, 300};
  std::uint64_t seed = 1;
  for (std::int64_t rows : row_counts)
    for (std::int64_t m : ms)
      for (std::int64_t n : ns) {
        const auto x = random_values(rows * n, seed++);
        const auto w = random_values(m * n, seed++);
        const auto want = chain_product(rows, m, n, x, w);
        for (const std::string& l : all_levels) {
          cpu_sgemm::set_level(l.c_str());
          const auto y = run_gemm(rows, m, n, x.data(), w.data());
          expect_same_bits(y, want, m, l + " rows " + std::to_string(rows) + " m " + std::to_string(m) + " n " +
                                           std::to_string(n));
          if (l == all_levels.back()) expect_near_exact(rows, m, n, x, w, y);
        }
        if (HasFailure()) return;
      }
}

// The models' weight shapes (m, n): MLPs 4-256-2, 64-512-64, 256-2048-256 and the LM's matrices.
struct ModelShape {
  std::int64_t m, n;
};
constexpr ModelShape kModelShapes[] = {{256, 4},   {2, 256},     {512, 64},  {64, 512}, {2048, 256},
                                       {256, 2048}, {256, 256}, {1024, 256}, {256, 1024}};

TEST(Sgemm, ModelShapesEqualTheChainAndAgreeWithTheReferenceBackend) {
  LevelGuard guard;
  auto reference = make_backend(BackendKind::reference);
  const std::int64_t rows = 29;
  std::uint64_t seed = 100;
  for (const ModelShape& s : kModelShapes) {
    const auto x = random_values(rows * s.n, seed++);
    const auto w = random_values(s.m * s.n, seed++);
    std::vector<float> ref(static_cast<std::size_t>(rows * s.m));
    reference->gemm_nt(rows, s.m, s.n, x.data(), w.data(), ref.data());
    const auto want = chain_product(rows, s.m, s.n, x, w);
    expect_near_exact(rows, s.m, s.n, x, w, want);
    for (const std::string& l : levels()) {
      cpu_sgemm::set_level(l.c_str());
      const auto y = run_gemm(rows, s.m, s.n, x.data(), w.data());
      expect_same_bits(y, want, s.m, l + " (" + std::to_string(s.m) + ", " + std::to_string(s.n) + ")");
      // Across backends (DESIGN.md contract 3): |a - b| <= 1e-5 max |row|.
      for (std::int64_t i = 0; i < rows; ++i) {
        float row_max = 0.0f;
        for (std::int64_t a = 0; a < s.m; ++a) row_max = std::max(row_max, std::fabs(ref[i * s.m + a]));
        for (std::int64_t a = 0; a < s.m; ++a)
          ASSERT_LE(std::fabs(y[i * s.m + a] - ref[i * s.m + a]), 1e-5f * row_max)
              << l << " (" << s.m << ", " << s.n << ") y[" << i << "][" << a << "]";
      }
    }
  }
}

// Rows [a, b) computed alone equal the same rows of one call over all rows, bit for bit: sub-ranges
// that start and end inside the micro-tiles, single rows, and the whole tail.
TEST(Sgemm, RowsDoNotDependOnTheRowsOfTheCall) {
  LevelGuard guard;
  const std::int64_t rows = 203;
  const ModelShape shapes[] = {{70, 300}, {2048, 256}, {256, 1024}, {2, 256}, {17, 5}};
  const std::int64_t ranges[][2] = {{0, 7}, {0, 1}, {5, 6}, {3, 40}, {13, 203}, {100, 197}, {202, 203}};
  for (const std::string& l : levels()) {
    cpu_sgemm::set_level(l.c_str());
    std::uint64_t seed = 300;
    for (const ModelShape& s : shapes) {
      const auto x = random_values(rows * s.n, seed++);
      const auto w = random_values(s.m * s.n, seed++);
      const auto all = run_gemm(rows, s.m, s.n, x.data(), w.data());
      for (const auto& r : ranges) {
        const auto part = run_gemm(r[1] - r[0], s.m, s.n, x.data() + r[0] * s.n, w.data());
        EXPECT_EQ(std::memcmp(part.data(), all.data() + r[0] * s.m, part.size() * sizeof(float)), 0)
            << l << " (" << s.m << ", " << s.n << ") rows [" << r[0] << ", " << r[1] << ")";
      }
    }
  }
}

TEST(Sgemm, RowsDoNotDependOnTheThreadCount) {
  LevelGuard guard;
  ThreadGuard threads;
  const std::int64_t rows = 157;
  const ModelShape shapes[] = {{2048, 256}, {64, 512}, {33, 300}, {2, 256}};
  for (const std::string& l : levels()) {
    cpu_sgemm::set_level(l.c_str());
    std::uint64_t seed = 500;
    for (const ModelShape& s : shapes) {
      const auto x = random_values(rows * s.n, seed++);
      const auto w = random_values(s.m * s.n, seed++);
      omp_set_num_threads(1);
      const auto one = run_gemm(rows, s.m, s.n, x.data(), w.data());
      for (int t : {2, 3, 5}) {
        omp_set_num_threads(t);
        const auto many = run_gemm(rows, s.m, s.n, x.data(), w.data());
        EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)), 0)
            << l << " (" << s.m << ", " << s.n << ") 1 vs " << t << " threads";
      }
    }
  }
}

// Called from the threads of a parallel region (nesting off, as the cpu backend sets it), each
// on its own rows: the same bits as one call, and every thread uses its own packing buffer.
TEST(Sgemm, InsideAParallelRegionEachThreadRunsItsOwnCall) {
  ThreadGuard threads;
  const int saved_levels = omp_get_max_active_levels();
  omp_set_max_active_levels(1);
  omp_set_num_threads(2);
  const std::int64_t rows = 96, m = 300, n = 257;
  const auto x = random_values(rows * n, 700);
  const auto w = random_values(m * n, 701);
  const auto all = run_gemm(rows, m, n, x.data(), w.data());
  std::vector<float> y(static_cast<std::size_t>(rows * m), kPoison);
#pragma omp parallel for schedule(static, 1)
  for (std::int64_t block = 0; block < 8; ++block)
    cpu_sgemm::gemm_nt(rows / 8, m, n, x.data() + block * (rows / 8) * n, w.data(), y.data() + block * (rows / 8) * m);
  omp_set_max_active_levels(saved_levels);
  EXPECT_EQ(std::memcmp(all.data(), y.data(), all.size() * sizeof(float)), 0);
}

TEST(Sgemm, EmptyShapes) {
  const std::vector<float> x = random_values(12, 1), w = random_values(12, 2);
  const auto y = run_gemm(3, 4, 0, x.data(), w.data());  // n = 0: an empty sum is +0
  for (float v : y) EXPECT_TRUE(same_bits(v, 0.0f));
  run_gemm(0, 4, 3, x.data(), w.data());  // nothing to write: the guard stays poisoned
  run_gemm(4, 0, 3, x.data(), w.data());
  std::vector<float> y2(1, kPoison);
  EXPECT_THROW(cpu_sgemm::gemm_nt(-1, 1, 1, x.data(), w.data(), y2.data()), Error);
}

TEST(Sgemm, UnknownLevelThrows) {
  LevelGuard guard;
  EXPECT_THROW(cpu_sgemm::set_level("avx1024"), Error);
  EXPECT_NO_THROW(cpu_sgemm::set_level("auto"));
  EXPECT_NO_THROW(cpu_sgemm::set_level("scalar"));
  EXPECT_STREQ(cpu_sgemm::level(), "scalar");
}

}  // namespace
}  // namespace eggroll
