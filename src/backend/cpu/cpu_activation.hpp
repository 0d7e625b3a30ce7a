// The cpu backend's float activations at the AVX2 and AVX-512 levels: tanh, gelu and silu through
// glibc's vector math library (libmvec: 8 or 16 values per call, within a few ulp of the scalar
// functions), relu as a max. The portable loop in cpu_backend.cpp serves the scalar level and
// builds without libmvec.
//
// Determinism: every value goes through the same vector call, the last partial vector masked
// (never a scalar tail), and libmvec computes each lane from its own value alone. So a value's
// result does not depend on where it lies in the array, the length or the threads' split
// (contract 2); it differs between levels by rounding only.
#pragma once
#include <cstdint>

#include "eggroll/backend/backend.hpp"

namespace eggroll::cpu_activation {

// Whether these kernels were built (libmvec found at configure time).
bool available();

// y[i] = a(x[i]) for i < n on the calling thread (x == y allowed). Need available() and the
// level's instructions.
void avx512(Activation a, std::int64_t n, const float* x, float* y);
void avx2(Activation a, std::int64_t n, const float* x, float* y);

}  // namespace eggroll::cpu_activation
