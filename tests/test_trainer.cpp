// Trainer behaviour: the non-finite score policy, run.max_bad_epochs, callbacks and metrics.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "eggroll/backend/backend.hpp"
#include "eggroll/train/callbacks.hpp"
#include "eggroll/train/trainer.hpp"
#include "support/test_support.hpp"

namespace eggroll {
namespace {

// Scores members by -||W_i||^2 on the matrix model, replacing some scores by NaN or inf.
class FlakyTask final : public Task {
 public:
  explicit FlakyTask(int mode) : mode_(mode) {}
  std::string kind() const override { return "flaky"; }
  std::int64_t input_dim() const override { return 4; }
  std::int64_t output_dim() const override { return 3; }
  std::string main_figure() const override { return "loss"; }
  std::vector<double> evaluate(Model& model, ForwardContext& ctx) override {
    ctx.rows_per_member = 4;
    const std::int64_t members = ctx.view->size();
    Tensor eye(DType::f32, {members * 4, 4});
    for (std::int64_t r = 0; r < members * 4; ++r) eye.data<float>()[r * 4 + r % 4] = 1.0f;
    Tensor y = model.forward(ctx, eye);
    std::vector<double> s(static_cast<std::size_t>(members));
    for (std::int64_t j = 0; j < members; ++j) {
      double sq = 0;
      for (int k = 0; k < 12; ++k) sq += y.data<float>()[j * 12 + k] * y.data<float>()[j * 12 + k];
      s[j] = -sq;
      const std::int64_t i = ctx.view->begin() + j;
      if (mode_ == 1 && i % 5 == 0) s[j] = i % 2 ? std::numeric_limits<double>::infinity() : NAN;
      if (mode_ == 2) s[j] = NAN;
    }
    return s;
  }
  std::map<std::string, double> evaluate_unperturbed(Model&, Backend&) override { return {}; }

 private:
  int mode_;
};

const char* kConfig = R"(
[run]
epochs = 6
max_bad_epochs = 3
[es]
population = 20
rank = 2
[model]
kind = "matrix"
[task]
kind = "sphere"
dim = 12
)";

std::unique_ptr<Trainer> flaky_trainer(int mode, Backend& backend) {
  Config cfg = testing::config_from(kConfig);
  auto model = std::make_unique<MatrixModel>(3, 4, 1.0, cfg.run.seed);
  return std::make_unique<Trainer>(cfg, std::move(model), std::make_unique<FlakyTask>(mode), backend);
}

TEST(Trainer, NonFiniteScoresAreCountedAndDoNotPoisonTheUpdate) {
  auto backend = make_backend(BackendKind::cpu);
  auto t = flaky_trainer(1, *backend);
  EpochRecord r = t->train_epoch();
  EXPECT_EQ(r.update.n_nonfinite, 4);  // members 0, 5, 10, 15
  EXPECT_TRUE(r.update.updated);
  for (const Param& p : t->model().params().all())
    for (std::int64_t k = 0; k < p.value.numel(); ++k) EXPECT_TRUE(std::isfinite(p.value.data<float>()[k]));
  EXPECT_GT(r.update.update_norm, 0.0);
  EXPECT_TRUE(std::isfinite(r.update.score_mean));
}

TEST(Trainer, AllNonFiniteEpochsMakeNoUpdateAndStopTheRunAfterMaxBadEpochs) {
  auto backend = make_backend(BackendKind::cpu);
  auto t = flaky_trainer(2, *backend);
  const Tensor before = t->model().params().at("solution").value;
  EpochRecord r = t->train_epoch();
  EXPECT_FALSE(r.update.updated);
  EXPECT_EQ(r.update.n_nonfinite, 20);
  EXPECT_EQ(0, std::memcmp(before.raw(), t->model().params().at("solution").value.raw(), before.nbytes()));
  t->train_epoch();
  try {
    t->train_epoch();
    FAIL() << "the third bad epoch must stop the run";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("run.max_bad_epochs = 3"));
  }
}

TEST(Trainer, MetricsRecordHasTheDocumentedKeys) {
  auto backend = make_backend(BackendKind::cpu);
  Config cfg = testing::config_from(kConfig);
  Trainer t(cfg, *backend);
  EpochRecord r = t.train_epoch();
  r.eval = t.evaluate();
  auto j = epoch_record_json(r);
  for (const char* k : {"epoch", "wall_s", "members_per_s", "score_mean", "score_std", "score_max", "n_nonfinite",
                        "loss", "lr", "sigma", "update_norm", "eval_loss"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_NEAR(j["loss"].get<double>(), -r.update.score_mean, 1e-12);
}

}  // namespace
}  // namespace eggroll
