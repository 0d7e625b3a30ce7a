// Short convergence checks of the whole training loop (Trainer + EGGROLL + optimizer +
// schedules): the sphere function with a matrix model and a small supervised regression with
// an mlp. Fixed seeds; each run takes about a second on one core.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>

#include "eggroll/backend/backend.hpp"
#include "eggroll/train/trainer.hpp"
#include "support/test_support.hpp"

namespace eggroll {
namespace {

using testing::config_from;

struct ThreadGuard {
  int saved = omp_get_max_threads();
  ~ThreadGuard() { omp_set_num_threads(saved); }
};

struct Losses {
  double initial = 0, final = 0;
};

// Trains the config's run.epochs epochs; eval_loss of the unperturbed model before and after.
Losses train(const Config& config) {
  auto backend = make_backend(BackendKind::cpu);
  Trainer t(config, *backend);
  Losses r;
  r.initial = t.evaluate().at("eval_loss");
  for (std::int64_t e = 0; e < config.run.epochs; ++e) {
    const EpochRecord rec = t.train_epoch();
    EXPECT_TRUE(rec.update.updated) << "epoch " << e;
    EXPECT_EQ(rec.update.n_nonfinite, 0) << "epoch " << e;
  }
  r.final = t.evaluate().at("eval_loss");
  return r;
}

// Sphere in 64 dimensions (an 8 x 8 matrix, initial entries N(0, 1): loss about 64), rank 1,
// 64 members, 150 epochs, lr and sigma decaying by 0.98 per epoch. Required: the loss falls
// below 1e-3 of its initial value. Measured (seed 1): Adam 7.4e-6 of the initial value (about
// 80 epochs reach 1e-3); SGD 6e-8.
constexpr const char* kSphere = R"(
[run]
seed = 1
epochs = 150
threads = 1
eval_every = 0
[es]
population = 64
rank = 1
sigma = 0.1
[optim]
sigma_schedule = "exponential"
sigma_end = 0.98
lr_schedule = "exponential"
[model]
kind = "matrix"
[task]
kind = "sphere"
dim = 64
)";

TEST(Convergence, SphereWithAdamFallsBelowOneThousandthOfItsInitialValue) {
  ThreadGuard guard;
  const Losses r = train(config_from(kSphere, {"optim.name=adam", "optim.lr=0.1", "optim.lr_end=0.98"}));
  RecordProperty("initial", std::to_string(r.initial));
  RecordProperty("final", std::to_string(r.final));
  EXPECT_GT(r.initial, 30.0);
  EXPECT_LT(r.final, 1e-3 * r.initial);
}

TEST(Convergence, SphereWithSgdFallsBelowOneThousandthOfItsInitialValue) {
  ThreadGuard guard;
  // Plain SGD moves each entry by about lr * sigma per epoch (ALGORITHM.md 1.4); both decay by 0.97.
  const Losses r = train(config_from(kSphere, {"optim.name=sgd", "optim.lr=1.0", "optim.lr_end=0.97",
                                            "optim.sigma_end=0.97", "es.rank=2"}));
  RecordProperty("initial", std::to_string(r.initial));
  RecordProperty("final", std::to_string(r.final));
  EXPECT_GT(r.initial, 30.0);
  EXPECT_LT(r.final, 1e-3 * r.initial);
}

// Regression y = sin(a . x + c), 4 inputs, 1 output, with an mlp of one hidden layer of 32 tanh
// units; 128 members at rank 8, sigma 0.05, Adam lr 0.05 with a cosine decay to 0.001, batches
// of 32, 300 epochs (about 1 s). Predicting the mean scores about 0.5; required: validation
// MSE < 0.05 and < 5% of the initial model's. Measured (seed 1): 0.0186 from 0.947.
constexpr const char* kRegression = R"(
[run]
seed = 1
epochs = 300
threads = 1
eval_every = 0
[es]
population = 128
rank = 8
sigma = 0.05
[optim]
name = "adam"
lr = 0.05
lr_schedule = "cosine"
lr_end = 0.001
[model]
kind = "mlp"
hidden = [32]
activation = "tanh"
[task]
kind = "regression"
batch_size = 32
)";

TEST(Convergence, RegressionMlpReachesLowValidationError) {
  ThreadGuard guard;
  const Losses r = train(config_from(kRegression));
  RecordProperty("initial", std::to_string(r.initial));
  RecordProperty("final", std::to_string(r.final));
  EXPECT_GT(r.initial, 0.3);
  EXPECT_LT(r.final, 0.05);
  EXPECT_LT(r.final, 0.05 * r.initial);
}

}  // namespace
}  // namespace eggroll
