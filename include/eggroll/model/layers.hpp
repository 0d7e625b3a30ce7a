// Layers as functions of a ForwardContext: with a population view they apply each member's
// perturbed parameters (through the noiser), without one they are plain inference.
// Activations are (rows, features) tensors; with a view, rows_per_member rows per member.
#pragma once
#include <cstdint>
#include <vector>

#include "eggroll/es/noiser.hpp"

namespace eggroll {

// y (rows, m) = x (rows, n) W^T + b, W (m, n) a matrix parameter, b (m) a vector or null.
Tensor linear(ForwardContext& ctx, const Param& w, const Param* b, const Tensor& x);
// The same followed by the activation `after` (Activation::none: none): y = after(x W^T + b), the
// bits of linear then activation; the backend may apply both as it stores each row (the cpu
// backend does).
Tensor linear(ForwardContext& ctx, const Param& w, const Param* b, const Tensor& x, Activation after);
// y (rows, d) = W[tokens] for W (vocab, d) an embedding parameter; tokens in [0, vocab).
Tensor embedding(ForwardContext& ctx, const Param& w, const std::vector<std::int32_t>& tokens);
// Layer norm over features, then * gamma + beta (either may be null).
Tensor layer_norm(ForwardContext& ctx, const Tensor& x, const Param* gamma, const Param* beta, float eps = 1e-5f);
// L1 norm: x / (mean |x| + eps) over features, then * w (may be null).
Tensor l1_norm(ForwardContext& ctx, const Tensor& x, const Param* w, float eps = 1e-5f);
Tensor activation(ForwardContext& ctx, Activation a, const Tensor& x);
// The same on a tensor the caller gives up: computed in place (no new buffer to write).
Tensor activation(ForwardContext& ctx, Activation a, Tensor&& x);

}  // namespace eggroll
