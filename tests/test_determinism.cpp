// Determinism of training (DESIGN.md contracts 1, 2 and 4): the same config gives the same bits
// whatever the thread count, however the members are split into views, and whether the run
// is trained straight or stopped, checkpointed and resumed in a fresh Trainer. Runs the
// regression task with an mlp and the sphere task with a matrix model, with the noise from the
// generator and from the table.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "eggroll/backend/backend.hpp"
#include "eggroll/io/safetensors.hpp"
#include "eggroll/train/trainer.hpp"
#include "support/test_support.hpp"

namespace eggroll {
namespace {

using testing::config_from;

// regression + mlp: 4 batches of 16 per pass over the 64 training rows, so 6 epochs start a
// second pass (a reshuffle).
constexpr const char* kRegression = R"(
[run]
seed = 11
epochs = 6
threads = 1
eval_every = 0
[es]
population = 64
rank = 2
sigma = 0.05
[optim]
name = "adam"
lr = 0.02
[model]
kind = "mlp"
hidden = [16]
activation = "tanh"
[task]
kind = "regression"
batch_size = 16
n_train = 64
n_val = 32
)";

constexpr const char* kSphere = R"(
[run]
seed = 5
epochs = 6
threads = 1
eval_every = 0
[es]
population = 64
rank = 1
sigma = 0.1
[optim]
name = "sgd"
lr = 0.5
momentum = 0.9
[model]
kind = "matrix"
[task]
kind = "sphere"
dim = 64
)";

using Params = std::map<std::string, std::vector<float>>;

Params snapshot(Trainer& t) {
  Params out;
  for (const Param& p : t.model().params().all()) {
    const float* v = p.value.data<float>();
    out[p.name] = std::vector<float>(v, v + p.value.numel());
  }
  return out;
}

// Bitwise equality of every parameter (so -0 vs +0 or NaN payloads would count as different).
::testing::AssertionResult same_bits(const Params& a, const Params& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " parameters";
  for (const auto& [name, va] : a) {
    auto it = b.find(name);
    if (it == b.end()) return ::testing::AssertionFailure() << "no parameter " << name;
    const auto& vb = it->second;
    if (va.size() != vb.size() || std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) != 0) {
      std::size_t i = 0;
      while (i < va.size() && i < vb.size() && std::memcmp(&va[i], &vb[i], sizeof(float)) == 0) ++i;
      return ::testing::AssertionFailure() << name << " differs first at element " << i;
    }
  }
  return ::testing::AssertionSuccess();
}

// Restores the OpenMP thread count when a test is done with it.
struct ThreadGuard {
  int saved = omp_get_max_threads();
  ~ThreadGuard() { omp_set_num_threads(saved); }
};

// Trains a fresh Trainer for `epochs` epochs; the parameters afterwards.
Params train(const Config& config, std::int64_t epochs) {
  auto backend = make_backend(BackendKind::cpu);
  Trainer t(config, *backend);
  for (std::int64_t e = 0; e < epochs; ++e) {
    const EpochRecord r = t.train_epoch();
    EXPECT_TRUE(r.update.updated) << "epoch " << e;
  }
  return snapshot(t);
}

Params initial(const Config& config) {
  auto backend = make_backend(BackendKind::cpu);
  Trainer t(config, *backend);
  return snapshot(t);
}

// Pendulum with observation normalisation: each thread steps its own block of members'
// environments, and the observation statistics (part of the task's checkpointed state) are
// gathered per member, so neither may depend on the threads or the view split.
constexpr const char* kPendulum = R"(
[run]
seed = 3
epochs = 6
threads = 1
eval_every = 0
[es]
population = 64
rank = 2
sigma = 0.1
[optim]
name = "adam"
lr = 0.03
[model]
kind = "mlp"
hidden = [8]
activation = "tanh"
[task]
kind = "rl"
env = "Pendulum-v1"
episodes = 2
obs_norm = true
eval_episodes = 4
)";

struct RunSetup {
  std::string name;
  Config config;
};

std::vector<RunSetup> setups() {
  return {{"regression/mlp generator", config_from(kRegression)},
          {"regression/mlp table", config_from(kRegression, {"es.noise_source=table", "es.table_log2_size=20"})},
          {"sphere/matrix generator", config_from(kSphere)},
          {"sphere/matrix table", config_from(kSphere, {"es.noise_source=table", "es.table_log2_size=20"})},
          {"rl/pendulum, obs_norm", config_from(kPendulum)}};
}

TEST(Determinism, SameSeedSameBitsOtherSeedOtherBits) {
  ThreadGuard guard;
  for (const RunSetup& s : setups()) {
    SCOPED_TRACE(s.name);
    const Params a = train(s.config, 6), b = train(s.config, 6);
    EXPECT_TRUE(same_bits(a, b));
    EXPECT_FALSE(same_bits(a, initial(s.config))) << "training did not move the parameters";
    Config other = s.config;
    other.run.seed += 1;
    EXPECT_FALSE(same_bits(a, train(other, 6)));
  }
}

TEST(Determinism, OneOrTwoThreadsGiveTheSameBits) {
  ThreadGuard guard;
  for (const RunSetup& s : setups()) {
    SCOPED_TRACE(s.name);
    Config one = s.config, two = s.config;
    one.run.threads = 1;
    two.run.threads = 2;
    const Params a = train(one, 6);
    EXPECT_EQ(omp_get_max_threads(), 1);  // the trainer applied run.threads
    const Params b = train(two, 6);
    EXPECT_EQ(omp_get_max_threads(), 2);
    EXPECT_TRUE(same_bits(a, b));
  }
}

// The trainer evaluates members in views of Strategy::chunk_members() members, from
// es.memory_budget. The validator keeps the budget >= 1 MiB, so it is set on the parsed config:
// a budget below one pair's noise gives views of 2 members, and the update then also reads
// the noise in views of 2 instead of reusing the one full view.
TEST(Determinism, ChunksOfTwoMembersGiveTheSameBitsAsOneView) {
  ThreadGuard guard;
  for (const RunSetup& s : setups()) {
    SCOPED_TRACE(s.name);
    Config small = s.config;
    small.es.memory_budget = 1;
    {
      auto backend = make_backend(BackendKind::cpu);
      Trainer t(small, *backend);
      ASSERT_EQ(t.strategy().chunk_members(), 2);
      Trainer u(s.config, *backend);
      ASSERT_EQ(u.strategy().chunk_members(), 64);
    }
    EXPECT_TRUE(same_bits(train(s.config, 6), train(small, 6)));
  }
}

// Scores of every member from views of different sizes: one view of all 64, two halves, and
// 32 views of 2 members.
TEST(Determinism, TaskScoresDoNotDependOnTheViewSplit) {
  ThreadGuard guard;
  for (const RunSetup& s : setups()) {
    SCOPED_TRACE(s.name);
    auto backend = make_backend(BackendKind::cpu);
    Trainer t(s.config, *backend);
    t.train_epoch();  // epoch 1: a moved model and a second batch
    Strategy& st = t.strategy();
    t.task().begin_epoch(st.epoch());
    auto scores_of = [&](std::int64_t size) {
      std::vector<double> out;
      for (std::int64_t b = 0; b < st.population(); b += size) {
        auto view = st.ask(b, b + size);
        ForwardContext ctx{*backend, view.get()};
        const std::vector<double> part = t.task().evaluate(t.model(), ctx);
        EXPECT_EQ(static_cast<std::int64_t>(part.size()), size);
        out.insert(out.end(), part.begin(), part.end());
      }
      return out;
    };
    const std::vector<double> whole = scores_of(64), halves = scores_of(32), pairs = scores_of(2);
    ASSERT_EQ(whole.size(), 64u);
    EXPECT_EQ(whole, halves);
    EXPECT_EQ(whole, pairs);
    // The members do differ (the scores are not trivially equal), and each pair's two members too.
    int distinct = 0;
    for (std::size_t i = 0; i + 1 < whole.size(); i += 2) distinct += whole[i] != whole[i + 1];
    EXPECT_EQ(distinct, 32);
  }
}

// K epochs straight equal k epochs, a checkpoint (parameters, optimizer state, epoch counter
// and the task's state, e.g. the regression cursor), a fresh Trainer restored from it, and K - k
// more epochs. The checkpoint also goes through a safetensors file once.
TEST(Determinism, ResumeFromCheckpointGivesTheSameBits) {
  ThreadGuard guard;
  testing::TempDir dir;
  for (const RunSetup& s : setups()) {
    const Params straight = train(s.config, 6);
    for (std::int64_t k : {1, 3, 5}) {
      SCOPED_TRACE(s.name + ", resumed after epoch " + std::to_string(k));
      auto backend = make_backend(BackendKind::cpu);
      Checkpoint ck;
      {
        Trainer first(s.config, *backend);
        for (std::int64_t e = 0; e < k; ++e) first.train_epoch();
        ck = first.checkpoint();
      }
      if (k == 3) {
        const std::string path = (dir.path() / "ck.safetensors").string();
        write_safetensors(path, ck);
        ck = read_safetensors(path);
      }
      Trainer second(s.config, *backend);
      second.restore(ck);
      EXPECT_EQ(second.epoch(), k);
      for (std::int64_t e = k; e < 6; ++e) second.train_epoch();
      EXPECT_TRUE(same_bits(straight, snapshot(second)));
    }
  }
}

// Without the task state the regression run would read other batches after a resume: the
// checkpoint must carry it (a check that the test above can fail).
TEST(Determinism, RegressionCheckpointCarriesTheBatchCursor) {
  ThreadGuard guard;
  const Config config = config_from(kRegression);
  auto backend = make_backend(BackendKind::cpu);
  Trainer first(config, *backend);
  for (int e = 0; e < 3; ++e) first.train_epoch();
  Checkpoint ck = first.checkpoint();
  ASSERT_EQ(ck.tensors.count("state/cursor"), 1u);
  EXPECT_EQ(ck.tensors.at("state/cursor").data<std::int32_t>()[0], 48);  // 3 batches of 16
  EXPECT_EQ(ck.tensors.count("strategy/epoch"), 1u);
  const Params straight = train(config, 6);
  ck.tensors.at("state/cursor").data<std::int32_t>()[0] = 0;  // forget the cursor
  Trainer second(config, *backend);
  second.restore(ck);
  for (int e = 3; e < 6; ++e) second.train_epoch();
  EXPECT_FALSE(same_bits(straight, snapshot(second)));
}

}  // namespace
}  // namespace eggroll
