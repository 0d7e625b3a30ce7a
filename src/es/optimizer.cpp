// SGD, Adam and AdamW with checkpointable per-parameter state, and global-norm clipping; the
// update rules are in eggroll/es/optimizer.hpp.
#include "eggroll/es/optimizer.hpp"

#include <cmath>
#include <limits>

#include "eggroll/core/error.hpp"
#include "es/blocked_sum.hpp"

namespace eggroll {

namespace {

// Below this many elements a parameter is updated by the calling thread alone. At 2^15 the
// medium model's matrices (32768 values) went to the team, and the caller waited there for the
// other thread about ten times as long as the loop took (a profile of the update suite); alone,
// --suite update at medium rank 1 went 0.914-0.921 -> 0.922-0.926.
constexpr std::int64_t kParallelMinElements = std::int64_t{1} << 16;

constexpr const char* kOtherCheckpoint = "the checkpoint belongs to another model/optimizer";

// The step counter, the per-parameter state slots (one f32 tensor of shape (n) per suffix) and
// their checkpoint format, shared by every rule. Subclasses implement apply.
class SlottedOptimizer : public Optimizer {
 public:
  SlottedOptimizer(std::string kind, std::vector<std::string> suffixes)
      : kind_(std::move(kind)), suffixes_(std::move(suffixes)) {}

  void begin_step() override { ++step_; }

  std::map<std::string, Tensor> state() const override;
  void load_state(const std::map<std::string, Tensor>& state) override;

 protected:
  // Checks the arguments of apply and returns the parameter's slots (in suffixes_ order),
  // creating zero-filled ones on first use.
  std::vector<float*> prepare(const std::string& name, float* param, const float* grad,
                              std::int64_t n, double lr);
  std::int64_t step() const { return step_; }

 private:
  std::string kind_;                  // for messages: "sgd", "sgd with momentum", "adam", ...
  std::vector<std::string> suffixes_;
  std::map<std::string, std::vector<Tensor>> slots_;
  std::int64_t step_ = 0;
  bool require_known_names_ = false;  // set by load_state of a state with step > 0
};

std::vector<float*> SlottedOptimizer::prepare(const std::string& name, float* param,
                                              const float* grad, std::int64_t n, double lr) {
  check(step_ > 0, kind_, " optimizer: apply('", name, "') before begin_step(): call begin_step() "
        "once per epoch before applying updates");
  check(n >= 0, kind_, " optimizer: parameter '", name, "' has ", n, " elements: expected >= 0");
  check(n == 0 || (param != nullptr && grad != nullptr), kind_, " optimizer: parameter '", name,
        "' has a null param or grad pointer for ", n, " elements");
  check(std::isfinite(lr), kind_, " optimizer: learning rate ", lr, " for '", name,
        "': expected a finite value");
  std::vector<float*> out;
  if (suffixes_.empty()) return out;
  auto it = slots_.find(name);
  if (it == slots_.end()) {
    check(!require_known_names_, kind_, " optimizer: parameter '", name,
          "' has no state in the optimizer state restored from a checkpoint: ",
          kOtherCheckpoint, "; resume with the model and optim settings it was saved with");
    std::vector<Tensor> fresh;
    for (std::size_t s = 0; s < suffixes_.size(); ++s) fresh.emplace_back(DType::f32, Shape{n});
    it = slots_.emplace(name, std::move(fresh)).first;
  }
  for (std::size_t s = 0; s < suffixes_.size(); ++s) {
    Tensor& slot = it->second[s];
    check(slot.numel() == n, kind_, " optimizer: state '", name, "/", suffixes_[s], "' has shape ",
          shape_string(slot.shape()), " but the parameter has shape ", shape_string({n}), ": ",
          kOtherCheckpoint);
    out.push_back(slot.data<float>());
  }
  return out;
}

std::map<std::string, Tensor> SlottedOptimizer::state() const {
  check(step_ <= std::numeric_limits<std::int32_t>::max(), kind_, " optimizer: step ", step_,
        " does not fit the i32 'step' tensor of a checkpoint");
  std::map<std::string, Tensor> out;
  Tensor step_tensor(DType::i32, Shape{1});
  step_tensor.data<std::int32_t>()[0] = static_cast<std::int32_t>(step_);
  out.emplace("step", std::move(step_tensor));
  for (const auto& [name, tensors] : slots_)
    for (std::size_t s = 0; s < suffixes_.size(); ++s) out.emplace(name + "/" + suffixes_[s], tensors[s]);
  return out;
}

void SlottedOptimizer::load_state(const std::map<std::string, Tensor>& state) {
  auto step_it = state.find("step");
  check(step_it != state.end(), kind_, " optimizer state has no 'step' tensor: ", kOtherCheckpoint,
        " or is not an optimizer state");
  const Tensor& step_tensor = step_it->second;
  check(step_tensor.dtype() == DType::i32 && step_tensor.shape() == Shape{1}, kind_,
        " optimizer state 'step' is ", dtype_name(step_tensor.dtype()), " of shape ",
        shape_string(step_tensor.shape()), ": expected i32 of shape (1)");
  const std::int32_t step_value = step_tensor.data<std::int32_t>()[0];
  check(step_value >= 0, kind_, " optimizer state 'step' = ", step_value, ": expected >= 0");

  std::map<std::string, std::vector<Tensor>> loaded;
  for (const auto& [key, tensor] : state) {
    if (key == "step") continue;
    const auto slash = key.rfind('/');
    std::size_t s = suffixes_.size();
    if (slash != std::string::npos)
      for (std::size_t j = 0; j < suffixes_.size(); ++j)
        if (key.compare(slash + 1, std::string::npos, suffixes_[j]) == 0) s = j;
    if (s == suffixes_.size()) {
      std::string expected = "'step'";
      for (const auto& suffix : suffixes_) expected += ", '<param>/" + suffix + "'";
      throw_error(kind_, " optimizer state has tensor '", key, "' of shape ", shape_string(tensor.shape()),
                  ", which this optimizer does not keep (expected ", expected, "): ", kOtherCheckpoint,
                  "; resume with the optim settings it was saved with");
    }
    check(tensor.dtype() == DType::f32 && tensor.ndim() == 1, kind_, " optimizer state '", key,
          "' is ", dtype_name(tensor.dtype()), " of shape ", shape_string(tensor.shape()),
          ": expected f32 of shape (n); ", kOtherCheckpoint);
    auto& entry = loaded[key.substr(0, slash)];
    entry.resize(suffixes_.size());
    entry[s] = tensor;
  }
  for (const auto& [name, tensors] : loaded) {
    for (std::size_t s = 0; s < suffixes_.size(); ++s) {
      check(tensors[s].ndim() == 1, kind_, " optimizer state has no '", name, "/", suffixes_[s],
            "' next to '", name, "/", suffixes_[s == 0 ? 1 : 0], "': ", kOtherCheckpoint);
      check(tensors[s].shape() == tensors[0].shape(), kind_, " optimizer state '", name, "/",
            suffixes_[s], "' has shape ", shape_string(tensors[s].shape()), " but '", name, "/",
            suffixes_[0], "' has shape ", shape_string(tensors[0].shape()), ": the state is corrupt");
    }
  }
  // An optimizer that already holds slots must get exactly the same parameters back.
  if (!slots_.empty()) {
    for (const auto& [name, tensors] : slots_) {
      auto it = loaded.find(name);
      check(it != loaded.end(), kind_, " optimizer state has no tensors for parameter '", name,
            "' of shape ", shape_string(tensors[0].shape()), ": ", kOtherCheckpoint);
      check(it->second[0].shape() == tensors[0].shape(), kind_, " optimizer state '", name, "/",
            suffixes_[0], "' has shape ", shape_string(it->second[0].shape()),
            " but the parameter has shape ", shape_string(tensors[0].shape()), ": ", kOtherCheckpoint);
    }
    for (const auto& [name, tensors] : loaded)
      check(slots_.count(name) == 1, kind_, " optimizer state has tensor '", name, "/", suffixes_[0],
            "' of shape ", shape_string(tensors[0].shape()), " for a parameter this model does not have: ",
            kOtherCheckpoint);
  }
  slots_ = std::move(loaded);
  step_ = step_value;
  require_known_names_ = step_value > 0 && !suffixes_.empty();
}

class Sgd final : public SlottedOptimizer {
 public:
  explicit Sgd(const OptimConfig& c)
      : SlottedOptimizer(c.momentum > 0.0 ? "sgd with momentum" : "sgd",
                         c.momentum > 0.0 ? std::vector<std::string>{"momentum"}
                                          : std::vector<std::string>{}),
        momentum_(c.momentum), nesterov_(c.nesterov), weight_decay_(c.weight_decay) {}

  void apply(const std::string& name, float* param, const float* grad, std::int64_t n, double lr) override {
    const std::vector<float*> slots = prepare(name, param, grad, n, lr);
    const double mu = momentum_, wd = weight_decay_;
    if (slots.empty()) {
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
      for (std::int64_t i = 0; i < n; ++i) {
        const double g = static_cast<double>(grad[i]) + wd * param[i];
        param[i] = static_cast<float>(param[i] - lr * g);
      }
      return;
    }
    float* buf = slots[0];
    const bool nesterov = nesterov_;
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
    for (std::int64_t i = 0; i < n; ++i) {
      const double g = static_cast<double>(grad[i]) + wd * param[i];
      const float v = static_cast<float>(mu * buf[i] + g);
      buf[i] = v;
      const double u = nesterov ? g + mu * v : static_cast<double>(v);
      param[i] = static_cast<float>(param[i] - lr * u);
    }
  }

 private:
  double momentum_;
  bool nesterov_;
  double weight_decay_;
};

class Adam final : public SlottedOptimizer {
 public:
  Adam(const OptimConfig& c, bool decoupled)
      : SlottedOptimizer(decoupled ? "adamw" : "adam", {"m", "v"}),
        beta1_(c.betas[0]), beta2_(c.betas[1]), eps_(c.eps), weight_decay_(c.weight_decay),
        decoupled_(decoupled) {}

  void apply(const std::string& name, float* param, const float* grad, std::int64_t n, double lr) override {
    const std::vector<float*> slots = prepare(name, param, grad, n, lr);
    float* m = slots[0];
    float* v = slots[1];
    const double b1 = beta1_, b2 = beta2_, eps = eps_;
    const double t = static_cast<double>(step());
    const double bias1 = 1.0 - std::pow(b1, t);
    const double bias2 = 1.0 - std::pow(b2, t);
    const double l2 = decoupled_ ? 0.0 : weight_decay_;           // added to the gradient
    const double shrink = decoupled_ ? lr * weight_decay_ : 0.0;  // subtracted times param
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
    for (std::int64_t i = 0; i < n; ++i) {
      const double p = static_cast<double>(param[i]) - shrink * param[i];
      const double g = static_cast<double>(grad[i]) + l2 * param[i];
      const float mi = static_cast<float>(b1 * m[i] + (1.0 - b1) * g);
      const float vi = static_cast<float>(b2 * v[i] + (1.0 - b2) * g * g);
      m[i] = mi;
      v[i] = vi;
      const double mhat = mi / bias1;
      const double vhat = vi / bias2;
      param[i] = static_cast<float>(p - lr * mhat / (std::sqrt(vhat) + eps));
    }
  }

 private:
  double beta1_, beta2_, eps_, weight_decay_;
  bool decoupled_;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& c) {
  check(c.name == "sgd" || c.name == "adam" || c.name == "adamw", "unknown optimizer optim.name = '",
        c.name, "': expected one of sgd, adam, adamw");
  check(std::isfinite(c.weight_decay) && c.weight_decay >= 0.0, "optim.weight_decay = ", c.weight_decay,
        ": expected a finite value >= 0");
  if (c.name == "sgd") {
    check(std::isfinite(c.momentum) && c.momentum >= 0.0, "optim.momentum = ", c.momentum,
          ": expected a finite value >= 0 (0 = plain SGD; 0.9 is common)");
    return std::make_unique<Sgd>(c);
  }
  check(c.betas.size() == 2, "optim.betas has ", c.betas.size(), " values: expected two, e.g. [0.9, 0.999]");
  for (double b : c.betas)
    check(b >= 0.0 && b < 1.0, "optim.betas value ", b, ": expected each in [0, 1), e.g. [0.9, 0.999]");
  check(std::isfinite(c.eps) && c.eps > 0.0, "optim.eps = ", c.eps,
        ": expected a finite value > 0, e.g. 1e-8");
  return std::make_unique<Adam>(c, c.name == "adamw");
}

double clip_global_norm(const std::vector<std::pair<float*, std::int64_t>>& grads, double max_norm) {
  double sum_sq = 0.0;
  for (const auto& [data, n] : grads) {
    check(n >= 0 && (n == 0 || data != nullptr), "clip_global_norm: a gradient of ", n,
          " elements has a null pointer or a negative size");
    const float* g = data;
    sum_sq += es_detail::blocked_sum(n, [g](std::int64_t i) { return static_cast<double>(g[i]) * g[i]; });
  }
  const double norm = std::sqrt(sum_sq);
  if (max_norm > 0.0 && std::isfinite(norm) && norm > max_norm) {
    const double scale = max_norm / norm;
    for (const auto& [data, n] : grads) {
      float* g = data;
#pragma omp parallel for schedule(static) if (n >= (std::int64_t{1} << 16))
      for (std::int64_t i = 0; i < n; ++i) g[i] = static_cast<float>(g[i] * scale);
    }
  }
  return norm;
}

}  // namespace eggroll
