// The built-in models (mlp, matrix), their config schemas and the factory.
#include <cmath>

#include "eggroll/model/egg.hpp"
#include "eggroll/model/model.hpp"
#include "eggroll/noise/noise.hpp"

namespace eggroll {

Tensor normal_init(std::uint64_t seed, const std::string& name, Shape shape, double std) {
  Tensor t(DType::f32, std::move(shape));
  NoiseStream s = noise_stream(seed, param_id(name), 0, 0, NoiseTag::init);
  fill_normal(s, 0, static_cast<std::uint64_t>(t.numel()), t.data<float>());
  float* v = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) v[i] = static_cast<float>(v[i] * std);
  return t;
}

Mlp::Mlp(const MlpSpec& spec, std::uint64_t seed) : spec_(spec) {
  check(spec.input_dim >= 1 && spec.output_dim >= 1, "mlp: input and output sizes must be >= 1, got ",
        spec.input_dim, " and ", spec.output_dim);
  std::vector<std::int64_t> dims{spec.input_dim};
  dims.insert(dims.end(), spec.hidden.begin(), spec.hidden.end());
  dims.push_back(spec.output_dim);
  n_layers_ = dims.size() - 1;
  for (std::size_t l = 0; l < n_layers_; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const double std = spec.init_scale / std::sqrt(static_cast<double>(dims[l]));
    params_.add(p + "weight", ParamKind::matrix, normal_init(seed, p + "weight", {dims[l + 1], dims[l]}, std));
    if (spec.bias) params_.add(p + "bias", ParamKind::vector, Tensor(DType::f32, {dims[l + 1]}));
    if (l + 1 < n_layers_ && spec.norm != "none") {
      Tensor ones(DType::f32, {dims[l + 1]});
      for (std::int64_t k = 0; k < dims[l + 1]; ++k) ones.data<float>()[k] = 1.0f;
      params_.add(p + "norm.weight", ParamKind::vector, std::move(ones));
    }
  }
}

Tensor Mlp::forward(ForwardContext& ctx, const Tensor& x) {
  ForwardContext rows = ctx;  // after the first layer every member has its own rows
  rows.shared_input = false;
  Tensor h;
  for (std::size_t l = 0; l < n_layers_; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const bool last = l + 1 == n_layers_;
    // an activation right after the linear layer (no norm between) is applied by it, as it stores
    const Activation after =
        last ? spec_.output_activation : (spec_.norm == "none" ? spec_.activation : Activation::none);
    h = linear(l == 0 ? ctx : rows, params_.at(p + "weight"), params_.find(p + "bias"), l == 0 ? x : h, after);
    if (last) break;
    if (spec_.norm == "none") continue;
    if (spec_.norm == "layer") h = layer_norm(rows, h, params_.find(p + "norm.weight"), nullptr);
    if (spec_.norm == "l1") h = l1_norm(rows, h, params_.find(p + "norm.weight"));
    h = activation(rows, spec_.activation, std::move(h));
  }
  return h;
}

MatrixModel::MatrixModel(std::int64_t m, std::int64_t n, double init_std, std::uint64_t seed) {
  params_.add("solution", ParamKind::matrix, normal_init(seed, "solution", {m, n}, init_std));
}

Tensor MatrixModel::forward(ForwardContext& ctx, const Tensor& x) {
  return linear(ctx, params_.at("solution"), nullptr, x);
}

void register_model_kinds() {
  static const bool done = [] {
    register_kind_schema({"model", "mlp", {
        {"hidden", std::vector<std::int64_t>{32, 32}, "hidden layer widths", 1.0, 1e6, {}},
        {"activation", std::string("tanh"), "hidden activation", {}, {}, {"relu", "tanh", "gelu", "silu"}},
        {"output_activation", std::string("none"), "output activation", {}, {}, {"none", "relu", "tanh", "gelu", "silu"}},
        {"norm", std::string("none"), "normalisation before each hidden activation", {}, {}, {"none", "layer", "l1"}},
        {"bias", true, "add a bias to every linear layer", {}, {}, {}},
        {"init_scale", 1.0, "weights ~ N(0, init_scale^2 / fan_in)", 0.0, 100.0, {}},
    }});
    register_kind_schema({"model", "egg", {
        {"width", std::int64_t{256}, "model width d", 1.0, 1e6, {}},
        {"layers", std::int64_t{6}, "blocks (GRU + MLP)", 1.0, 64.0, {}},
        {"mlp_ratio", std::int64_t{4}, "MLP hidden width / d", 1.0, 64.0, {}},
    }});
    register_kind_schema({"model", "matrix", {
        {"init_std", 1.0, "initial entries ~ N(0, init_std^2)", 0.0, 1e6, {}},
    }});
    return true;
  }();
  (void)done;
}

std::unique_ptr<Model> make_model(const KindTable& model, std::int64_t input_dim, std::int64_t output_dim,
                                  std::uint64_t seed) {
  if (model.kind == "mlp") {
    MlpSpec spec;
    spec.input_dim = input_dim;
    spec.output_dim = output_dim;
    spec.hidden = model.get_ints("hidden");
    spec.activation = activation_from_name(model.get_string("activation"));
    spec.output_activation = activation_from_name(model.get_string("output_activation"));
    spec.norm = model.get_string("norm");
    spec.bias = model.get_bool("bias");
    spec.init_scale = model.get_double("init_scale");
    return std::make_unique<Mlp>(spec, seed);
  }
  if (model.kind == "egg")
    return std::make_unique<EggModel>(EggSpec{model.get_int("width"), model.get_int("layers"), model.get_int("mlp_ratio")},
                                      seed);
  if (model.kind == "matrix") return std::make_unique<MatrixModel>(output_dim, input_dim, model.get_double("init_std"), seed);
  throw_error("model.kind = \"", model.kind, "\": expected mlp, matrix or egg");
}

}  // namespace eggroll
