// Optimizers that turn the ES gradient estimate into a parameter update (ALGORITHM.md 1.4):
// SGD (momentum, Nesterov), Adam, AdamW, and global-norm clipping.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "eggroll/core/tensor.hpp"
#include "eggroll/io/config.hpp"

namespace eggroll {

// Every rule minimises: grad is a descent direction (the trainer passes -sqrt(N) * g, g the ES
// gradient estimate). Per element, with g = grad, p = param, t the step counter (begin_step
// calls so far, t >= 1 inside apply), lr the learning rate of this call, wd = weight_decay:
//
//   sgd    g' = g + wd * p                                        (L2; wd = 0 by default)
//          momentum mu > 0:  v = mu * v + g'
//                            u = nesterov ? g' + mu * v : v
//          momentum 0:       u = g'          (no state; nesterov has no effect)
//          p = p - lr * u
//   adam   g' = g + wd * p                                        (L2 weight decay)
//          m = b1 * m + (1 - b1) * g'
//          v = b2 * v + (1 - b2) * g'^2
//          p = p - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
//   adamw  p = p - lr * wd * p   (decoupled weight decay), then the adam rule with g' = g
//
// Parameters and state (m, v, momentum) are float; each element is computed in double from its
// float values and the double scalars and rounded to float once when stored. Elements are
// independent, so results do not depend on the number of threads.
class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // Starts an epoch's update: increments the step counter t used by Adam's bias correction.
  virtual void begin_step() = 0;

  // Applies this step's update to one parameter of n elements: param -= step(grad). name
  // identifies the parameter's state slot, created zero-filled on its first apply; a later
  // apply with a different n throws an Error. Throws if begin_step has not been called.
  virtual void apply(const std::string& name, float* param, const float* grad, std::int64_t n,
                     double lr) = 0;

  // State for checkpoints: f32 tensors of shape (n) keyed "name/m" and "name/v" (adam, adamw)
  // or "name/momentum" (sgd with momentum > 0), and "step", an i32 tensor of shape (1).
  virtual std::map<std::string, Tensor> state() const = 0;

  // Restores state() of an optimizer of the same kind and settings for the same model. Throws
  // an Error naming the tensor and shapes when a key, dtype or shape does not fit this
  // optimizer or the slots it already holds. A parameter that the restored state (step > 0)
  // lacks, or whose size differs, makes the next apply for it throw.
  virtual void load_state(const std::map<std::string, Tensor>& state) = 0;
};

// optim.name = "sgd" | "adam" | "adamw", with momentum, nesterov, betas, eps and weight_decay
// from config (lr is passed to apply). Throws an Error for an unknown name or a value out of
// range (momentum < 0, betas not two values in [0, 1), eps <= 0, weight_decay < 0).
std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& config);

// Global-norm clipping in a fixed order: norm = sqrt(sum of squares over all grads, in the
// order given), accumulated in double. If max_norm > 0 and norm > max_norm, every grad element
// is scaled by max_norm / norm. A non-finite norm leaves the grads unchanged. Returns the norm
// before clipping.
double clip_global_norm(const std::vector<std::pair<float*, std::int64_t>>& grads, double max_norm);

}  // namespace eggroll
