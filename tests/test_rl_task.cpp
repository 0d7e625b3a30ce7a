// The RL task: lockstep episodes of every member, group initial states, observation
// normalisation as checkpointed state, and a short CartPole training that beats random play.
#include <gtest/gtest.h>

#include <cstring>

#include "eggroll/backend/backend.hpp"
#include "eggroll/train/trainer.hpp"
#include "support/test_support.hpp"

namespace eggroll {
namespace {

std::string cartpole(bool obs_norm) {
  return std::string(R"(
[run]
epochs = 20
[es]
population = 128
rank = 1
sigma = 0.1
shaping = "centered_rank"
[optim]
name = "adam"
lr = 0.05
[model]
kind = "mlp"
hidden = [16]
[task]
kind = "rl"
env = "CartPole-v1"
eval_episodes = 20
obs_norm = )") + (obs_norm ? "true" : "false") + "\n";
}

// A random linear policy balances CartPole for about 20 steps; 20 epochs of EGGROLL at population 128 reach far
// more (seed 0, the unperturbed policy over 20 episodes: measured 28 -> 396.5; asserted < 100 -> > 150).
TEST(RlTask, CartPoleImprovesFarBeyondRandomPlayInAFewEpochs) {
  auto backend = make_backend(BackendKind::cpu);
  Trainer t(testing::config_from(cartpole(false)), *backend);
  const double start = t.evaluate().at("mean_return");
  for (int e = 0; e < 20; ++e) t.train_epoch();
  const auto figures = t.evaluate();
  RecordProperty("mean_return_start", std::to_string(start));
  RecordProperty("mean_return_end", std::to_string(figures.at("mean_return")));
  EXPECT_LT(start, 100.0);
  EXPECT_GT(figures.at("mean_return"), 150.0);
  EXPECT_GE(figures.at("std_return"), 0.0);
  EXPECT_GT(t.task().epoch_figures().at("env_steps"), 128 * 20 * 9.0);  // every transition counted
}

TEST(RlTask, ResumeWithObservationNormalisationEqualsStraightTraining) {
  auto backend = make_backend(BackendKind::cpu);
  const Config cfg = testing::config_from(cartpole(true), {"run.epochs=8"});
  Trainer straight(cfg, *backend);
  for (int e = 0; e < 8; ++e) straight.train_epoch();
  Trainer first(cfg, *backend);
  for (int e = 0; e < 3; ++e) first.train_epoch();
  Checkpoint ck = first.checkpoint();
  EXPECT_TRUE(ck.tensors.count("state/obs_stats"));
  Trainer second(cfg, *backend);
  second.restore(ck);
  for (int e = 3; e < 8; ++e) second.train_epoch();
  const Checkpoint a = straight.checkpoint(), b = second.checkpoint();
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (auto& [k, v] : a.tensors) EXPECT_EQ(0, std::memcmp(v.raw(), b.tensors.at(k).raw(), v.nbytes())) << k;
}

// With sigma so small that members act alike, the two members of a pair start from the same
// state and so score the same; different pairs start elsewhere.
TEST(RlTask, MembersOfAGroupStartFromTheSameStates) {
  auto backend = make_backend(BackendKind::cpu);
  Config cfg = testing::config_from(cartpole(false), {"es.sigma=1e-9", "es.population=16"});
  Trainer t(cfg, *backend);
  t.task().begin_epoch(0);
  auto view = t.strategy().ask();
  ForwardContext ctx{*backend, view.get()};
  const std::vector<double> s = t.task().evaluate(t.model(), ctx);
  bool pairs_differ = false;
  for (std::size_t k = 0; k + 1 < s.size(); k += 2) {
    EXPECT_EQ(s[k], s[k + 1]) << "pair " << k / 2;
    pairs_differ |= k >= 2 && s[k] != s[0];
  }
  EXPECT_TRUE(pairs_differ);
}

}  // namespace
}  // namespace eggroll
