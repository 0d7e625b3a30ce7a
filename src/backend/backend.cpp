// Backend factory and the name tables of backend-level enums.
#include "eggroll/backend/backend.hpp"

#include "eggroll/core/error.hpp"
#include "eggroll/quant/qmath.hpp"

namespace eggroll {

std::unique_ptr<Backend> make_reference_backend();
std::unique_ptr<Backend> make_cpu_backend();

Activation activation_from_name(const std::string& name) {
  if (name == "none") return Activation::none;
  if (name == "relu") return Activation::relu;
  if (name == "tanh") return Activation::tanh;
  if (name == "gelu") return Activation::gelu;
  if (name == "silu") return Activation::silu;
  throw_error("unknown activation '", name, "': expected none, relu, tanh, gelu or silu");
}

std::string activation_name(Activation a) {
  switch (a) {
    case Activation::none: return "none";
    case Activation::relu: return "relu";
    case Activation::tanh: return "tanh";
    case Activation::gelu: return "gelu";
    case Activation::silu: return "silu";
  }
  return "?";
}

BackendKind backend_from_name(const std::string& name) {
  if (name == "reference") return BackendKind::reference;
  if (name == "cpu") return BackendKind::cpu;
  throw_error("unknown backend '", name, "': expected reference or cpu");
}

std::int64_t qmm_divisor(std::int64_t n) {
  check(n >= 1, "qmm_divisor: n = ", n, ", expected a matrix input width >= 1");
  return 16 * q::isqrt(n);
}

std::unique_ptr<Backend> make_backend(BackendKind kind) {
  switch (kind) {
    case BackendKind::reference: return make_reference_backend();
    case BackendKind::cpu: return make_cpu_backend();
  }
  throw_error("unknown backend kind");
}

}  // namespace eggroll
