// Scalar element and row functions shared by every CPU-side backend (so they agree bit for bit).
#pragma once
#include <cmath>
#include <cstdint>

#include "eggroll/backend/backend.hpp"

namespace eggroll::detail {

// One row of Backend::cross_entropy: the first largest logit, then the sum of exp(l_k - top) in
// class order, in double.
inline void cross_entropy_row(std::int64_t classes, const float* l, std::int32_t label, double* loss,
                              std::uint8_t* correct) {
  std::int64_t best = 0;
  for (std::int64_t k = 1; k < classes; ++k)
    if (l[k] > l[best]) best = k;
  const double top = l[best];
  double sum = 0.0;
  for (std::int64_t k = 0; k < classes; ++k) sum += std::exp(static_cast<double>(l[k]) - top);
  *loss = top + std::log(sum) - l[label];
  *correct = best == label && std::isfinite(*loss);  // non-finite logits never count as correct
}

// Backend::cross_entropy's arguments: classes >= 1, label_period >= 1 and every label in range.
void check_cross_entropy(std::int64_t rows, std::int64_t classes, const std::int32_t* labels,
                         std::int64_t label_period);

inline float apply_activation(Activation a, float v) {
  switch (a) {
    case Activation::none: return v;
    case Activation::relu: return v > 0.0f ? v : 0.0f;
    case Activation::tanh: return std::tanh(v);
    case Activation::gelu: return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
    case Activation::silu: return v / (1.0f + std::exp(-v));
  }
  return v;
}

// y = (x - mean) / sqrt(var + eps) over one row of d values.
inline void layer_norm_row(std::int64_t d, const float* x, float eps, float* y) {
  float mean = 0.0f, var = 0.0f;
  for (std::int64_t k = 0; k < d; ++k) mean += x[k];
  mean /= static_cast<float>(d);
  for (std::int64_t k = 0; k < d; ++k) var += (x[k] - mean) * (x[k] - mean);
  var /= static_cast<float>(d);
  const float inv = 1.0f / std::sqrt(var + eps);
  for (std::int64_t k = 0; k < d; ++k) y[k] = (x[k] - mean) * inv;
}

// y = x / (mean |x| + eps) over one row of d values.
inline void l1_norm_row(std::int64_t d, const float* x, float eps, float* y) {
  float s = 0.0f;
  for (std::int64_t k = 0; k < d; ++k) s += std::fabs(x[k]);
  const float inv = 1.0f / (s / static_cast<float>(d) + eps);
  for (std::int64_t k = 0; k < d; ++k) y[k] = x[k] * inv;
}

}  // namespace eggroll::detail
