// Models: a ParamStore plus a batched forward. Built from the [model] config table by kind:
//   mlp     Linear layers with hidden sizes, activation, optional norm and biases
//   matrix  one matrix parameter "solution" (m, n), forward x -> x W^T (function tasks)
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "eggroll/io/config.hpp"
#include "eggroll/model/layers.hpp"
#include "eggroll/model/params.hpp"

namespace eggroll {

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string kind() const = 0;
  virtual std::int64_t input_dim() const = 0;
  virtual std::int64_t output_dim() const = 0;
  // x (rows, input_dim) -> (rows, output_dim).
  virtual Tensor forward(ForwardContext& ctx, const Tensor& x) = 0;
  // Whether forward takes ctx.shared_input (x = the rows_per_member rows every member reads).
  virtual bool accepts_shared_input() const { return false; }
  ParamStore& params() { return params_; }
  const ParamStore& params() const { return params_; }

 protected:
  ParamStore params_;
};

// Normal(0, std^2) initial values from the generator (tag init), a pure function of (seed, name).
Tensor normal_init(std::uint64_t seed, const std::string& name, Shape shape, double std);

struct MlpSpec {
  std::int64_t input_dim = 1, output_dim = 1;
  std::vector<std::int64_t> hidden;     // hidden layer widths
  Activation activation = Activation::tanh;
  Activation output_activation = Activation::none;
  std::string norm = "none";            // none | layer | l1 (before each hidden activation)
  bool bias = true;
  double init_scale = 1.0;              // weights ~ N(0, init_scale^2 / fan_in)
};

class Mlp final : public Model {
 public:
  Mlp(const MlpSpec& spec, std::uint64_t seed);
  std::string kind() const override { return "mlp"; }
  std::int64_t input_dim() const override { return spec_.input_dim; }
  std::int64_t output_dim() const override { return spec_.output_dim; }
  Tensor forward(ForwardContext& ctx, const Tensor& x) override;
  bool accepts_shared_input() const override { return true; }

 private:
  MlpSpec spec_;
  std::size_t n_layers_ = 0;
};

class MatrixModel final : public Model {
 public:
  MatrixModel(std::int64_t m, std::int64_t n, double init_std, std::uint64_t seed);
  std::string kind() const override { return "matrix"; }
  std::int64_t input_dim() const override { return params_.at("solution").cols(); }
  std::int64_t output_dim() const override { return params_.at("solution").rows(); }
  Tensor forward(ForwardContext& ctx, const Tensor& x) override;
  bool accepts_shared_input() const override { return true; }
};

// Registers the config schemas of the model kinds (idempotent).
void register_model_kinds();
std::unique_ptr<Model> make_model(const KindTable& model, std::int64_t input_dim, std::int64_t output_dim,
                                  std::uint64_t seed);

}  // namespace eggroll
