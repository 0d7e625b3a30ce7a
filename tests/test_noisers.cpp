// The noisers other than EGGROLL (ALGORITHM.md 1.5: open_es, sparse, eggroll_sign,
// eggroll_baseline, noop) against their formulas, and the non-finite score policy (1.3).
#include <gtest/gtest.h>

#include "support/es_test_helpers.hpp"

namespace eggroll {
namespace {

using namespace es_test;
using testing::random_tensor;
using testing::random_values;

// ---- (d) the other noisers ----

TEST(OtherNoisers, OpenEsMemberMatrixAndUpdateAreFullRank) {
  const std::int64_t m = 6, n = 5, population = 12;
  const double sigma = 0.2;
  auto backend = make_backend(BackendKind::cpu);
  auto s = make_strategy({{"w", {m, n}}, {"b", {m}}}, es_config("open_es", population, 2, sigma), sgd(1.0), 31, *backend);
  const Param& w = s->params().at("w");
  const std::vector<double> w0 = to_double(w.value);
  auto view = s->ask();
  const std::vector<double> scores = member_scores(population, 32);
  const std::vector<double> f = shaped("zscore", scores, 2);
  std::vector<double> dw(w0.size(), 0.0);
  const double nn = static_cast<double>(population);
  for (std::int64_t i = 0; i < population; ++i) {
    // W_i = W + s_i sigma E_i, E_i the pair's full-rank normals (tag full).
    const float* e = view->normals(w, i / 2, NoiseTag::full, m * n);
    const double si = i % 2 ? -1.0 : 1.0;
    std::vector<double> want = w0;
    for (std::size_t k = 0; k < want.size(); ++k) want[k] += si * sigma * e[k];
    EXPECT_TRUE(close(to_double(s->member_tensor(i, "w")), want, 1e-6)) << "member " << i;
    // The forward of linear agrees with x W_i^T.
    for (std::size_t k = 0; k < want.size(); ++k) dw[k] += std::sqrt(nn) / nn * f[i] * si * sigma * e[k];
  }
  // A forward pass through linear: row of member i = x W_i^T + b_i.
  ForwardContext ctx{*backend, view.get(), 1};
  const Tensor x = random_tensor({population, n}, 33);
  const Tensor y = linear(ctx, w, nullptr, x);
  for (std::int64_t i = 0; i < population; ++i) {
    const std::vector<double> wi = to_double(s->member_tensor(i, "w"));
    std::vector<double> want(static_cast<std::size_t>(m)), got(static_cast<std::size_t>(m));
    for (std::int64_t a = 0; a < m; ++a) {
      for (std::int64_t k = 0; k < n; ++k) want[a] += static_cast<double>(x.data<float>()[i * n + k]) * wi[a * n + k];
      got[a] = y.data<float>()[i * m + a];
    }
    EXPECT_TRUE(close(got, want, 1e-5, 1e-6)) << "member " << i;
  }
  EXPECT_THROW(s->member_factors(0, "w"), Error);  // open_es has no low-rank factors
  const EpochUpdate u = s->tell(scores);
  EXPECT_TRUE(u.updated);
  std::vector<double> got = to_double(w.value);
  for (std::size_t k = 0; k < got.size(); ++k) {
    ASSERT_TRUE(std::isfinite(got[k]));
    got[k] -= w0[k];
  }
  EXPECT_TRUE(close(got, dw, 1e-4, 1e-7));
}

TEST(OtherNoisers, EggrollSignUpdatesWithSignsOfTheFactors) {
  const std::int64_t m = 7, n = 4, population = 10, rank = 3;
  const double sigma = 0.1;
  auto backend = make_backend(BackendKind::cpu);
  auto s = make_strategy({{"w", {m, n}}}, es_config("eggroll_sign", population, rank, sigma), sgd(1.0), 41, *backend);
  const Param& w = s->params().at("w");
  const std::vector<double> w0 = to_double(w.value);
  const std::vector<double> scores = member_scores(population, 42);
  const std::vector<double> f = shaped("zscore", scores, 2);
  // delta = sqrt(N) (1/N) sum_i f_i s_i (sigma / sqrt(r)) sign(A_i) sign(B_i)^T
  std::vector<double> dw(w0.size(), 0.0);
  const double nn = static_cast<double>(population);
  auto sgn = [](float v) { return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0); };
  for (std::int64_t i = 0; i < population; ++i) {
    const MemberFactors mf = s->member_factors(i, "w");  // the forward is EGGROLL's
    EXPECT_TRUE(close(to_double(s->member_tensor(i, "w")), dense_member(w.value, mf), 1e-5));
    for (std::int64_t a = 0; a < m; ++a)
      for (std::int64_t b = 0; b < n; ++b) {
        double ab = 0;
        for (std::int64_t c = 0; c < rank; ++c) ab += sgn(mf.a.data<float>()[a * rank + c]) * sgn(mf.b.data<float>()[b * rank + c]);
        dw[a * n + b] += std::sqrt(nn) / nn * f[i] * mf.coef * ab;
      }
  }
  s->tell(scores);
  std::vector<double> got = to_double(w.value);
  for (std::size_t k = 0; k < got.size(); ++k) got[k] -= w0[k];
  EXPECT_TRUE(close(got, dw, 1e-4, 1e-7));
}

TEST(OtherNoisers, SparseMemberMatrixAndUpdate) {
  const std::int64_t m = 6, n = 9, population = 8;  // k = max(m, n) = 9 entries per member
  const double sigma = 0.3;
  auto backend = make_backend(BackendKind::cpu);
  auto s = make_strategy({{"w", {m, n}}}, es_config("sparse", population, 1, sigma), sgd(1.0), 51, *backend);
  const Param& w = s->params().at("w");
  const std::vector<double> w0 = to_double(w.value);
  auto view = s->ask();
  const std::vector<double> scores = member_scores(population, 52);
  const std::vector<double> f = shaped("zscore", scores, 2);
  std::vector<double> dw(w0.size(), 0.0);
  const double nn = static_cast<double>(population);
  for (std::int64_t i = 0; i < population; ++i) {
    // W_i = W + s_i sigma sum_e v_e 1[p_e], p_e = bits_e mod (m n).
    const std::uint32_t* pos = view->bits(w, i / 2, NoiseTag::sparse_index, n);
    const float* val = view->normals(w, i / 2, NoiseTag::factors, n);
    const double si = i % 2 ? -1.0 : 1.0;
    std::vector<double> want = w0;
    for (std::int64_t e = 0; e < n; ++e) {
      want[pos[e] % (m * n)] += si * sigma * val[e];
      dw[pos[e] % (m * n)] += std::sqrt(nn) / nn * f[i] * si * sigma * val[e];
    }
    const std::vector<double> got = to_double(s->member_tensor(i, "w"));
    EXPECT_TRUE(close(got, want, 1e-6)) << "member " << i;
    int changed = 0;
    for (std::size_t k = 0; k < got.size(); ++k) changed += got[k] != w0[k];
    EXPECT_GE(changed, 5);   // about k distinct entries (positions may repeat)
    EXPECT_LE(changed, 9);
  }
  const EpochUpdate u = s->tell(scores);
  EXPECT_TRUE(u.updated);
  std::vector<double> got = to_double(w.value);
  for (std::size_t k = 0; k < got.size(); ++k) {
    ASSERT_TRUE(std::isfinite(got[k]));
    got[k] -= w0[k];
  }
  EXPECT_TRUE(close(got, dw, 1e-4, 1e-7));
}

TEST(OtherNoisers, EggrollBaselineKeepsTwoUnperturbedMembersPerGroup) {
  auto backend = make_backend(BackendKind::cpu);
  EsConfig es = es_config("eggroll_baseline", 16, 2, 0.1);
  es.group_size = 8;
  auto s = make_strategy({{"w", {4, 5}}, {"b", {4}}}, es, sgd(1.0), 61, *backend);
  const std::vector<double> w0 = to_double(s->params().at("w").value), b0 = to_double(s->params().at("b").value);
  for (std::int64_t i = 0; i < 16; ++i) {
    const bool baseline = i % 8 < 2;
    EXPECT_EQ(s->member_factors(i, "w").coef == 0.0, baseline) << "member " << i;
    EXPECT_EQ(to_double(s->member_tensor(i, "w")) == w0, baseline) << "member " << i;
    EXPECT_EQ(to_double(s->member_tensor(i, "b")) == b0, baseline) << "member " << i;
  }
  const EpochUpdate u = s->tell(member_scores(16, 62));
  EXPECT_TRUE(u.updated);
  EXPECT_GT(u.update_norm, 0.0);
  EXPECT_LE(u.update_norm, 1.0 + 1e-6);  // clipped to global norm 1, and lr = 1
}

TEST(OtherNoisers, NoopLeavesParametersUnchanged) {
  auto backend = make_backend(BackendKind::cpu);
  auto s = make_strategy({{"w", {4, 5}}, {"b", {4}}}, es_config("noop", 8, 1, 0.1), sgd(1.0), 71, *backend);
  const std::vector<double> w0 = to_double(s->params().at("w").value), b0 = to_double(s->params().at("b").value);
  for (std::int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(to_double(s->member_tensor(i, "w")), w0);
    EXPECT_EQ(to_double(s->member_tensor(i, "b")), b0);
  }
  const EpochUpdate u = s->tell(member_scores(8, 72));
  EXPECT_FALSE(u.updated);
  EXPECT_EQ(s->epoch(), 1);
  EXPECT_EQ(to_double(s->params().at("w").value), w0);
  EXPECT_EQ(to_double(s->params().at("b").value), b0);
}

// ---- (e) non-finite scores ----

TEST(NonfiniteScores, ReplacedByTheWorstFiniteScoreBeforeShaping) {
  auto backend = make_backend(BackendKind::cpu);
  const std::int64_t population = 12;
  std::vector<double> scores = member_scores(population, 81);
  std::vector<double> replaced = scores;
  const double worst = *std::min_element(scores.begin(), scores.end());
  scores[1] = kNan;
  scores[4] = kInf;
  scores[9] = -kInf;
  replaced[1] = replaced[4] = replaced[9] = worst;
  for (const std::string shaping : {"zscore", "centered_rank"}) {
    SCOPED_TRACE(shaping);
    EsConfig es = es_config("eggroll", population, 2, 0.1);
    es.shaping = shaping;
    auto a = make_strategy({{"w", {5, 3}}, {"b", {5}}}, es, sgd(1.0), 82, *backend);
    auto b = make_strategy({{"w", {5, 3}}, {"b", {5}}}, es, sgd(1.0), 82, *backend);
    const std::vector<double> w0 = to_double(a->params().at("w").value);
    const EpochUpdate ua = a->tell(scores);
    const EpochUpdate ub = b->tell(replaced);
    EXPECT_EQ(ua.n_nonfinite, 3);
    EXPECT_EQ(ub.n_nonfinite, 0);
    EXPECT_TRUE(ua.updated);
    EXPECT_NE(to_double(a->params().at("w").value), w0);
    // Bit-identical to the run that was told the worst finite score in their place.
    EXPECT_EQ(to_double(a->params().at("w").value), to_double(b->params().at("w").value));
    EXPECT_EQ(to_double(a->params().at("b").value), to_double(b->params().at("b").value));
    // Score statistics are of the finite raw scores.
    double sum = 0;
    for (double v : scores)
      if (std::isfinite(v)) sum += v;
    EXPECT_NEAR(ua.score_mean, sum / 9.0, 1e-12);
  }
}

TEST(NonfiniteScores, AllNonFiniteMakesNoUpdate) {
  auto backend = make_backend(BackendKind::cpu);
  auto s = make_strategy({{"w", {5, 3}}, {"b", {5}}}, es_config("eggroll", 6, 2, 0.1), sgd(1.0), 91, *backend);
  const std::vector<double> w0 = to_double(s->params().at("w").value), b0 = to_double(s->params().at("b").value);
  const EpochUpdate u = s->tell({kNan, kInf, -kInf, kNan, kNan, kNan});
  EXPECT_FALSE(u.updated);
  EXPECT_EQ(u.n_nonfinite, 6);
  EXPECT_EQ(u.update_norm, 0.0);
  EXPECT_EQ(s->epoch(), 1);  // the epoch is used up; its noise is not reused
  EXPECT_EQ(to_double(s->params().at("w").value), w0);
  EXPECT_EQ(to_double(s->params().at("b").value), b0);
  // The next epoch with finite scores updates again.
  const EpochUpdate v = s->tell(member_scores(6, 92));
  EXPECT_TRUE(v.updated);
  EXPECT_EQ(v.n_nonfinite, 0);
  EXPECT_NE(to_double(s->params().at("w").value), w0);
}

}  // namespace
}  // namespace eggroll
