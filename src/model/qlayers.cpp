// int8 layers: the glue between int8 parameters, the integer noiser and the backend's int8 ops.
#include "eggroll/model/qlayers.hpp"

namespace eggroll {
namespace {

bool perturbed_here(const ForwardContext& ctx, const Param& p) {
  return ctx.view && ctx.view->noiser().active() && p.perturbed();
}

MemberRows batch_of(const ForwardContext& ctx, const Tensor& x) {
  return ctx.view ? ctx.batch() : MemberRows{1, x.dim(0)};
}

void check_input(const ForwardContext& ctx, const Tensor& x, std::int64_t features, const char* op, const Param* p) {
  if (x.dtype() != DType::i8 || x.ndim() != 2)
    throw_error(op, ": expected an int8 (rows, features) input, got ", dtype_name(x.dtype()), " ",
                shape_string(x.shape()));
  check(x.dim(1) == features, op, " '", p ? p->name : "", "': input has ", x.dim(1), " features, expected ", features);
  if (ctx.view)
    check(x.dim(0) == ctx.batch().rows(), op, ": input has ", x.dim(0), " rows, expected ", ctx.batch().rows());
}

// A vector parameter as (pointer, row stride): per member when perturbed (cached in the view),
// shared otherwise.
struct VectorRows {
  const std::int8_t* data;
  std::int64_t stride;
};
VectorRows vector_rows(ForwardContext& ctx, const Param& v) {
  if (!perturbed_here(ctx, v)) return {v.value.data<std::int8_t>(), 0};
  PopulationView& view = *ctx.view;
  const Tensor& t = view.member_vectors(v, [&] { return view.noiser().qvectors(view, v); });
  return {t.data<std::int8_t>() + ctx.member_begin * v.value.numel(), v.value.numel()};
}

}  // namespace

Tensor qlinear(ForwardContext& ctx, const Param& w, const Tensor& x) { return qlinear_add(ctx, w, x, nullptr, nullptr); }

Tensor qlinear_add(ForwardContext& ctx, const Param& w, const Tensor& x, const Tensor* b, const Param* bias) {
  check_input(ctx, x, w.cols(), "qlinear", &w);
  Tensor y = Tensor::uninitialized(DType::i8, {x.dim(0), w.rows()});
  QAddend add;
  if (b) {
    if (b->dtype() != DType::i8 || b->shape() != y.shape())
      throw_error("qlinear '", w.name, "': the added tensor has ", dtype_name(b->dtype()), " ",
                  shape_string(b->shape()), ", expected ", dtype_name(DType::i8), " ", shape_string(y.shape()));
    add.rows = b->data<std::int8_t>();
  }
  if (bias) {
    check(bias->value.numel() == w.rows(), "qlinear '", w.name, "': bias '", bias->name, "' has ",
          bias->value.numel(), " values, expected ", w.rows());
    const VectorRows v = vector_rows(ctx, *bias);
    add.vec = v.data;
    add.vec_stride = v.stride;
  }
  if (ctx.view && ctx.view->noiser().active())
    ctx.view->noiser().qmatmul(ctx, w, x.data<std::int8_t>(), y.data<std::int8_t>(), add);
  else
    ctx.backend.qmm(batch_of(ctx, x), w.rows(), w.cols(), x.data<std::int8_t>(), w.value.data<std::int8_t>(),
                    QFactors{w.rows(), w.cols(), 1, nullptr, nullptr, 0}, y.data<std::int8_t>(), add,
                    ctx.qpacked(w));
  return y;
}

Tensor qembedding(ForwardContext& ctx, const Param& w, const std::vector<std::int32_t>& tokens) {
  const std::int64_t vocab = w.rows(), d = w.cols();
  for (std::size_t i = 0; i < tokens.size(); ++i)
    check(tokens[i] >= 0 && tokens[i] < vocab, "qembedding '", w.name, "': token ", tokens[i], " at position ", i,
          " is outside [0, ", vocab, ")");
  const auto rows = static_cast<std::int64_t>(tokens.size());
  Tensor y = Tensor::uninitialized(DType::i8, {rows, d});
  if (ctx.view && ctx.view->noiser().active()) {
    check(rows == ctx.batch().rows(), "qembedding: ", rows, " tokens, expected ", ctx.batch().rows());
    ctx.view->noiser().qembedding(ctx, w, tokens.data(), y.data<std::int8_t>());
  } else {
    ctx.backend.qembedding({1, rows}, vocab, d, tokens.data(), w.value.data<std::int8_t>(),
                           QFactors{vocab, d, 1, nullptr, nullptr, 0}, y.data<std::int8_t>());
  }
  return y;
}

Tensor ql1_norm(ForwardContext& ctx, const Tensor& x, const Param& w) {
  check_input(ctx, x, w.value.numel(), "ql1_norm", &w);
  Tensor y = Tensor::uninitialized(DType::i8, x.shape());
  VectorRows v = vector_rows(ctx, w);
  ctx.backend.ql1_norm(batch_of(ctx, x), x.dim(1), x.data<std::int8_t>(), v.data, v.stride, y.data<std::int8_t>());
  return y;
}

Tensor qadd(ForwardContext& ctx, const Tensor& a, const Tensor* b, const Param* bias) {
  check_input(ctx, a, a.dim(1), "qadd", bias);
  if (b && b->shape() != a.shape())
    throw_error("qadd: shapes ", shape_string(a.shape()), " and ", shape_string(b->shape()), " differ");
  Tensor y = Tensor::uninitialized(DType::i8, a.shape());
  VectorRows v = bias ? vector_rows(ctx, *bias) : VectorRows{nullptr, 0};
  if (bias) check(bias->value.numel() == a.dim(1), "qadd: bias '", bias->name, "' has ", bias->value.numel(),
                  " values, expected ", a.dim(1));
  ctx.backend.qadd(batch_of(ctx, a), a.dim(1), a.data<std::int8_t>(), b ? b->data<std::int8_t>() : nullptr, v.data,
                   v.stride, y.data<std::int8_t>());
  return y;
}

}  // namespace eggroll
