// int8 layers (ALGORITHM.md section 2): the integer counterparts of layers.hpp. With a
// population view they apply each member's perturbation through the (integer) noiser; without
// one they run the unperturbed model. Activations are int8 (rows, features) tensors.
#pragma once
#include <cstdint>
#include <vector>

#include "eggroll/es/noiser.hpp"

namespace eggroll {

// y (rows, m) = MM(x, W) of 2.1 (perturbed per member as 2.3), W (m, n) an int8 matrix.
Tensor qlinear(ForwardContext& ctx, const Param& w, const Tensor& x);
// qadd(ctx, qlinear(ctx, w, x), b, bias) in one pass: the add runs on each block of output rows
// as the matmul stores it. b and bias may be null.
Tensor qlinear_add(ForwardContext& ctx, const Param& w, const Tensor& x, const Tensor* b, const Param* bias);
// y (rows, d) = W[tokens] (perturbed per member), W (vocab, d) an int8 embedding.
Tensor qembedding(ForwardContext& ctx, const Param& w, const std::vector<std::int32_t>& tokens);
// The L1 norm of 2.4 with per-member weights w (an int8 vector).
Tensor ql1_norm(ForwardContext& ctx, const Tensor& x, const Param& w);
// clip(a + b + bias) elementwise; b and bias may be null.
Tensor qadd(ForwardContext& ctx, const Tensor& a, const Tensor* b, const Param* bias);

}  // namespace eggroll
