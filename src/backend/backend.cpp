// Backend factory and the name tables of backend-level enums.
#include "eggroll/backend/backend.hpp"

#include <algorithm>
#include <memory>

#include "backend/elementwise_math.hpp"
#include "eggroll/core/error.hpp"
#include "eggroll/quant/qmath.hpp"

namespace eggroll {

std::unique_ptr<Backend> make_reference_backend();
std::unique_ptr<Backend> make_cpu_backend();

namespace detail {
void check_cross_entropy(std::int64_t rows, std::int64_t classes, const std::int32_t* labels,
                         std::int64_t label_period) {
  check(classes >= 1 && label_period >= 1, "cross_entropy: ", classes, " classes and a label period of ",
        label_period, ", expected both >= 1");
  for (std::int64_t i = 0; i < std::min(rows, label_period); ++i)
    check(labels[i] >= 0 && labels[i] < classes, "cross_entropy: label ", labels[i], " at row ", i, ", expected 0 .. ",
          classes - 1);
}
}  // namespace detail

void Backend::lowrank_correction_onto(const MemberRows& batch, const LowRankFactors& f, const float* x,
                                      const float* base, float* y) {
  const std::int64_t rows = batch.rows_per_member * f.m;
  for (std::int64_t j = 0; j < batch.n_members; ++j) std::copy_n(base, rows, y + j * rows);
  lowrank_correction(batch, f, x, y);
}

void Backend::linear(const MemberRows& batch, std::int64_t m, std::int64_t n, const float* x, const float* w,
                     const LowRankFactors* f, const RowEpilogue& e, float* y, const PackedWeights*) {
  if (f != nullptr)
    perturbed_matmul(batch, *f, x, w, y);
  else
    gemm_nt(batch.rows(), m, n, x, w, y);
  apply_epilogue(batch, m, e, y);
}

void Backend::apply_epilogue(const MemberRows& batch, std::int64_t m, const RowEpilogue& e, float* y) {
  if (e.bias != nullptr) add_rows(batch, m, e.bias, e.bias_stride, y);
  if (e.activation != Activation::none) activation(e.activation, batch.rows() * m, y, y);
}

void Backend::cross_entropy(std::int64_t rows, std::int64_t classes, const float* logits, const std::int32_t* labels,
                            std::int64_t label_period, double* loss, std::uint8_t* correct) {
  detail::check_cross_entropy(rows, classes, labels, label_period);
  for (std::int64_t i = 0; i < rows; ++i)
    detail::cross_entropy_row(classes, logits + i * classes, labels[i % label_period], loss + i, correct + i);
}

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

std::int64_t Backend::qupdate_apply(std::int64_t m, std::int64_t n, std::int64_t rank, std::int64_t n_pairs,
                                    const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t threshold,
                                    std::int8_t* w) {
  const auto z = std::make_unique<std::int64_t[]>(static_cast<std::size_t>(m * n));  // zeroed
  qupdate_accumulate(m, n, rank, n_pairs, blocks, d, z.get());
  return qapply_moves(m * n, z.get(), threshold, w);
}

}  // namespace eggroll
