// Benchmark functions (sphere, rastrigin) over a solution held as a matrix parameter, so the
// low-rank path is what moves it. A member's matrix W_i (m, n) is read by one forward pass of
// the identity: each member processes the n rows of I_n and gets W_i^T.
#include <cmath>
#include <numbers>

#include "task/builtin_tasks.hpp"

namespace eggroll {
namespace {

// Picks rows m for a dimension d: the largest divisor of d not above sqrt(d).
std::int64_t auto_rows(std::int64_t d) {
  std::int64_t best = 1;
  for (std::int64_t m = 1; m * m <= d; ++m)
    if (d % m == 0) best = m;
  return best;
}

class FunctionTask final : public Task {
 public:
  FunctionTask(std::string kind, const KindTable& cfg) : kind_(std::move(kind)) {
    dim_ = cfg.get_int("dim");
    rows_ = cfg.get_int("rows") > 0 ? cfg.get_int("rows") : auto_rows(dim_);
    check(dim_ % rows_ == 0, "task.rows = ", rows_, " does not divide task.dim = ", dim_,
          ": choose rows that divide dim, or 0 to pick automatically");
    shift_ = cfg.get_double("shift");
  }
  std::string kind() const override { return kind_; }
  std::int64_t input_dim() const override { return dim_ / rows_; }
  std::int64_t output_dim() const override { return rows_; }
  std::string required_model() const override { return "matrix"; }
  std::string main_figure() const override { return "loss"; }
  std::string eval_figure() const override { return "eval_loss"; }

  std::vector<double> evaluate(Model& model, ForwardContext& ctx) override {
    const std::int64_t n = input_dim(), members = ctx.view->size();
    ctx.rows_per_member = n;
    Tensor x(DType::f32, {members * n, n});
    float* xv = x.data<float>();
    for (std::int64_t j = 0; j < members; ++j)
      for (std::int64_t k = 0; k < n; ++k) xv[(j * n + k) * n + k] = 1.0f;
    Tensor y = model.forward(ctx, x);  // (members * n, m): member j's W_j^T
    std::vector<double> scores(static_cast<std::size_t>(members));
    for (std::int64_t j = 0; j < members; ++j) scores[j] = -value(y.data<float>() + j * dim_);
    return scores;
  }

  std::map<std::string, double> evaluate_unperturbed(Model& model, Backend& backend) override {
    const Tensor& w = model.params().at("solution").value;
    return {{"eval_loss", value(w.data<float>())}};
  }

 private:
  double value(const float* x) const {
    double f = kind_ == "rastrigin" ? 10.0 * static_cast<double>(dim_) : 0.0;
    for (std::int64_t k = 0; k < dim_; ++k) {
      const double v = static_cast<double>(x[k]) - shift_;
      f += kind_ == "rastrigin" ? v * v - 10.0 * std::cos(2.0 * std::numbers::pi * v) : v * v;
    }
    return f;
  }
  std::string kind_;
  std::int64_t dim_, rows_;
  double shift_;
};

}  // namespace

std::unique_ptr<Task> make_function_task(const KindTable& cfg) { return std::make_unique<FunctionTask>(cfg.kind, cfg); }

}  // namespace eggroll
