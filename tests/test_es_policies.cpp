// Tests of the small ES policies: fitness shapers, non-finite score replacement, lr/sigma
// schedules, optimizers (SGD, momentum, Nesterov, Adam, AdamW, state round trip) and clipping.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "eggroll/core/error.hpp"
#include "eggroll/es/optimizer.hpp"
#include "eggroll/es/schedule.hpp"
#include "eggroll/es/shaping.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace eggroll {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Expects f to throw an eggroll::Error whose message contains every one of parts.
template <typename F>
void expect_error(F&& f, std::initializer_list<const char*> parts) {
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const char* part : parts)
      EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
    return;
  }
  ADD_FAILURE() << "expected an eggroll::Error";
}

// ---- shaping ----

TEST(Shaping, NamesRoundTripAndUnknownNameListsChoices) {
  for (const char* name : {"zscore", "group_zscore", "centered_rank", "antithetic_sign", "raw"})
    EXPECT_EQ(shaping_name(shaping_from_name(name)), name);
  EXPECT_EQ(shaping_from_name("centered_rank"), Shaping::centered_rank);
  expect_error([] { shaping_from_name("rank"); }, {"'rank'", "centered_rank", "antithetic_sign"});
}

TEST(Shaping, ZscoreUsesPopulationVariance) {
  // mean 2.5, population variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25
  const auto f = shape_fitness(Shaping::zscore, {1, 2, 3, 4}, 2);
  const double sd = std::sqrt(1.25 + 1e-5);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_NEAR(f[0], -1.5 / sd, 1e-14);
  EXPECT_NEAR(f[1], -0.5 / sd, 1e-14);
  EXPECT_NEAR(f[2], 0.5 / sd, 1e-14);
  EXPECT_NEAR(f[3], 1.5 / sd, 1e-14);  // 1.3416347
}

TEST(Shaping, ZscoreOfTwoAndOfTiedScores) {
  // N = 2: mean 2, variance 1.
  const auto f = shape_fitness(Shaping::zscore, {3, 1}, 2);
  EXPECT_NEAR(f[0], 1.0 / std::sqrt(1.00001), 1e-14);
  EXPECT_NEAR(f[1], -1.0 / std::sqrt(1.00001), 1e-14);
  // Six 0.1s sum to 0.6 whose sixth is 0.09999999999999999, so ties must be detected to give 0.
  for (double v : shape_fitness(Shaping::zscore, {0.1, 0.1, 0.1, 0.1, 0.1, 0.1}, 2)) EXPECT_EQ(v, 0.0);
}

TEST(Shaping, GroupZscoreUsesEachBlocksOwnStatistics) {
  // Blocks of 2: {1, 3} mean 2 var 1; {5, 5} tied; {0, -4} mean -2 var 4.
  const auto f = shape_fitness(Shaping::group_zscore, {1, 3, 5, 5, 0, -4}, 2);
  ASSERT_EQ(f.size(), 6u);
  EXPECT_NEAR(f[0], -1.0 / std::sqrt(1.00001), 1e-14);
  EXPECT_NEAR(f[1], 1.0 / std::sqrt(1.00001), 1e-14);
  EXPECT_EQ(f[2], 0.0);
  EXPECT_EQ(f[3], 0.0);
  EXPECT_NEAR(f[4], 2.0 / std::sqrt(4.00001), 1e-14);
  EXPECT_NEAR(f[5], -2.0 / std::sqrt(4.00001), 1e-14);
}

TEST(Shaping, GroupZscoreBlocksOfFourDifferFromGlobalZscore) {
  const std::vector<double> s = {1, 2, 3, 4, 0.7, 0.7, 0.7, 0.7};
  const auto f = shape_fitness(Shaping::group_zscore, s, 4);
  const double sd = std::sqrt(1.25 + 1e-5);  // block {1, 2, 3, 4}
  EXPECT_NEAR(f[0], -1.5 / sd, 1e-14);
  EXPECT_NEAR(f[1], -0.5 / sd, 1e-14);
  EXPECT_NEAR(f[2], 0.5 / sd, 1e-14);
  EXPECT_NEAR(f[3], 1.5 / sd, 1e-14);
  for (std::size_t i = 4; i < 8; ++i) EXPECT_EQ(f[i], 0.0) << i;
  // With G = N it is the global z-score.
  const auto whole = shape_fitness(Shaping::group_zscore, s, 8);
  const auto global = shape_fitness(Shaping::zscore, s, 2);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(whole[i], global[i]) << i;
  EXPECT_GT(std::abs(global[4]), 0.5);
}

TEST(Shaping, GroupZscoreRejectsBadGroupSizes) {
  const std::vector<double> s = {1, 2, 3, 4, 5, 6};
  expect_error([&] { shape_fitness(Shaping::group_zscore, s, 3); }, {"group_size = 3"});
  expect_error([&] { shape_fitness(Shaping::group_zscore, s, 4); }, {"population 6"});
  expect_error([&] { shape_fitness(Shaping::group_zscore, s, 0); }, {"es.group_size"});
}

TEST(Shaping, CenteredRankWithoutTies) {
  // ranks 2, 0, 1 -> rank / 2 - 0.5
  const auto f = shape_fitness(Shaping::centered_rank, {3, 1, 2}, 2);
  EXPECT_EQ(f, (std::vector<double>{0.5, -0.5, 0.0}));
  EXPECT_EQ(shape_fitness(Shaping::centered_rank, {1, 2}, 2), (std::vector<double>{-0.5, 0.5}));
  EXPECT_EQ(shape_fitness(Shaping::centered_rank, {-7}, 2), (std::vector<double>{0.0}));
}

TEST(Shaping, CenteredRankAveragesTiedRanks) {
  // sorted: 1 (rank 0), 3 (rank 1), 5, 5 (ranks 2 and 3 -> 2.5); f = rank / 3 - 0.5
  const auto f = shape_fitness(Shaping::centered_rank, {5, 1, 5, 3}, 2);
  EXPECT_NEAR(f[0], 2.5 / 3 - 0.5, 1e-15);
  EXPECT_EQ(f[1], -0.5);
  EXPECT_NEAR(f[2], 2.5 / 3 - 0.5, 1e-15);
  EXPECT_NEAR(f[3], 1.0 / 3 - 0.5, 1e-15);
  EXPECT_EQ(f[0], f[2]);
  // All tied: every rank is (N - 1) / 2, so f = 0.
  EXPECT_EQ(shape_fitness(Shaping::centered_rank, {2, 2}, 2), (std::vector<double>{0.0, 0.0}));
  for (double v : shape_fitness(Shaping::centered_rank, {4, 4, 4, 4, 4}, 2)) EXPECT_EQ(v, 0.0);
}

TEST(Shaping, AntitheticSignComparesEachPair) {
  const auto f = shape_fitness(Shaping::antithetic_sign, {3, 1, 1, 3, 2, 2, -1, -1.5}, 2);
  EXPECT_EQ(f, (std::vector<double>{1, -1, -1, 1, 0, 0, 1, -1}));
  EXPECT_FALSE(std::signbit(f[5]));
  EXPECT_EQ(shape_fitness(Shaping::antithetic_sign, {0.5, 0.25}, 2), (std::vector<double>{1, -1}));
  expect_error([] { shape_fitness(Shaping::antithetic_sign, {1, 2, 3}, 2); }, {"even"});
}

TEST(Shaping, RawIsIdentityAndNonFiniteScoresAreRejected) {
  const std::vector<double> s = {0.25, -3, 7.5};
  EXPECT_EQ(shape_fitness(Shaping::raw, s, 2), s);
  expect_error([] { shape_fitness(Shaping::zscore, {1, kNan}, 2); }, {"replace_nonfinite_scores"});
}

TEST(NonfiniteScores, ReplacedByWorstFiniteScore) {
  std::vector<double> s = {1, kNan, -2, kInf, -kInf, 5};
  EXPECT_EQ(replace_nonfinite_scores(s), 3);
  EXPECT_EQ(s, (std::vector<double>{1, -2, -2, -2, -2, 5}));
  std::vector<double> finite = {0.5, -1, 2};
  EXPECT_EQ(replace_nonfinite_scores(finite), 0);
  EXPECT_EQ(finite, (std::vector<double>{0.5, -1, 2}));
}

TEST(NonfiniteScores, NoneFiniteLeavesScoresAndReturnsSize) {
  std::vector<double> all_nan = {kNan, kNan, kNan, kNan};
  EXPECT_EQ(replace_nonfinite_scores(all_nan), 4);
  for (double v : all_nan) EXPECT_TRUE(std::isnan(v));
  std::vector<double> s = {kNan, -kInf, kInf};
  EXPECT_EQ(replace_nonfinite_scores(s), 3);
  EXPECT_TRUE(std::isnan(s[0]));
  EXPECT_EQ(s[1], -kInf);
  EXPECT_EQ(s[2], kInf);
  std::vector<double> empty;
  EXPECT_EQ(replace_nonfinite_scores(empty), 0);
}

// ---- schedules ----

TEST(Schedule, NamesRoundTripAndUnknownNameListsChoices) {
  for (auto k : {ScheduleKind::constant, ScheduleKind::linear, ScheduleKind::cosine,
                 ScheduleKind::exponential})
    EXPECT_EQ(schedule_kind_from_name(schedule_kind_name(k)), k);
  expect_error([] { schedule_kind_from_name("step"); }, {"'step'", "exponential"});
}

TEST(Schedule, LinearReachesEndAtHorizonAndStays) {
  const Schedule s{ScheduleKind::linear, 1.0, 0.0, 10};
  EXPECT_EQ(s.at(0), 1.0);
  EXPECT_NEAR(s.at(3), 0.7, 1e-15);
  EXPECT_EQ(s.at(5), 0.5);
  EXPECT_EQ(s.at(10), 0.0);
  EXPECT_EQ(s.at(25), 0.0);
}

TEST(Schedule, Cosine) {
  const Schedule s{ScheduleKind::cosine, 1.0, 0.1, 4};
  EXPECT_NEAR(s.at(0), 1.0, 1e-15);
  EXPECT_NEAR(s.at(1), 0.1 + 0.9 * 0.5 * (1 + std::sqrt(0.5)), 1e-15);  // cos(pi/4)
  EXPECT_NEAR(s.at(1), 0.86819805, 1e-8);
  EXPECT_NEAR(s.at(2), 0.55, 1e-15);                                     // cos(pi/2) = 0
  EXPECT_NEAR(s.at(4), 0.1, 1e-15);
  EXPECT_NEAR(s.at(9), 0.1, 1e-15);
}

TEST(Schedule, ExponentialMultipliesByEndEachEpoch) {
  const Schedule s{ScheduleKind::exponential, 2.0, 0.5, 1};
  EXPECT_EQ(s.at(0), 2.0);
  EXPECT_EQ(s.at(3), 0.25);
  const Schedule slow{ScheduleKind::exponential, 0.1, 0.999, 0};
  EXPECT_NEAR(slow.at(1000), 0.1 * std::exp(1000 * std::log(0.999)), 1e-15);
  expect_error([] { Schedule{ScheduleKind::exponential, 1.0, 0.0, 1}.at(1); }, {"factor"});
}

TEST(Schedule, WarmupScalesEarlyEpochs) {
  const Schedule c{ScheduleKind::constant, 1.0, 0.0, 1, 4};
  EXPECT_EQ(c.at(0), 0.25);
  EXPECT_EQ(c.at(1), 0.5);
  EXPECT_EQ(c.at(3), 1.0);
  EXPECT_EQ(c.at(4), 1.0);
  const Schedule lin{ScheduleKind::linear, 1.0, 0.0, 10, 2};
  EXPECT_EQ(lin.at(0), 0.5);              // 1.0 * 1/2
  EXPECT_NEAR(lin.at(1), 0.9, 1e-15);     // 0.9 * 2/2
  EXPECT_NEAR(lin.at(2), 0.8, 1e-15);
}

TEST(Schedule, ConstantAndEdgeCases) {
  const Schedule c{ScheduleKind::constant, 0.3, 7.0, 10};
  EXPECT_EQ(c.at(0), 0.3);
  EXPECT_EQ(c.at(100), 0.3);
  const Schedule zero{ScheduleKind::linear, 1.0, 3.0, 0};  // horizon <= 0 is 1
  EXPECT_EQ(zero.at(0), 1.0);
  EXPECT_EQ(zero.at(1), 3.0);
  EXPECT_EQ(zero.at(5), 3.0);
  EXPECT_EQ((Schedule{ScheduleKind::cosine, 1.0, 3.0, -5}).at(1), 3.0);
  EXPECT_THROW(c.at(-1), Error);
  EXPECT_THROW((Schedule{ScheduleKind::constant, 1.0, 0.0, 1, -2}).at(0), Error);
}

// ---- optimizers ----

OptimConfig optim(const std::string& name, double momentum = 0.0, bool nesterov = false,
                  double weight_decay = 0.0) {
  OptimConfig c;
  c.name = name;
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weight_decay = weight_decay;
  return c;
}

// Applies one scalar parameter p0 for grads.size() steps at learning rate lr and returns p after
// each step.
std::vector<double> trajectory(Optimizer& opt, float p0, const std::vector<float>& grads, double lr) {
  std::vector<double> out;
  float p = p0;
  for (float g : grads) {
    opt.begin_step();
    opt.apply("w", &p, &g, 1, lr);
    out.push_back(p);
  }
  return out;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& expected, double tol) {
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t t = 0; t < got.size(); ++t) EXPECT_NEAR(got[t], expected[t], tol) << "step " << t + 1;
}

TEST(Optimizer, PlainSgd) {
  auto opt = make_optimizer(optim("sgd"));
  std::vector<float> p = {1.0f, -2.0f};
  const std::vector<float> g = {0.5f, -1.0f};
  opt->begin_step();
  opt->apply("w", p.data(), g.data(), 2, 0.1);
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  EXPECT_FLOAT_EQ(p[1], -1.9f);
  opt->begin_step();
  opt->apply("w", p.data(), g.data(), 2, 0.2);
  EXPECT_FLOAT_EQ(p[0], 0.85f);
  EXPECT_FLOAT_EQ(p[1], -1.7f);
  const auto st = opt->state();
  ASSERT_EQ(st.size(), 1u);  // plain SGD keeps only the step counter
  EXPECT_EQ(st.at("step").data<std::int32_t>()[0], 2);
}

TEST(Optimizer, SgdWeightDecayIsL2) {
  // g' = 0 + 0.1 * 2 = 0.2, p = 2 - 0.5 * 0.2 = 1.9; g' = 0.19, p = 1.9 - 0.095 = 1.805
  auto opt = make_optimizer(optim("sgd", 0.0, false, 0.1));
  expect_near(trajectory(*opt, 2.0f, {0, 0}, 0.5), {1.9, 1.805}, 1e-6);
}

TEST(Optimizer, SgdMomentum) {
  auto opt = make_optimizer(optim("sgd", 0.9));
  // v1 = 1, p = 0.9; v2 = 0.9 + 0.5 = 1.4, p = 0.76; v3 = 1.26 - 1 = 0.26, p = 0.734
  expect_near(trajectory(*opt, 1.0f, {1.0f, 0.5f, -1.0f}, 0.1), {0.9, 0.76, 0.734}, 1e-6);
  EXPECT_NEAR(opt->state().at("w/momentum").data<float>()[0], 0.26f, 1e-6);
}

TEST(Optimizer, SgdNesterov) {
  // u1 = 1 + 0.9 * 1 = 1.9, p = 0.81; u2 = 0.5 + 0.9 * 1.4 = 1.76, p = 0.634;
  // u3 = -1 + 0.9 * 0.26 = -0.766, p = 0.7106
  expect_near(trajectory(*make_optimizer(optim("sgd", 0.9, true)), 1.0f, {1.0f, 0.5f, -1.0f}, 0.1),
              {0.81, 0.634, 0.7106}, 1e-6);
  // Without momentum Nesterov is plain SGD.
  auto plain = make_optimizer(optim("sgd", 0.0, true));
  expect_near(trajectory(*plain, 1.0f, {0.5f, 0.5f}, 0.1), {0.95, 0.9}, 1e-6);
}

TEST(Optimizer, Adam) {
  auto opt = make_optimizer(optim("adam"));  // betas 0.9, 0.999, eps 1e-8
  const double lr = 0.01;
  // step 1: m = 0.05, v = 0.00025, mhat = 0.5, vhat = 0.25, p = 1 - 0.01 * 0.5 / (0.5 + 1e-8)
  // step 2: m = 0.045 - 0.1 = -0.055, v = 0.00024975 + 0.001 = 0.00124975,
  //         bias corrections 1 - 0.81 = 0.19 and 1 - 0.998001 = 0.001999
  // step 3: the same rule evaluated in double: 0.9950279420
  const double p1 = 1.0 - lr * 0.5 / (0.5 + 1e-8);
  const double p2 = p1 - lr * (-0.055 / 0.19) / (std::sqrt(0.00124975 / 0.001999) + 1e-8);
  EXPECT_NEAR(p2, 0.99366104, 1e-8);
  expect_near(trajectory(*opt, 1.0f, {0.5f, -1.0f, 0.25f}, lr), {p1, p2, 0.99502794}, 1e-6);
  const auto st = opt->state();
  EXPECT_NEAR(st.at("w/m").data<float>()[0], 0.9 * -0.055 + 0.1 * 0.25, 1e-8);
  EXPECT_NEAR(st.at("w/v").data<float>()[0], 0.999 * 0.00124975 + 0.001 * 0.0625, 1e-9);
  EXPECT_EQ(st.at("step").data<std::int32_t>()[0], 3);
}

TEST(Optimizer, AdamWeightDecayIsL2AndAdamwIsDecoupled) {
  // adam step 1: g' = 0.1 * 1 -> mhat = 0.1, sqrt(vhat) = 0.1, p = 1 - 0.01 (a whole lr step)
  // adamw step 1: p = 1 - 0.01 * 0.1 * 1 = 0.999, then m = v = 0 so the Adam step is 0
  // steps 2 and 3: the same rules evaluated in double
  const std::vector<float> g = {0.0f, 0.5f, -1.0f};
  expect_near(trajectory(*make_optimizer(optim("adam", 0, false, 0.1)), 1.0f, g, 0.01),
              {0.99, 0.98155729, 0.98321294}, 1e-6);
  expect_near(trajectory(*make_optimizer(optim("adamw", 0, false, 0.1)), 1.0f, g, 0.01),
              {0.999, 0.99055963, 0.99271193}, 1e-6);
}

TEST(Optimizer, ApplyBeforeBeginStepThrows) {
  auto opt = make_optimizer(optim("adam"));
  float p = 1.0f, g = 1.0f;
  expect_error([&] { opt->apply("w", &p, &g, 1, 0.1); }, {"begin_step"});
}

TEST(Optimizer, BadConfigThrows) {
  expect_error([] { make_optimizer(optim("lion")); }, {"sgd, adam, adamw"});
  OptimConfig c = optim("adam");
  c.betas = {0.9};
  expect_error([&] { make_optimizer(c); }, {"optim.betas"});
  c.betas = {0.9, 1.0};
  EXPECT_THROW(make_optimizer(c), Error);
  c = optim("adamw");
  c.eps = 0.0;
  expect_error([&] { make_optimizer(c); }, {"optim.eps"});
  expect_error([] { make_optimizer(optim("sgd", -0.5)); }, {"optim.momentum"});
  expect_error([] { make_optimizer(optim("sgd", 0, false, -1)); }, {"optim.weight_decay"});
}

// Two parameters, deterministic non-trivial gradients for step t.
struct TwoParams {
  std::vector<float> a = {0.5f, -1.0f, 2.0f, 0.25f, -0.75f};
  std::vector<float> b = {3.0f, -0.5f, 1.5f};
  void step(Optimizer& opt, int t) {
    std::vector<float> ga(a.size()), gb(b.size());
    const float ft = static_cast<float>(t + 1);
    for (std::size_t i = 0; i < ga.size(); ++i) ga[i] = std::sin(0.7f * ft + float(i)) + 0.1f * a[i];
    for (std::size_t i = 0; i < gb.size(); ++i) gb[i] = std::cos(1.3f * ft - float(i)) - 0.2f * b[i];
    opt.begin_step();
    opt.apply("a", a.data(), ga.data(), 5, 0.05 / (t + 1));
    opt.apply("b", b.data(), gb.data(), 3, 0.05 / (t + 1));
  }
};

void expect_round_trip(const OptimConfig& c, const std::vector<std::string>& keys) {
  auto whole = make_optimizer(c);
  TwoParams p_whole;
  for (int t = 0; t < 5; ++t) p_whole.step(*whole, t);

  auto first = make_optimizer(c);
  TwoParams p_resumed;
  for (int t = 0; t < 2; ++t) p_resumed.step(*first, t);
  const auto saved = first->state();
  std::vector<std::string> saved_keys;
  for (const auto& [k, v] : saved) saved_keys.push_back(k);
  EXPECT_EQ(saved_keys, keys);
  EXPECT_EQ(saved.at("step").shape(), Shape{1});
  EXPECT_EQ(saved.at("step").data<std::int32_t>()[0], 2);

  auto second = make_optimizer(c);
  second->load_state(saved);
  for (int t = 2; t < 5; ++t) p_resumed.step(*second, t);
  EXPECT_EQ(p_resumed.a, p_whole.a) << c.name;
  EXPECT_EQ(p_resumed.b, p_whole.b) << c.name;
  const auto end_whole = whole->state(), end_resumed = second->state();
  ASSERT_EQ(end_whole.size(), end_resumed.size());
  for (const auto& [k, t] : end_whole) {
    if (k == "step") continue;
    const Tensor& r = end_resumed.at(k);
    ASSERT_EQ(r.shape(), t.shape()) << k;
    for (std::int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(r.data<float>()[i], t.data<float>()[i]) << k;
  }
  // The state is not trivially zero, so the comparison above can fail.
  const std::string probe = keys.front();
  EXPECT_NE(end_whole.at(probe).data<float>()[0], 0.0f);
}

TEST(Optimizer, StateRoundTripContinuesIdentically) {
  expect_round_trip(optim("adam"), {"a/m", "a/v", "b/m", "b/v", "step"});
  expect_round_trip(optim("adamw", 0, false, 0.05), {"a/m", "a/v", "b/m", "b/v", "step"});
  expect_round_trip(optim("sgd", 0.8, true), {"a/momentum", "b/momentum", "step"});
}

std::map<std::string, Tensor> adam_state_after_one_step(std::int64_t n) {
  auto opt = make_optimizer(optim("adam"));
  std::vector<float> p(static_cast<std::size_t>(n), 1.0f), g(p.size(), 0.5f);
  opt->begin_step();
  opt->apply("a", p.data(), g.data(), n, 0.01);
  return opt->state();
}

TEST(OptimizerState, OtherOptimizersStateIsRejected) {
  auto sgd = make_optimizer(optim("sgd", 0.9));
  expect_error([&] { sgd->load_state(adam_state_after_one_step(5)); },
               {"'a/m'", "(5)", "another model/optimizer"});

  float p = 1.0f, g = 1.0f;
  sgd->begin_step();
  sgd->apply("a", &p, &g, 1, 0.1);
  auto adam = make_optimizer(optim("adam"));
  expect_error([&] { adam->load_state(sgd->state()); }, {"'a/momentum'"});
}

TEST(OptimizerState, ShapeMismatchWithHeldSlotsIsRejected) {
  auto opt = make_optimizer(optim("adam"));
  std::vector<float> p(4, 1.0f), g(4, 0.5f);
  opt->begin_step();
  opt->apply("a", p.data(), g.data(), 4, 0.01);
  expect_error([&] { opt->load_state(adam_state_after_one_step(5)); },
               {"(5)", "(4)", "another model/optimizer"});
}

TEST(OptimizerState, AfterLoadWrongSizeOrUnknownParameterThrowsOnApply) {
  auto opt = make_optimizer(optim("adam"));
  opt->load_state(adam_state_after_one_step(5));
  std::vector<float> p(4, 1.0f), g(4, 0.5f);
  opt->begin_step();
  expect_error([&] { opt->apply("a", p.data(), g.data(), 4, 0.01); }, {"'a/m'", "(5)", "(4)"});
  expect_error([&] { opt->apply("c", p.data(), g.data(), 4, 0.01); }, {"'c'", "another model/optimizer"});
  // The state of a never-stepped optimizer (step 0) lets new parameters in.
  auto fresh = make_optimizer(optim("adam"));
  fresh->load_state(make_optimizer(optim("adam"))->state());
  fresh->begin_step();
  fresh->apply("c", p.data(), g.data(), 4, 0.01);
  EXPECT_NEAR(p[0], 0.99f, 1e-6);
}

TEST(OptimizerState, MalformedStateIsRejected) {
  auto opt = make_optimizer(optim("adam"));
  auto st = adam_state_after_one_step(3);
  auto no_step = st;
  no_step.erase("step");
  expect_error([&] { opt->load_state(no_step); }, {"'step'"});
  auto bad_step = st;
  bad_step["step"] = Tensor(DType::f32, Shape{1});
  expect_error([&] { opt->load_state(bad_step); }, {"i32"});
  auto no_v = st;
  no_v.erase("a/v");
  expect_error([&] { opt->load_state(no_v); }, {"'a/v'"});
  auto bad_v = st;
  bad_v["a/v"] = Tensor(DType::f32, Shape{2});
  expect_error([&] { opt->load_state(bad_v); }, {"(2)", "(3)"});
  auto bad_dtype = st;
  bad_dtype["a/m"] = Tensor(DType::i8, Shape{3});
  expect_error([&] { opt->load_state(bad_dtype); }, {"i8"});
}

TEST(Optimizer, ResultDoesNotDependOnThreadCount) {
#ifdef _OPENMP
  const std::size_t n = (std::size_t{1} << 15) + 77;  // above the serial threshold
  std::vector<float> g(n);
  for (std::size_t i = 0; i < n; ++i) g[i] = std::sin(0.001f * static_cast<float>(i)) * 3.0f;
  std::vector<float> results[2];
  const int threads[2] = {1, 4};
  const int saved = omp_get_max_threads();
  for (int r = 0; r < 2; ++r) {
    omp_set_num_threads(threads[r]);
    auto opt = make_optimizer(optim("adamw", 0, false, 0.01));
    results[r].assign(n, 0.5f);
    for (int t = 0; t < 3; ++t) {
      opt->begin_step();
      opt->apply("w", results[r].data(), g.data(), static_cast<std::int64_t>(n), 0.01);
    }
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_NE(results[0][1000], 0.5f);
#else
  GTEST_SKIP() << "built without OpenMP";
#endif
}

// ---- clipping ----

TEST(ClipGlobalNorm, ScalesAllGradsWhenAboveMax) {
  std::vector<float> a = {3.0f, 0.0f}, b = {4.0f};
  EXPECT_DOUBLE_EQ(clip_global_norm({{a.data(), 2}, {b.data(), 1}}, 1.0), 5.0);
  EXPECT_FLOAT_EQ(a[0], 0.6f);
  EXPECT_EQ(a[1], 0.0f);
  EXPECT_FLOAT_EQ(b[0], 0.8f);
  EXPECT_NEAR(clip_global_norm({{a.data(), 2}, {b.data(), 1}}, 0.0), 1.0, 1e-7);
}

TEST(ClipGlobalNorm, LeavesGradsAtOrBelowMaxOrWithoutLimit) {
  std::vector<float> a = {-3.0f}, b = {0.0f, 4.0f};
  EXPECT_DOUBLE_EQ(clip_global_norm({{a.data(), 1}, {b.data(), 2}}, 10.0), 5.0);
  EXPECT_DOUBLE_EQ(clip_global_norm({{a.data(), 1}, {b.data(), 2}}, 5.0), 5.0);
  EXPECT_DOUBLE_EQ(clip_global_norm({{a.data(), 1}, {b.data(), 2}}, 0.0), 5.0);
  EXPECT_EQ(a[0], -3.0f);
  EXPECT_EQ(b[1], 4.0f);
  EXPECT_EQ(clip_global_norm({}, 1.0), 0.0);
}

// Gradients long enough for the norm's blocks to be summed in parallel: the same bits on one
// thread and on two, near the exact norm, and the scaled values the same as well.
TEST(ClipGlobalNorm, SameBitsForAnyThreadCount) {
#if defined(_OPENMP)
  std::vector<float> a(200003), b(70001);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37 * static_cast<double>(i)) * 1e-2f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11 * static_cast<double>(i)) * 3e-3f;
  long double exact = 0;
  for (float v : a) exact += static_cast<long double>(v) * v;
  for (float v : b) exact += static_cast<long double>(v) * v;
  const int threads = omp_get_max_threads();
  double norm[2];
  std::vector<float> scaled[2][2];
  for (int k = 0; k < 2; ++k) {
    omp_set_num_threads(k + 1);
    std::vector<float> ca = a, cb = b;
    norm[k] = clip_global_norm({{ca.data(), static_cast<std::int64_t>(ca.size())},
                                {cb.data(), static_cast<std::int64_t>(cb.size())}}, 0.5);
    scaled[k][0] = ca;
    scaled[k][1] = cb;
  }
  omp_set_num_threads(threads);
  EXPECT_EQ(norm[0], norm[1]);
  EXPECT_NEAR(norm[0], std::sqrt(static_cast<double>(exact)), 1e-12 * norm[0]);
  ASSERT_GT(norm[0], 0.5);  // so the values were scaled
  EXPECT_EQ(scaled[0][0], scaled[1][0]);
  EXPECT_EQ(scaled[0][1], scaled[1][1]);
  EXPECT_NEAR(scaled[0][0][1], a[1] * 0.5 / norm[0], 1e-9);
#else
  GTEST_SKIP() << "built without OpenMP";
#endif
}

}  // namespace
}  // namespace eggroll
