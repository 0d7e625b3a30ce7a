// The cpu backend's float ops that need exp, log, tanh or erf, at the AVX2 and AVX-512 levels,
// through glibc's vector math library (libmvec: 8 or 16 floats, 4 or 8 doubles per call, within
// a few ulp of the scalar functions): the activations tanh, gelu and silu (relu as a max), and
// the softmax cross-entropy of rows of logits. The portable loops in cpu_backend.cpp serve the
// scalar level and builds without libmvec.
//
// Determinism: every value (or row) goes through the same vector calls, the last partial vector
// masked (never a scalar tail), and libmvec computes each lane from its own value alone. So a
// result does not depend on where its value or row lies, the length or the threads' split
// (contract 2); it differs between levels by rounding only.
#pragma once
#include <cstdint>

#include "eggroll/backend/backend.hpp"

namespace eggroll::cpu_vecmath {

// Whether these kernels were built (libmvec found at configure time).
bool available();

// y[i] = a(x[i]) for i < n on the calling thread (x == y allowed). Need available() and the
// level's instructions.
void activation_avx512(Activation a, std::int64_t n, const float* x, float* y);
void activation_avx2(Activation a, std::int64_t n, const float* x, float* y);

// Backend::cross_entropy for rows [begin, end) on the calling thread, 8 rows at a time (labels
// checked by the caller).
void cross_entropy_avx512(std::int64_t begin, std::int64_t end, std::int64_t classes, const float* logits,
                          const std::int32_t* labels, std::int64_t label_period, double* loss, std::uint8_t* correct);

}  // namespace eggroll::cpu_vecmath
