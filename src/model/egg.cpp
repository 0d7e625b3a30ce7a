// The EGG language model (ALGORITHM.md 2.4): parameters, initialisation and the token step.
#include "eggroll/model/egg.hpp"

#include <algorithm>
#include <cmath>

#include "eggroll/model/weight_packs.hpp"
#include "eggroll/noise/noise.hpp"
#include "eggroll/quant/qmath.hpp"

namespace eggroll {
namespace {

// clip(round(16 z)) for z from the generator (tag init): the int8 initialisation of 2.4.
Tensor int8_init(std::uint64_t seed, const std::string& name, Shape shape) {
  Tensor z = normal_init(seed, name, shape, 1.0);
  Tensor t(DType::i8, std::move(shape));
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t.data<std::int8_t>()[i] = static_cast<std::int8_t>(q::clip8(std::lround(16.0f * z.data<float>()[i])));
  return t;
}

Tensor filled(Shape shape, std::int8_t value) {
  Tensor t(DType::i8, std::move(shape));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<std::int8_t>()[i] = value;
  return t;
}

std::string block(std::int64_t l) { return "blocks." + std::to_string(l) + "."; }

EggModel::LayerStats layer_stats(const Tensor& x) {
  std::vector<std::int64_t> hist(256, 0);
  double sum_abs = 0;
  std::int64_t saturated = 0;
  const std::int8_t* v = x.data<std::int8_t>();
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    sum_abs += std::abs(static_cast<int>(v[i]));
    saturated += (v[i] >= 127 || v[i] <= -127);
    ++hist[static_cast<std::size_t>(v[i] + 128)];
  }
  const double n = static_cast<double>(x.numel());
  double entropy = 0;
  for (std::int64_t c : hist)
    if (c > 0) entropy -= (static_cast<double>(c) / n) * std::log2(static_cast<double>(c) / n);
  return {sum_abs / n, 100.0 * static_cast<double>(saturated) / n, entropy};
}


}  // namespace

EggModel::EggModel(const EggSpec& spec, std::uint64_t seed) : spec_(spec) {
  check(spec.width >= 1 && spec.layers >= 1 && spec.mlp_ratio >= 1, "egg model: width, layers and mlp_ratio must be >= 1");
  const std::int64_t d = spec.width, hidden = spec.mlp_ratio * d;
  check(hidden <= 133143, "egg model: MLP width ", hidden, " exceeds the int32 accumulator bound of 133,143 inputs");
  params_.add("embed", ParamKind::embedding, int8_init(seed, "embed", {kVocab, d}));
  for (std::int64_t l = 0; l < spec.layers; ++l) {
    const std::string b = block(l);
    params_.add(b + "ln1.weight", ParamKind::vector, filled({d}, 16));
    for (const char* m : {"gru.W_f", "gru.U_f", "gru.W_h", "gru.U_h"})
      params_.add(b + m, ParamKind::matrix, int8_init(seed, b + m, {d, d}));
    params_.add(b + "gru.b_f", ParamKind::vector, filled({d}, 0));
    params_.add(b + "gru.b_h", ParamKind::vector, filled({d}, 0));
    params_.add(b + "ln2.weight", ParamKind::vector, filled({d}, 16));
    params_.add(b + "mlp.up", ParamKind::matrix, int8_init(seed, b + "mlp.up", {hidden, d}));
    params_.add(b + "mlp.down", ParamKind::matrix, int8_init(seed, b + "mlp.down", {d, hidden}));
  }
  params_.add("ln_out.weight", ParamKind::vector, filled({d}, 16));
  params_.add("head", ParamKind::matrix, int8_init(seed, "head", {kVocab, d}));
}

Tensor EggModel::forward(ForwardContext&, const Tensor&) {
  throw_error("the egg model is stepped one token at a time by a text task (task.kind = \"text\")");
}

// h' of the one-gate GRU: f = clip(MM(a, W_f) + MM(h, U_f) + b_f), g = floor((f + 127) h / 256),
// hh = clip(MM(a, W_h) + MM(g, U_h) + b_h), h' = clip(h + floor((f + 127) (hh - h) / 256)), into
// h; returns the block's residual clip(x + h').
Tensor EggModel::gru(ForwardContext& ctx, std::int64_t l, const Tensor& a, Tensor& h, const Tensor& x,
                     const std::vector<std::int32_t>& tokens) const {
  const std::string b = block(l);
  const std::int64_t d = spec_.width;
  for (std::size_t row = 0; row < tokens.size(); ++row)
    if (tokens[row] == 0) std::fill_n(h.data<std::int8_t>() + row * d, d, std::int8_t{0});
  Tensor hf = qlinear(ctx, params_.at(b + "gru.U_f"), h);
  Tensor f = qlinear_add(ctx, params_.at(b + "gru.W_f"), a, &hf, &params_.at(b + "gru.b_f"));
  Tensor g = Tensor::uninitialized(DType::i8, h.shape());  // qgru_gate writes every value
  ctx.backend.qgru_gate(h.numel(), f.data<std::int8_t>(), h.data<std::int8_t>(), g.data<std::int8_t>());
  Tensor hg = qlinear(ctx, params_.at(b + "gru.U_h"), g);
  Tensor hh = qlinear_add(ctx, params_.at(b + "gru.W_h"), a, &hg, &params_.at(b + "gru.b_h"));
  Tensor y = Tensor::uninitialized(DType::i8, x.shape());  // qgru_update_add writes every value
  ctx.backend.qgru_update_add(h.numel(), f.data<std::int8_t>(), hh.data<std::int8_t>(), h.data<std::int8_t>(),
                              x.data<std::int8_t>(), y.data<std::int8_t>());
  return y;
}

Tensor EggModel::step(ForwardContext& ctx, const std::vector<std::int32_t>& tokens, std::vector<Tensor>& state,
                      std::vector<LayerStats>* stats) const {
  const auto rows = static_cast<std::int64_t>(tokens.size());
  check(static_cast<std::int64_t>(state.size()) == spec_.layers, "egg step: ", state.size(), " state tensors for ",
        spec_.layers, " layers");
  if (stats) stats->assign(static_cast<std::size_t>(2 * spec_.layers + 1), LayerStats{});
  Tensor x = qembedding(ctx, params_.at("embed"), tokens);
  for (std::int64_t l = 0; l < spec_.layers; ++l) {
    const std::string b = block(l);
    Tensor& h = state[l];
    if (h.dtype() != DType::i8 || h.dim(0) != rows || h.dim(1) != spec_.width)
      throw_error("egg step: state of layer ", l, " has shape ", shape_string(h.shape()), ", expected (", rows, ", ",
                  spec_.width, ")");
    Tensor a = ql1_norm(ctx, x, params_.at(b + "ln1.weight"));
    x = gru(ctx, l, a, h, x, tokens);  // x + GRU(LN1(x)), the residual
    if (stats) (*stats)[2 * l] = layer_stats(h);
    Tensor up = qlinear(ctx, params_.at(b + "mlp.up"), ql1_norm(ctx, x, params_.at(b + "ln2.weight")));
    x = qlinear_add(ctx, params_.at(b + "mlp.down"), up, &x, nullptr);  // x + down, the residual
    if (stats) (*stats)[2 * l + 1] = layer_stats(up);
  }
  Tensor logits = qlinear(ctx, params_.at("head"), ql1_norm(ctx, x, params_.at("ln_out.weight")));
  if (stats) stats->back() = layer_stats(logits);
  return logits;
}

std::string egg_sample(EggModel& model, Backend& backend, const std::string& prompt, std::int64_t n_bytes,
                       double temperature, std::uint64_t seed) {
  check(temperature >= 0 && std::isfinite(temperature), "temperature = ", temperature, ": expected a finite value >= 0");
  check(n_bytes >= 0, "bytes = ", n_bytes, ": expected >= 0");
  WeightPacks packs;  // one row per step: packing the weights in every step would cost more than the step
  ForwardContext ctx{backend};
  ctx.packs = &packs;
  std::vector<Tensor> state;
  for (std::int64_t l = 0; l < model.spec().layers; ++l) state.emplace_back(DType::i8, Shape{1, model.spec().width});
  std::vector<std::int32_t> token{0};
  Tensor logits = model.step(ctx, token, state);
  for (unsigned char c : prompt) {
    check(c != 0, "the prompt contains a NUL byte, which the model reads as a document boundary");
    token[0] = c;
    logits = model.step(ctx, token, state);
  }
  std::string out;
  const NoiseStream stream = noise_stream(seed, param_id("sample"), 0, 0, NoiseTag::init);
  std::vector<double> p(EggModel::kVocab);
  for (std::int64_t i = 0; i < n_bytes; ++i) {
    const std::int8_t* l = logits.data<std::int8_t>();
    std::int32_t next = 0;
    if (temperature == 0) {
      next = static_cast<std::int32_t>(std::max_element(l, l + EggModel::kVocab) - l);
    } else {
      double total = 0;
      for (std::int64_t t = 0; t < EggModel::kVocab; ++t) total += p[t] = std::exp2(l[t] / (16.0 * temperature));
      std::uint32_t bits = 0;
      fill_bits(stream, static_cast<std::uint64_t>(i), 1, &bits);
      double u = (bits + 0.5) * 0x1p-32 * total;
      while (next + 1 < EggModel::kVocab && u >= p[next]) u -= p[next++];
    }
    if (next == 0) break;
    out.push_back(static_cast<char>(next));
    token[0] = next;
    logits = model.step(ctx, token, state);
  }
  return out;
}

}  // namespace eggroll
