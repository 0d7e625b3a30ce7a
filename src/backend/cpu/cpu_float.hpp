// The cpu backend's float kernels that have SIMD levels (the low-rank correction and the update),
// shared between cpu_backend.cpp and the level files (cpu_float_avx512.cpp, cpu_float_avx2.cpp).
// The base GEMM has its own file (cpu_sgemm.hpp).
//
// Determinism: every output element is summed in an order fixed by the shapes and the rows per
// member (a property of the task's forward), never by the members in a call, the row blocking or
// the thread count, so contracts 2 and 3 hold at each level; results differ between levels by
// rounding only.
#pragma once
#include <cstdint>

#include "backend/cpu/cpu_sgemm.hpp"
#include "eggroll/backend/backend.hpp"

namespace eggroll::cpu_float_avx512 {

// y[row] += coef_j (x[row] B_j) A_j^T for the rows of members [member_first, member_first + count)
// of the batch, as y = fma(s[c], A_j[:, c], y) for c in order with s = coef_j (x[row] B_j); runs on
// the calling thread. With base: y[j R + t] = base[t] + the correction instead (R rows per member;
// the same operations from base's values, so the same bits as a copy of base then the above).
void lowrank_correction(const MemberRows& batch, const LowRankFactors& f, const float* x, float* y,
                        std::int64_t member_first, std::int64_t count, const float* base = nullptr);

// y (rows, m) = x W^T + the correction above for every member of the batch, fused into the fp32
// GEMM's stores (cpu_sgemm.hpp; needs its avx512 level): the same bits as gemm_nt followed by
// lowrank_correction, with y written once. OpenMP inside when called outside a parallel region.
// With finish (may be null): the layer's epilogue (cpu_sgemm::RowFinish) in the same stores; with
// packed (may be null), W's cpu_sgemm::pack.
void perturbed_matmul(const MemberRows& batch, const LowRankFactors& f, const float* x, const float* w, float* y,
                      const cpu_sgemm::RowFinish* finish = nullptr, const PackedWeights* packed = nullptr);

// out (m, n) += sum over k (in order) and c (in order) of A_k[:, c] (weight[k] B_k[:, c])^T when
// n <= m, and of (weight[k] A_k[:, c]) B_k[:, c]^T when n > m: one fused multiply-add per (k, c)
// into each output element, the weight on the shorter side's factor. A GEMM of depth n_terms r
// over a packed panel of the shorter factor's weighted columns, the other factor's values
// broadcast from the blocks (when n > m, out^T is summed in each thread's scratch), OpenMP over
// blocks of output rows x columns (each thread packs the panel of its own columns).
void lowrank_update(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_terms,
                    const float* const* blocks, const double* weight, float* out);

}  // namespace eggroll::cpu_float_avx512

namespace eggroll::cpu_float_avx2 {

// lowrank_correction, perturbed_matmul and lowrank_update as above, at the AVX2 level (AVX2 and
// FMA; the fused forward in the AVX2 GEMM's stores; the update in 6 x 16 tiles).
void lowrank_correction(const MemberRows& batch, const LowRankFactors& f, const float* x, float* y,
                        std::int64_t member_first, std::int64_t count, const float* base = nullptr);
void perturbed_matmul(const MemberRows& batch, const LowRankFactors& f, const float* x, const float* w, float* y,
                      const cpu_sgemm::RowFinish* finish = nullptr, const PackedWeights* packed = nullptr);
void lowrank_update(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_terms,
                    const float* const* blocks, const double* weight, float* out);

}  // namespace eggroll::cpu_float_avx2
