// Scalar element functions shared by every CPU-side backend (so they agree bit for bit).
#pragma once
#include <cmath>

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

}  // namespace eggroll::detail
