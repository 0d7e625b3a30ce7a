// Supervised regression: an MLP fits y_k = sin(a_k . x + c_k), x uniform in [-1, 1]^d, with a
// and c fixed by the seed. Every member is scored (-MSE) on the same minibatch of an epoch; the
// minibatch cursor is task state, so a resumed run reads the same batches.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "eggroll/noise/noise.hpp"
#include "task/builtin_tasks.hpp"

namespace eggroll {
namespace {

class RegressionTask final : public Task {
 public:
  RegressionTask(const KindTable& cfg, std::uint64_t seed) : seed_(seed) {
    in_ = cfg.get_int("input_dim");
    out_ = cfg.get_int("output_dim");
    batch_ = cfg.get_int("batch_size");
    const std::int64_t n_train = cfg.get_int("n_train"), n_val = cfg.get_int("n_val");
    check(batch_ <= n_train, "task.batch_size = ", batch_, " is larger than task.n_train = ", n_train);
    const double freq = cfg.get_double("frequency");
    Tensor a = normal_init(seed, "task.regression.a", {out_, in_}, freq);
    Tensor c = normal_init(seed, "task.regression.c", {out_}, 1.0);
    make_split("train", n_train, a, c, train_x_, train_y_);
    make_split("val", n_val, a, c, val_x_, val_y_);
    order_.resize(static_cast<std::size_t>(n_train));
    shuffle();
  }

  std::string kind() const override { return "regression"; }
  std::int64_t input_dim() const override { return in_; }
  std::int64_t output_dim() const override { return out_; }
  std::string main_figure() const override { return "loss"; }
  std::string eval_figure() const override { return "eval_loss"; }

  void begin_epoch(std::int64_t) override {
    const auto n = static_cast<std::int64_t>(order_.size());
    if (cursor_ + batch_ > n) {
      cursor_ = 0;
      ++pass_;
      shuffle();
    }
    batch_rows_.assign(order_.begin() + cursor_, order_.begin() + cursor_ + batch_);
    cursor_ += batch_;
  }

  std::vector<double> evaluate(Model& model, ForwardContext& ctx) override {
    check(!batch_rows_.empty(), "regression: evaluate called before begin_epoch");
    const std::int64_t members = ctx.view->size();
    ctx.rows_per_member = batch_;
    Tensor x(DType::f32, {members * batch_, in_});
    for (std::int64_t j = 0; j < members; ++j)
      for (std::int64_t t = 0; t < batch_; ++t)
        std::copy_n(train_x_.data() + batch_rows_[t] * in_, in_, x.data<float>() + (j * batch_ + t) * in_);
    Tensor y = model.forward(ctx, x);
    std::vector<double> scores(static_cast<std::size_t>(members));
    for (std::int64_t j = 0; j < members; ++j) {
      double se = 0.0;
      for (std::int64_t t = 0; t < batch_; ++t) se += squared_error(y.data<float>() + (j * batch_ + t) * out_,
                                                                    train_y_.data() + batch_rows_[t] * out_);
      scores[j] = -se / static_cast<double>(batch_ * out_);
    }
    return scores;
  }

  std::map<std::string, double> evaluate_unperturbed(Model& model, Backend& backend) override {
    return {{"eval_loss", mse(model, backend, val_x_, val_y_)}, {"train_loss", mse(model, backend, train_x_, train_y_)}};
  }

  std::map<std::string, Tensor> state() const override {
    Tensor s(DType::i32, {2});
    s.data<std::int32_t>()[0] = static_cast<std::int32_t>(cursor_);
    s.data<std::int32_t>()[1] = static_cast<std::int32_t>(pass_);
    return {{"cursor", std::move(s)}};
  }

  void load_state(const std::map<std::string, Tensor>& state) override {
    auto it = state.find("cursor");
    check(it != state.end() && it->second.dtype() == DType::i32 && it->second.numel() == 2,
          "checkpoint lacks a valid task state 'state/cursor' for the regression task");
    cursor_ = it->second.data<std::int32_t>()[0];
    pass_ = it->second.data<std::int32_t>()[1];
    check(cursor_ >= 0 && cursor_ <= static_cast<std::int64_t>(order_.size()) && pass_ >= 0,
          "checkpoint task state 'state/cursor' = (", cursor_, ", ", pass_, ") is out of range");
    shuffle();
  }

 private:
  void make_split(const std::string& name, std::int64_t n, const Tensor& a, const Tensor& c,
                  std::vector<float>& xs, std::vector<float>& ys) const {
    xs.resize(static_cast<std::size_t>(n * in_));
    ys.resize(static_cast<std::size_t>(n * out_));
    std::vector<std::uint32_t> bits(xs.size());
    fill_bits(noise_stream(seed_, param_id("task.regression." + name), 0, 0, NoiseTag::init), 0, bits.size(), bits.data());
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(bits[i] * 0x1p-31 - 1.0);
    for (std::int64_t s = 0; s < n; ++s)
      for (std::int64_t k = 0; k < out_; ++k) {
        double z = c.data<float>()[k];
        for (std::int64_t j = 0; j < in_; ++j) z += a.data<float>()[k * in_ + j] * xs[s * in_ + j];
        ys[s * out_ + k] = static_cast<float>(std::sin(z));
      }
  }

  // order_ = a permutation of the training rows drawn from (seed, pass).
  void shuffle() {
    std::iota(order_.begin(), order_.end(), 0);
    std::vector<std::uint32_t> bits(order_.size());
    fill_bits(noise_stream(seed_, param_id("task.regression.order"), static_cast<std::uint64_t>(pass_), 0, NoiseTag::init),
              0, bits.size(), bits.data());
    for (std::size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[bits[i - 1] % i]);
  }

  double squared_error(const float* pred, const float* target) const {
    double se = 0.0;
    for (std::int64_t k = 0; k < out_; ++k) se += (static_cast<double>(pred[k]) - target[k]) * (pred[k] - target[k]);
    return se;
  }

  double mse(Model& model, Backend& backend, const std::vector<float>& xs, const std::vector<float>& ys) const {
    const auto n = static_cast<std::int64_t>(xs.size()) / in_;
    Tensor x(DType::f32, {n, in_});
    std::copy(xs.begin(), xs.end(), x.data<float>());
    ForwardContext ctx{backend};
    Tensor y = model.forward(ctx, x);
    double se = 0.0;
    for (std::int64_t s = 0; s < n; ++s) se += squared_error(y.data<float>() + s * out_, ys.data() + s * out_);
    return se / static_cast<double>(n * out_);
  }

  std::uint64_t seed_;
  std::int64_t in_, out_, batch_;
  std::vector<float> train_x_, train_y_, val_x_, val_y_;
  std::vector<std::int64_t> order_, batch_rows_;
  std::int64_t cursor_ = 0, pass_ = 0;
};

}  // namespace

std::unique_ptr<Task> make_regression_task(const KindTable& cfg, std::uint64_t seed) {
  return std::make_unique<RegressionTask>(cfg, seed);
}

}  // namespace eggroll
