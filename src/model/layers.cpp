// Layers: the glue between parameters, the noiser and the backend ops.
#include "eggroll/model/layers.hpp"

#include <tuple>
#include <utility>

namespace eggroll {
namespace {

void check_rows(const ForwardContext& ctx, const Tensor& x, const char* op) {
  if (x.ndim() != 2) throw_error(op, ": input must be 2-D (rows, features), got ", shape_string(x.shape()));
  if (ctx.shared_input)
    check(x.dim(0) == ctx.rows_per_member, op, ": a shared input has ", x.dim(0), " rows, expected the ",
          ctx.rows_per_member, " rows every member reads");
  else if (ctx.view)
    check(x.dim(0) == ctx.batch().rows(), op, ": input has ", x.dim(0), " rows, expected ", ctx.members(),
          " members x ", ctx.rows_per_member, " rows per member");
}

bool perturbed_here(const ForwardContext& ctx, const Param& p) {
  return ctx.view && ctx.view->noiser().active() && p.perturbed();
}

// A vector parameter's values for the context's rows (d of them each): one vector for every row
// (stride 0), or each member's perturbed copy (stride d, from the context's first member).
std::pair<const float*, std::int64_t> vector_values(ForwardContext& ctx, const Param& v, std::int64_t d) {
  check(v.value.numel() == d, "parameter '", v.name, "' has ", v.value.numel(), " values, expected ", d);
  if (!perturbed_here(ctx, v)) return {v.value.data<float>(), 0};
  PopulationView& view = *ctx.view;
  const Tensor& per_member = view.member_vectors(v, [&] { return view.noiser().vectors(view, v); });
  return {per_member.data<float>() + ctx.member_begin * d, d};
}

// Applies a vector parameter to every row with op (add or mul), per member when perturbed.
template <typename Op>
void apply_vector(ForwardContext& ctx, const Param& v, Tensor& y, Op op) {
  const auto [values, stride] = vector_values(ctx, v, y.dim(1));
  op(stride == 0 ? MemberRows{1, y.dim(0)} : ctx.batch(), values, stride);
}

void add_vector(ForwardContext& ctx, const Param& v, Tensor& y) {
  apply_vector(ctx, v, y, [&](const MemberRows& b, const float* p, std::int64_t stride) {
    ctx.backend.add_rows(b, y.dim(1), p, stride, y.data<float>());
  });
}

void mul_vector(ForwardContext& ctx, const Param& v, Tensor& y) {
  apply_vector(ctx, v, y, [&](const MemberRows& b, const float* p, std::int64_t stride) {
    ctx.backend.mul_rows(b, y.dim(1), p, stride, y.data<float>());
  });
}

}  // namespace

Tensor linear(ForwardContext& ctx, const Param& w, const Param* b, const Tensor& x) {
  return linear(ctx, w, b, x, Activation::none);
}

Tensor linear(ForwardContext& ctx, const Param& w, const Param* b, const Tensor& x, Activation after) {
  check_rows(ctx, x, "linear");
  const std::int64_t m = w.rows();
  if (x.dim(1) != w.cols())
    throw_error("linear '", w.name, "': input has ", x.dim(1), " features, the weight ", shape_string(w.value.shape()),
                " expects ", w.cols());
  // The bias and the activation, for the backend to apply as each row's values are finished.
  RowEpilogue e;
  e.activation = after;
  if (b) std::tie(e.bias, e.bias_stride) = vector_values(ctx, *b, m);
  if (ctx.shared_input) {
    check(ctx.view != nullptr, "linear '", w.name, "': a shared input needs a population view");
    Tensor y = Tensor::uninitialized(DType::f32, {ctx.batch().rows(), m});
    ctx.view->noiser().matmul_shared(ctx, w, x.data<float>(), y.data<float>(), e);
    return y;
  }
  Tensor y = Tensor::uninitialized(DType::f32, {x.dim(0), m});
  if (ctx.view && ctx.view->noiser().active())
    ctx.view->noiser().matmul(ctx, w, x.data<float>(), y.data<float>(), e);
  else
    ctx.backend.linear({1, x.dim(0)}, m, w.cols(), x.data<float>(), w.value.data<float>(), nullptr, e, y.data<float>(),
                       ctx.packed(w));
  return y;
}

Tensor embedding(ForwardContext& ctx, const Param& w, const std::vector<std::int32_t>& tokens) {
  const std::int64_t vocab = w.rows(), d = w.cols();
  for (std::size_t i = 0; i < tokens.size(); ++i)
    check(tokens[i] >= 0 && tokens[i] < vocab, "embedding '", w.name, "': token ", tokens[i], " at position ", i,
          " is outside [0, ", vocab, ")");
  const auto rows = static_cast<std::int64_t>(tokens.size());
  Tensor y = Tensor::uninitialized(DType::f32, {rows, d});
  if (ctx.view && ctx.view->noiser().active()) {
    check(rows == ctx.batch().rows(), "embedding: ", rows, " tokens, expected ", ctx.batch().rows());
    ctx.view->noiser().embedding(ctx, w, tokens.data(), y.data<float>());
  } else {
    ctx.backend.embedding({1, rows}, vocab, d, tokens.data(), w.value.data<float>(), {vocab, d, 1, nullptr, nullptr},
                          y.data<float>());
  }
  return y;
}

Tensor layer_norm(ForwardContext& ctx, const Tensor& x, const Param* gamma, const Param* beta, float eps) {
  check_rows(ctx, x, "layer_norm");
  Tensor y = Tensor::uninitialized(DType::f32, x.shape());
  ctx.backend.layer_norm(x.dim(0), x.dim(1), x.data<float>(), eps, y.data<float>());
  if (gamma) mul_vector(ctx, *gamma, y);
  if (beta) add_vector(ctx, *beta, y);
  return y;
}

Tensor l1_norm(ForwardContext& ctx, const Tensor& x, const Param* w, float eps) {
  check_rows(ctx, x, "l1_norm");
  Tensor y = Tensor::uninitialized(DType::f32, x.shape());
  ctx.backend.l1_norm(x.dim(0), x.dim(1), x.data<float>(), eps, y.data<float>());
  if (w) mul_vector(ctx, *w, y);
  return y;
}

Tensor activation(ForwardContext& ctx, Activation a, const Tensor& x) {
  Tensor y = Tensor::uninitialized(DType::f32, x.shape());
  ctx.backend.activation(a, x.numel(), x.data<float>(), y.data<float>());
  return y;
}

Tensor activation(ForwardContext& ctx, Activation a, Tensor&& x) {
  Tensor y = std::move(x);
  ctx.backend.activation(a, y.numel(), y.data<float>(), y.data<float>());
  return y;
}

}  // namespace eggroll
