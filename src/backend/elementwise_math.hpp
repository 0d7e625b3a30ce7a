// Scalar element and row functions shared by every CPU-side backend (so they agree bit for bit).
#pragma once
#include <cmath>
#include <cstdint>

#include "eggroll/backend/backend.hpp"

namespace eggroll::detail {

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
