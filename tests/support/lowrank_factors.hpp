// Random low-rank factor blocks for the backend op tests (test_backend_ops.cpp, test_fused_ops.cpp),
// in the layout of backend.hpp: B (n, r) then A (m, r) per block.
#pragma once
#include <cstdint>
#include <vector>

#include "eggroll/backend/backend.hpp"
#include "support/test_support.hpp"

namespace eggroll::testing {

// Low-rank factors for n_members members of an (m, n) matrix: member j uses block j, except
// that member zero_member (if >= 0) has coef 0 and (when null_block) no block at all.
struct Factors {
  std::int64_t m, n, r;
  std::vector<std::vector<float>> storage;
  std::vector<const float*> blocks;
  std::vector<float> coef;
  Factors(std::int64_t n_members, std::int64_t m, std::int64_t n, std::int64_t r, std::uint64_t seed,
          std::int64_t zero_member, bool null_block)
      : m(m), n(n), r(r) {
    for (std::int64_t j = 0; j < n_members; ++j) {
      storage.push_back(random_values(r * (n + m), seed + 100 + static_cast<std::uint64_t>(j)));
      blocks.push_back(storage.back().data());
      coef.push_back((j % 2 ? -1.0f : 1.0f) * (0.1f + 0.05f * static_cast<float>(j)));
    }
    if (zero_member >= 0) {
      coef[zero_member] = 0.0f;
      if (null_block) blocks[zero_member] = nullptr;
    }
  }
  LowRankFactors view() const { return {m, n, r, blocks.data(), coef.data()}; }
  // (A B^T)[a, b] of member j in double.
  double ab(std::int64_t j, std::int64_t a, std::int64_t b) const {
    const float* B = storage[j].data();
    const float* A = B + n * r;
    double s = 0.0;
    for (std::int64_t c = 0; c < r; ++c) s += static_cast<double>(A[a * r + c]) * B[b * r + c];
    return s;
  }
};

}  // namespace eggroll::testing
