// Helpers shared by the EGGROLL math tests: configs, dense member matrices in double, and
// tolerance checks.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "eggroll/backend/backend.hpp"
#include "eggroll/es/strategy.hpp"
#include "eggroll/model/layers.hpp"
#include "support/test_support.hpp"

namespace eggroll::es_test {

using testing::random_tensor;
using testing::random_values;

inline constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

inline EsConfig es_config(const std::string& noiser, std::int64_t population, int rank, double sigma) {
  EsConfig es;
  es.noiser = noiser;
  es.population = population;
  es.rank = rank;
  es.sigma = sigma;
  return es;
}

// Plain SGD at lr 1 without momentum or clipping: the step is exactly -grad.
inline OptimConfig sgd(double lr = 1.0) {
  OptimConfig o;
  o.name = "sgd";
  o.lr = lr;
  o.momentum = 0.0;
  o.clip_norm = 0.0;
  return o;
}

// A strategy over named shapes with random initial values.
inline std::unique_ptr<Strategy> make_strategy(const std::vector<std::pair<std::string, Shape>>& shapes, const EsConfig& es,
                                        const OptimConfig& optim, std::uint64_t seed, Backend& backend) {
  auto s = Strategy::for_shapes(shapes, es, optim, seed, 100, backend);
  std::uint64_t k = 0;
  for (Param& p : s->params().all()) p.value = random_tensor(p.value.shape(), seed * 1000 + ++k);
  return s;
}

inline std::vector<double> to_double(const Tensor& t) {
  const float* v = t.data<float>();
  return std::vector<double>(v, v + t.numel());
}

// W + coef A B^T in double, (m, n).
inline std::vector<double> dense_member(const Tensor& w, const MemberFactors& f) {
  const std::int64_t m = w.dim(0), n = w.dim(1), r = f.a.dim(1);
  std::vector<double> out = to_double(w);
  for (std::int64_t a = 0; a < m; ++a)
    for (std::int64_t b = 0; b < n; ++b) {
      double ab = 0;
      for (std::int64_t c = 0; c < r; ++c)
        ab += static_cast<double>(f.a.data<float>()[a * r + c]) * f.b.data<float>()[b * r + c];
      out[a * n + b] += f.coef * ab;
    }
  return out;
}

// Member i's factors read straight from a view's B-then-A block, coef s_i sigma / sqrt(r): what
// Strategy::member_factors returns (checked in EggrollForward), without a view per member.
inline MemberFactors view_factors(PopulationView& view, const Param& p, std::int64_t i) {
  const Noiser& nz = view.noiser();
  const std::int64_t m = p.rows(), n = p.cols(), r = nz.rank();
  const float* block = view.normals(p, nz.pair_of(i), NoiseTag::factors, r * (m + n));
  MemberFactors f{Tensor(DType::f32, {m, r}), Tensor(DType::f32, {n, r}),
                  nz.sign_of(i) * view.sigma() / std::sqrt(static_cast<double>(r))};
  std::copy_n(block, n * r, f.b.data<float>());
  std::copy_n(block + n * r, m * r, f.a.data<float>());
  return f;
}

// |got - want| <= rel * max |want| + abs for every element.
inline ::testing::AssertionResult close(const std::vector<double>& got, const std::vector<double>& want, double rel,
                                 double abs = 1e-7) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  const double tol = rel * scale + abs;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol))
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", expected " << want[i]
                                           << " (tol " << tol << ")";
  return ::testing::AssertionSuccess();
}

// Scores in [-1, 1) that differ between members (so shaped fitness is not all zero).
inline std::vector<double> member_scores(std::int64_t population, std::uint64_t seed) {
  const auto r = random_values(population, seed);
  return std::vector<double>(r.begin(), r.end());
}

// Shaped fitness computed here from the definitions of ALGORITHM.md 1.3 (independently of
// src/es/shaping.cpp).
inline std::vector<double> shaped(const std::string& shaping, const std::vector<double>& s, std::int64_t group) {
  const std::size_t n = s.size();
  std::vector<double> f(n, 0.0);
  auto zscore = [&](std::size_t b, std::size_t e) {
    double mean = 0, var = 0;
    for (std::size_t i = b; i < e; ++i) mean += s[i];
    mean /= static_cast<double>(e - b);
    for (std::size_t i = b; i < e; ++i) var += (s[i] - mean) * (s[i] - mean);
    var /= static_cast<double>(e - b);
    for (std::size_t i = b; i < e; ++i) f[i] = (s[i] - mean) / std::sqrt(var + 1e-5);
  };
  if (shaping == "zscore") zscore(0, n);
  if (shaping == "group_zscore")
    for (std::size_t b = 0; b < n; b += static_cast<std::size_t>(group)) zscore(b, b + static_cast<std::size_t>(group));
  if (shaping == "centered_rank")
    for (std::size_t i = 0; i < n; ++i) {
      double below = 0, tied = 0;  // rank = below + (tied - 1) / 2 (the mean of the tied ranks)
      for (std::size_t j = 0; j < n; ++j) below += s[j] < s[i], tied += s[j] == s[i];
      f[i] = (below + (tied - 1) / 2) / static_cast<double>(n - 1) - 0.5;
    }
  if (shaping == "antithetic_sign")
    for (std::size_t k = 0; k < n; k += 2) {
      const double d = s[k] > s[k + 1] ? 1.0 : (s[k] < s[k + 1] ? -1.0 : 0.0);
      f[k] = d;
      f[k + 1] = -d;
    }
  if (shaping == "raw") f = s;
  return f;
}

}  // namespace eggroll::es_test
