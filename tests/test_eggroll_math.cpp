// Tests of the EGGROLL math end to end (ALGORITHM.md 1.1-1.4), each against the formula
// computed densely in double: the perturbed forward of `linear`, the materialised member
// matrices, the update after tell for every shaper, and the direction of the update on a
// linear fitness.
#include <gtest/gtest.h>

#include "support/es_test_helpers.hpp"

namespace eggroll {
namespace {

using namespace es_test;
using testing::random_tensor;
using testing::random_values;

// ---- (a) the perturbed forward ----

struct ForwardCase {
  std::int64_t m, n, rank, population, rows_per_member;
  bool antithetic;
  std::string noise_source;
};

TEST(EggrollForward, LinearEqualsTheDensePerturbedMatrixForEveryMember) {
  const std::vector<ForwardCase> cases = {
      {5, 7, 1, 4, 1, true, "generator"},   {13, 7, 2, 6, 3, true, "generator"},
      {8, 33, 3, 8, 2, true, "generator"},  {16, 24, 4, 4, 1, true, "table"},
      {7, 13, 5, 5, 2, false, "generator"}, {1, 9, 6, 6, 3, true, "generator"},
      {20, 3, 7, 2, 1, true, "generator"},  {11, 17, 8, 10, 2, true, "table"},
  };
  std::uint64_t seed = 10;
  for (BackendKind kind : {BackendKind::reference, BackendKind::cpu}) {
    auto backend = make_backend(kind);
    for (const ForwardCase& c : cases) {
      ++seed;
      SCOPED_TRACE(backend->name() + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                   " r=" + std::to_string(c.rank) + " N=" + std::to_string(c.population) + " " + c.noise_source);
      EsConfig es = es_config("eggroll", c.population, static_cast<int>(c.rank), 0.3);
      es.antithetic = c.antithetic;
      es.noise_source = c.noise_source;
      es.table_log2_size = 20;
      auto s = make_strategy({{"w", {c.m, c.n}}, {"b", {c.m}}}, es, sgd(), seed, *backend);
      const Param& w = s->params().at("w");
      const Param& b = s->params().at("b");
      auto view = s->ask();
      ForwardContext ctx{*backend, view.get(), c.rows_per_member};
      const std::int64_t rows = c.population * c.rows_per_member;
      const Tensor x = random_tensor({rows, c.n}, seed + 500);
      const Tensor y = linear(ctx, w, &b, x);
      ASSERT_EQ(y.dim(0), rows);
      ASSERT_EQ(y.dim(1), c.m);

      for (std::int64_t i = 0; i < c.population; ++i) {
        const MemberFactors f = s->member_factors(i, "w");
        // The factors are the view's B-then-A block of the member's pair, with coef s_i sigma / sqrt(r).
        const std::int64_t pair = c.antithetic ? i / 2 : i;
        const float* block = view->normals(w, pair, NoiseTag::factors, c.rank * (c.m + c.n));
        EXPECT_TRUE(std::equal(block, block + c.n * c.rank, f.b.data<float>()));
        EXPECT_TRUE(std::equal(block + c.n * c.rank, block + (c.n + c.m) * c.rank, f.a.data<float>()));
        const double sign = c.antithetic && (i % 2) ? -1.0 : 1.0;
        EXPECT_DOUBLE_EQ(f.coef, sign * 0.3 / std::sqrt(static_cast<double>(c.rank)));
        // v_i = v + s_i sigma eps_i for the bias.
        const Tensor bi = s->member_tensor(i, "b");
        const float* eps = view->normals(b, pair, NoiseTag::factors, c.m);
        std::vector<double> want_b = to_double(b.value);
        for (std::int64_t k = 0; k < c.m; ++k) want_b[k] += sign * 0.3 * eps[k];
        EXPECT_TRUE(close(to_double(bi), want_b, 1e-6));

        const std::vector<double> wi = dense_member(w.value, f);
        // member_tensor materialises the same matrix through the noiser's own forward.
        EXPECT_TRUE(close(to_double(s->member_tensor(i, "w")), wi, 1e-5));
        for (std::int64_t t = 0; t < c.rows_per_member; ++t) {
          const std::int64_t row = i * c.rows_per_member + t;
          std::vector<double> want(static_cast<std::size_t>(c.m)), got(static_cast<std::size_t>(c.m));
          for (std::int64_t a = 0; a < c.m; ++a) {
            double acc = want_b[a];
            for (std::int64_t k = 0; k < c.n; ++k) acc += static_cast<double>(x.data<float>()[row * c.n + k]) * wi[a * c.n + k];
            want[a] = acc;
            got[a] = y.data<float>()[row * c.m + a];
          }
          EXPECT_TRUE(close(got, want, 1e-4, 1e-6)) << "member " << i << " row " << t;
        }
      }
    }
  }
}

TEST(EggrollForward, AntitheticMembersShareFactorsWithOppositeSigns) {
  auto backend = make_backend(BackendKind::cpu);
  auto s = make_strategy({{"w", {6, 9}}}, es_config("eggroll", 8, 3, 0.2), sgd(), 3, *backend);
  const std::vector<double> w = to_double(s->params().at("w").value);
  for (std::int64_t k = 0; k < 4; ++k) {
    const MemberFactors plus = s->member_factors(2 * k, "w"), minus = s->member_factors(2 * k + 1, "w");
    EXPECT_TRUE(std::equal(plus.a.data<float>(), plus.a.data<float>() + plus.a.numel(), minus.a.data<float>()));
    EXPECT_TRUE(std::equal(plus.b.data<float>(), plus.b.data<float>() + plus.b.numel(), minus.b.data<float>()));
    EXPECT_GT(plus.coef, 0.0);
    EXPECT_EQ(minus.coef, -plus.coef);
    // (W_{2k} + W_{2k+1}) / 2 = W: the perturbations cancel.
    const std::vector<double> wp = to_double(s->member_tensor(2 * k, "w")), wm = to_double(s->member_tensor(2 * k + 1, "w"));
    std::vector<double> mid(w.size());
    for (std::size_t e = 0; e < w.size(); ++e) mid[e] = 0.5 * (wp[e] + wm[e]);
    EXPECT_TRUE(close(mid, w, 1e-6));
    // Different pairs draw different factors.
    if (k > 0) {
      const MemberFactors prev = s->member_factors(2 * k - 2, "w");
      EXPECT_NE(prev.a.data<float>()[0], plus.a.data<float>()[0]);
    }
  }
  // The per-entry variance of the perturbation is sigma^2 whatever the rank: over all entries
  // of 64 pairs (3456 entries) the mean square of (W_i - W) / sigma is 1 within 5 standard
  // deviations (the entries' fourth moment for rank 3 is at most 3 + 6 / r = 5, so sd <= 0.04).
  auto big = make_strategy({{"w", {6, 9}}}, es_config("eggroll", 128, 3, 0.2), sgd(), 4, *backend);
  double sq = 0;
  std::int64_t count = 0;
  const std::vector<double> w0 = to_double(big->params().at("w").value);
  for (std::int64_t k = 0; k < 64; ++k) {
    const std::vector<double> wi = to_double(big->member_tensor(2 * k, "w"));
    for (std::size_t e = 0; e < wi.size(); ++e, ++count) sq += (wi[e] - w0[e]) * (wi[e] - w0[e]) / 0.04;
  }
  EXPECT_NEAR(sq / static_cast<double>(count), 1.0, 5.0 * std::sqrt(4.0 / static_cast<double>(count)));
}

// Embedding lookups: row t of member i is row t of W_i (member_tensor) for every noiser, and for
// EGGROLL W[t] + coef A[t, :] B^T.
TEST(EggrollForward, EmbeddingRowsAreRowsOfTheMemberMatrix) {
  const std::int64_t vocab = 11, d = 6, population = 6, rpm = 3;
  auto backend = make_backend(BackendKind::cpu);
  for (const std::string noiser : {"eggroll", "open_es", "sparse", "eggroll_sign", "noop"}) {
    SCOPED_TRACE(noiser);
    ParamStore store;
    store.add("emb", ParamKind::embedding, random_tensor({vocab, d}, 201));
    Strategy s(store, es_config(noiser, population, 3, 0.4), sgd(), 202, 10, *backend);
    const Param& w = store.at("emb");
    auto view = s.ask();
    ForwardContext ctx{*backend, view.get(), rpm};
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(population * rpm));
    for (std::size_t r = 0; r < tokens.size(); ++r) tokens[r] = static_cast<std::int32_t>((r * 7 + 3) % vocab);
    const Tensor y = embedding(ctx, w, tokens);
    for (std::int64_t i = 0; i < population; ++i) {
      const std::vector<double> wi = to_double(s.member_tensor(i, "emb"));
      if (noiser == "eggroll" || noiser == "eggroll_sign") {
        EXPECT_TRUE(close(wi, dense_member(w.value, s.member_factors(i, "emb")), 1e-5));
      }
      if (noiser == "noop") {
        EXPECT_EQ(wi, to_double(w.value));
      } else {
        EXPECT_NE(wi, to_double(w.value));
      }
      for (std::int64_t t = 0; t < rpm; ++t) {
        const std::int64_t row = i * rpm + t, tok = tokens[row];
        std::vector<double> got(static_cast<std::size_t>(d)), want(wi.begin() + tok * d, wi.begin() + (tok + 1) * d);
        for (std::int64_t k = 0; k < d; ++k) got[k] = y.data<float>()[row * d + k];
        EXPECT_TRUE(close(got, want, 1e-5, 1e-6)) << "member " << i << " row " << t;
      }
    }
  }
}

// Layer norm with a perturbed gain and offset: y_i = norm(x) * gamma_i + beta_i.
TEST(EggrollForward, LayerNormAppliesEachMembersVectors) {
  const std::int64_t d = 9, population = 4, rpm = 2;
  auto backend = make_backend(BackendKind::cpu);
  auto s = make_strategy({{"gamma", {d}}, {"beta", {d}}}, es_config("eggroll", population, 1, 0.3), sgd(), 211, *backend);
  auto view = s->ask();
  ForwardContext ctx{*backend, view.get(), rpm};
  const Tensor x = random_tensor({population * rpm, d}, 212);
  const Tensor y = layer_norm(ctx, x, &s->params().at("gamma"), &s->params().at("beta"));
  for (std::int64_t i = 0; i < population; ++i) {
    const std::vector<double> g = to_double(s->member_tensor(i, "gamma")), b = to_double(s->member_tensor(i, "beta"));
    for (std::int64_t t = 0; t < rpm; ++t) {
      const float* xr = x.data<float>() + (i * rpm + t) * d;
      double mean = 0, var = 0;
      for (std::int64_t k = 0; k < d; ++k) mean += xr[k] / static_cast<double>(d);
      for (std::int64_t k = 0; k < d; ++k) var += (xr[k] - mean) * (xr[k] - mean) / static_cast<double>(d);
      std::vector<double> want(static_cast<std::size_t>(d)), got(static_cast<std::size_t>(d));
      for (std::int64_t k = 0; k < d; ++k) {
        want[k] = (xr[k] - mean) / std::sqrt(var + 1e-5) * g[k] + b[k];
        got[k] = y.data<float>()[(i * rpm + t) * d + k];
      }
      EXPECT_TRUE(close(got, want, 1e-5, 1e-6)) << "member " << i << " row " << t;
    }
  }
}

// noise_reuse = K: epochs e and e' share noise when e / K == e' / K (ALGORITHM.md 1.2);
// fixed_noise keeps one noise for every epoch.
TEST(EggrollForward, NoiseReuseKeepsFactorsForKEpochs) {
  auto backend = make_backend(BackendKind::cpu);
  EsConfig es = es_config("eggroll", 4, 2, 0.1);
  es.noise_reuse = 2;
  auto s = make_strategy({{"w", {3, 4}}}, es, sgd(0.0), 221, *backend);  // lr 0: W stays
  auto a_of_epoch = [&] { return to_double(s->member_factors(2, "w").a); };
  std::vector<std::vector<double>> a;
  for (int e = 0; e < 5; ++e) {
    a.push_back(a_of_epoch());
    s->tell({1, 2, 3, 4});
  }
  EXPECT_EQ(a[0], a[1]);
  EXPECT_NE(a[1], a[2]);
  EXPECT_EQ(a[2], a[3]);
  EXPECT_NE(a[3], a[4]);
  es.noise_reuse = 0;
  es.fixed_noise = true;
  auto f = make_strategy({{"w", {3, 4}}}, es, sgd(0.0), 221, *backend);
  const std::vector<double> first = to_double(f->member_factors(2, "w").a);
  for (int e = 0; e < 3; ++e) f->tell({1, 2, 3, 4});
  EXPECT_EQ(to_double(f->member_factors(2, "w").a), first);
  EXPECT_EQ(first, a[0]);  // noise epoch 0 in both
}

// Frozen (es.freeze_nonmatrix) and excluded parameters are neither perturbed nor updated.
TEST(EggrollForward, FrozenAndExcludedParametersStayPut) {
  auto backend = make_backend(BackendKind::cpu);
  ParamStore store;
  store.add("w", ParamKind::matrix, random_tensor({4, 3}, 231));
  store.add("b", ParamKind::vector, random_tensor({4}, 232));
  store.add("scale", ParamKind::excluded, random_tensor({2}, 233));
  EsConfig es = es_config("eggroll", 8, 2, 0.2);
  es.freeze_nonmatrix = true;
  Strategy s(store, es, sgd(1.0), 234, 10, *backend);
  const std::vector<double> w0 = to_double(store.at("w").value), b0 = to_double(store.at("b").value),
                            e0 = to_double(store.at("scale").value);
  for (std::int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(to_double(s.member_tensor(i, "b")), b0);
    EXPECT_EQ(to_double(s.member_tensor(i, "scale")), e0);
    EXPECT_NE(to_double(s.member_tensor(i, "w")), w0);
  }
  const EpochUpdate u = s.tell(member_scores(8, 235));
  EXPECT_TRUE(u.updated);
  EXPECT_NE(to_double(store.at("w").value), w0);
  EXPECT_EQ(to_double(store.at("b").value), b0);
  EXPECT_EQ(to_double(store.at("scale").value), e0);
}

// ---- (b) the update ----


struct UpdateCase {
  std::string shaping;
  std::int64_t population, rank;
  bool tied;  // scores drawn from a few levels, so ties occur
};

// With sgd at lr 1 (no momentum, no clipping), tell moves every parameter by exactly -grad:
//   matrix: delta = sqrt(N) (1/N) sum_i f_i s_i (sigma / sqrt(r)) A_i B_i^T
//   vector: delta = sqrt(N) (1/N) sum_i f_i s_i sigma eps_i
TEST(EggrollUpdate, TellMovesParametersByTheEsGradientForEveryShaper) {
  const std::vector<UpdateCase> cases = {
      {"zscore", 32, 3, false},       {"group_zscore", 32, 2, false}, {"group_zscore", 16, 1, true},
      {"centered_rank", 32, 4, false}, {"centered_rank", 24, 8, true}, {"antithetic_sign", 32, 3, true},
      {"raw", 20, 5, false},           {"zscore", 8, 1, true},
  };
  const std::int64_t m = 5, n = 7, len = 6;
  const double sigma = 0.1;
  auto backend = make_backend(BackendKind::cpu);
  std::uint64_t seed = 100;
  for (const UpdateCase& c : cases) {
    ++seed;
    SCOPED_TRACE(c.shaping + " N=" + std::to_string(c.population) + " r=" + std::to_string(c.rank) +
                 (c.tied ? " tied" : ""));
    EsConfig es = es_config("eggroll", c.population, static_cast<int>(c.rank), sigma);
    es.shaping = c.shaping;
    es.group_size = 4;
    auto s = make_strategy({{"w", {m, n}}, {"v", {len}}}, es, sgd(1.0), seed, *backend);
    const Param& w = s->params().at("w");
    const Param& v = s->params().at("v");
    const std::vector<double> w0 = to_double(w.value), v0 = to_double(v.value);

    std::vector<double> scores(static_cast<std::size_t>(c.population));
    const std::vector<float> r = random_values(c.population, seed + 7);
    for (std::int64_t i = 0; i < c.population; ++i) scores[i] = c.tied ? std::round(2.0 * r[i]) : 3.0 * r[i] + 1.0;
    if (c.shaping == "group_zscore" && c.tied) std::fill(scores.begin() + 4, scores.begin() + 8, 0.5);  // a tied block
    const std::vector<double> f = shaped(c.shaping, scores, es.group_size);

    // The expected step, from the factors of the current epoch (read before tell advances it).
    const double nn = static_cast<double>(c.population);
    std::vector<double> dw(w0.size(), 0.0), dv(v0.size(), 0.0);
    auto view = s->ask();
    for (std::int64_t i = 0; i < c.population; ++i) {
      const MemberFactors mf = view_factors(*view, w, i);
      const std::vector<double> wi = dense_member(w.value, mf);  // W + s_i sigma / sqrt(r) A B^T
      for (std::size_t e = 0; e < dw.size(); ++e) dw[e] += std::sqrt(nn) / nn * f[i] * (wi[e] - w0[e]);
      const float* eps = view->normals(v, i / 2, NoiseTag::factors, len);
      const double si = i % 2 ? -1.0 : 1.0;
      for (std::int64_t e = 0; e < len; ++e) dv[e] += std::sqrt(nn) / nn * f[i] * si * sigma * eps[e];
    }
    const EpochUpdate u = s->tell(scores);
    EXPECT_TRUE(u.updated);
    EXPECT_EQ(u.n_nonfinite, 0);
    EXPECT_EQ(s->epoch(), 1);
    std::vector<double> got_w = to_double(w.value), got_v = to_double(v.value);
    for (std::size_t e = 0; e < got_w.size(); ++e) got_w[e] -= w0[e];
    for (std::size_t e = 0; e < got_v.size(); ++e) got_v[e] -= v0[e];
    EXPECT_TRUE(close(got_w, dw, 1e-4, 1e-7));
    EXPECT_TRUE(close(got_v, dv, 1e-4, 1e-7));
    double norm = 0;
    for (double d : dw) norm += d * d;
    for (double d : dv) norm += d * d;
    EXPECT_NEAR(u.grad_norm, std::sqrt(norm), 1e-4 * std::sqrt(norm));    // grad = -delta at lr 1
    EXPECT_NEAR(u.update_norm, std::sqrt(norm), 1e-4 * std::sqrt(norm));
    EXPECT_GT(norm, 1e-4) << "the case moves nothing: it would not test the formula";
  }
}

// The step size convention: with plain SGD each element moves by about lr * sigma whatever N and
// r are (ALGORITHM.md 1.4), for independent random scores.
TEST(EggrollUpdate, StepIsAboutLrTimesSigmaPerElement) {
  auto backend = make_backend(BackendKind::cpu);
  for (std::int64_t population : {64, 1024})
    for (int rank : {1, 8}) {
      SCOPED_TRACE("N=" + std::to_string(population) + " r=" + std::to_string(rank));
      auto s = make_strategy({{"w", {32, 32}}}, es_config("eggroll", population, rank, 0.05), sgd(0.5), 77, *backend);
      const std::vector<double> w0 = to_double(s->params().at("w").value);
      std::vector<double> scores(static_cast<std::size_t>(population));
      const auto r = random_values(population, 78);
      std::copy(r.begin(), r.end(), scores.begin());
      s->tell(scores);
      const std::vector<double> w1 = to_double(s->params().at("w").value);
      double sq = 0;
      for (std::size_t e = 0; e < w0.size(); ++e) sq += (w1[e] - w0[e]) * (w1[e] - w0[e]);
      const double rms = std::sqrt(sq / static_cast<double>(w0.size()));
      EXPECT_GT(rms, 0.5 * 0.025);  // lr * sigma = 0.025
      EXPECT_LT(rms, 2.0 * 0.025);
    }
}

// ---- (c) direction on a linear fitness ----

double cosine(const std::vector<double>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
  return ab / std::sqrt(aa * bb);
}

// One epoch of the linear fitness <C, W_i>; returns the parameter change.
std::vector<double> linear_fitness_step(Strategy& s, const std::vector<double>& c) {
  const std::vector<double> w0 = to_double(s.params().at("w").value);
  std::vector<double> scores(static_cast<std::size_t>(s.population()));
  auto view = s.ask();
  for (std::int64_t i = 0; i < s.population(); ++i) {
    const MemberFactors f = view_factors(*view, s.params().at("w"), i);
    const std::vector<double> wi = dense_member(s.params().at("w").value, f);
    scores[i] = std::inner_product(c.begin(), c.end(), wi.begin(), 0.0);
  }
  s.tell(scores);
  const std::vector<double> w1 = to_double(s.params().at("w").value);
  std::vector<double> step(w0.size());
  for (std::size_t e = 0; e < w0.size(); ++e) step[e] = w1[e] - w0[e];
  return step;
}

// Fitness <C, W_i> for a random C (m = 16, n = 24, D = 384 entries), population 512 (256 pairs),
// rank 4, seed 2025. The step is sum_k <C, E_k> E_k over K = 256 pairs: its mean is K C and
// its noise has about D |C|^2 K of squared norm, so one step's cosine with C is about
// 1 / sqrt(1 + D / K) = 0.63 and the sum of T steps' about 1 / sqrt(1 + D / (T K)): 0.95 at
// T = 12. (Asserted: one step > 0.5, twelve steps > 0.9; measured 0.627 and 0.945.)
TEST(EggrollUpdate, LinearFitnessUpdateFollowsC) {
  const std::int64_t m = 16, n = 24, population = 512;
  auto backend = make_backend(BackendKind::cpu);
  auto s = make_strategy({{"w", {m, n}}}, es_config("eggroll", population, 4, 0.05), sgd(0.1), 2025, *backend);
  const std::vector<double> c = to_double(random_tensor({m, n}, 2026));
  const std::vector<double> w_start = to_double(s->params().at("w").value);
  double first_cos = 0;
  for (int epoch = 0; epoch < 12; ++epoch) {
    const std::vector<double> step = linear_fitness_step(*s, c);
    if (epoch == 0) first_cos = cosine(step, c);
  }
  RecordProperty("cosine_one_step", std::to_string(first_cos));
  EXPECT_GT(first_cos, 0.5);
  std::vector<double> total(w_start.size());
  const std::vector<double> w_end = to_double(s->params().at("w").value);
  for (std::size_t e = 0; e < total.size(); ++e) total[e] = w_end[e] - w_start[e];
  const double total_cos = cosine(total, c);
  RecordProperty("cosine_twelve_steps", std::to_string(total_cos));
  EXPECT_GT(total_cos, 0.9);
}

// One update at a population large against the parameter count: m = 8, n = 12 (D = 96),
// population 4096 (K = 2048 pairs), rank 2, seed 7: the predicted cosine is
// 1 / sqrt(1 + D / K) = 0.977. Asserted > 0.9.
TEST(EggrollUpdate, OneLinearFitnessUpdateAtPopulation4096PointsAlongC) {
  const std::int64_t m = 8, n = 12, population = 4096;
  auto backend = make_backend(BackendKind::cpu);
  auto s = make_strategy({{"w", {m, n}}}, es_config("eggroll", population, 2, 0.05), sgd(0.1), 7, *backend);
  const std::vector<double> c = to_double(random_tensor({m, n}, 8));
  const double cos = cosine(linear_fitness_step(*s, c), c);
  RecordProperty("cosine", std::to_string(cos));
  EXPECT_GT(cos, 0.9);
}

}  // namespace
}  // namespace eggroll
