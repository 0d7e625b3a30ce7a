// The reference backend: plain scalar loops, written for obviousness. Every other backend is
// tested against it (tests/test_backend_ops.cpp). Sums run in index order.
#include <cmath>
#include <memory>
#include <vector>

#include "backend/elementwise_math.hpp"
#include "backend/int8_ops.hpp"
#include "eggroll/backend/backend.hpp"

namespace eggroll {
namespace {

class ReferenceBackend final : public Backend {
 public:
  std::string name() const override { return "reference"; }

  void gemm_nt(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w,
               float* y) override {
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t a = 0; a < m; ++a) {
        float acc = 0.0f;
        for (std::int64_t j = 0; j < n; ++j) acc += x[i * n + j] * w[a * n + j];
        y[i * m + a] = acc;
      }
  }

  void lowrank_correction(const MemberRows& batch, const LowRankFactors& f, const float* x,
                          float* y) override {
    const std::int64_t m = f.m, n = f.n, r = f.rank;
    std::vector<float> xb(r);
    for (std::int64_t j = 0; j < batch.n_members; ++j) {
      if (f.coef[j] == 0.0f) continue;
      const float* B = f.blocks[j];
      const float* A = B + n * r;
      for (std::int64_t t = 0; t < batch.rows_per_member; ++t) {
        std::int64_t row = j * batch.rows_per_member + t;
        for (std::int64_t c = 0; c < r; ++c) {
          float acc = 0.0f;
          for (std::int64_t k = 0; k < n; ++k) acc += x[row * n + k] * B[k * r + c];
          xb[c] = acc;
        }
        for (std::int64_t a = 0; a < m; ++a) {
          float acc = 0.0f;
          for (std::int64_t c = 0; c < r; ++c) acc += xb[c] * A[a * r + c];
          y[row * m + a] += f.coef[j] * acc;
        }
      }
    }
  }

  void lowrank_update(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_terms,
                      const float* const* blocks, const double* weight, float* out) override {
    for (std::int64_t a = 0; a < m; ++a)
      for (std::int64_t b = 0; b < n; ++b) {
        float acc = out[a * n + b];
        for (std::int64_t k = 0; k < n_terms; ++k) {
          const float* B = blocks[k];
          const float* A = B + n * r;
          float ab = 0.0f;
          for (std::int64_t c = 0; c < r; ++c) ab += A[a * r + c] * B[b * r + c];
          acc += static_cast<float>(weight[k]) * ab;
        }
        out[a * n + b] = acc;
      }
  }

  void add_rows(const MemberRows& batch, std::int64_t d, const float* v, std::int64_t v_stride,
                float* y) override {
    for (std::int64_t row = 0; row < batch.rows(); ++row) {
      const float* vr = v + (row / batch.rows_per_member) * v_stride;
      for (std::int64_t k = 0; k < d; ++k) y[row * d + k] += vr[k];
    }
  }

  void mul_rows(const MemberRows& batch, std::int64_t d, const float* v, std::int64_t v_stride,
                float* y) override {
    for (std::int64_t row = 0; row < batch.rows(); ++row) {
      const float* vr = v + (row / batch.rows_per_member) * v_stride;
      for (std::int64_t k = 0; k < d; ++k) y[row * d + k] *= vr[k];
    }
  }

  void layer_norm(std::int64_t rows, std::int64_t d, const float* x, float eps, float* y) override {
    for (std::int64_t i = 0; i < rows; ++i) detail::layer_norm_row(d, x + i * d, eps, y + i * d);
  }

  void l1_norm(std::int64_t rows, std::int64_t d, const float* x, float eps, float* y) override {
    for (std::int64_t i = 0; i < rows; ++i) detail::l1_norm_row(d, x + i * d, eps, y + i * d);
  }

  void activation(Activation a, std::int64_t n, const float* x, float* y) override {
    for (std::int64_t i = 0; i < n; ++i) y[i] = detail::apply_activation(a, x[i]);
  }

  void embedding(const MemberRows& batch, std::int64_t vocab, std::int64_t d, const std::int32_t* tokens,
                 const float* w, const LowRankFactors& f, float* y) override {
    const std::int64_t r = f.rank;
    for (std::int64_t row = 0; row < batch.rows(); ++row) {
      std::int64_t j = row / batch.rows_per_member, t = tokens[row];
      for (std::int64_t k = 0; k < d; ++k) y[row * d + k] = w[t * d + k];
      if (!f.blocks || f.coef[j] == 0.0f) continue;
      const float* B = f.blocks[j];
      const float* A = B + d * r;
      for (std::int64_t k = 0; k < d; ++k) {
        float acc = 0.0f;
        for (std::int64_t c = 0; c < r; ++c) acc += A[t * r + c] * B[k * r + c];
        y[row * d + k] += f.coef[j] * acc;
      }
    }
  }

  using Backend::qmm;
  void qmm(const MemberRows& batch, std::int64_t m, std::int64_t n, const std::int8_t* x, const std::int8_t* w,
           const QFactors& f, std::int8_t* y, const QAddend& add, const PackedWeights*) override {
    reference_int8::qmm(batch, m, n, x, w, f, y, add);
  }
  void qembedding(const MemberRows& batch, std::int64_t vocab, std::int64_t d, const std::int32_t* tokens,
                  const std::int8_t* w, const QFactors& f, std::int8_t* y) override {
    reference_int8::qembedding(batch, vocab, d, tokens, w, f, y);
  }
  void ql1_norm(const MemberRows& batch, std::int64_t d, const std::int8_t* x, const std::int8_t* w,
                std::int64_t w_stride, std::int8_t* y) override { reference_int8::ql1_norm(batch, d, x, w, w_stride, y); }
  void qadd(const MemberRows& batch, std::int64_t d, const std::int8_t* a, const std::int8_t* b, const std::int8_t* v,
            std::int64_t v_stride, std::int8_t* y) override { reference_int8::qadd(batch, d, a, b, v, v_stride, y); }
  void qgru_gate(std::int64_t n, const std::int8_t* f, const std::int8_t* h, std::int8_t* g) override {
    reference_int8::qgru_gate(n, f, h, g);
  }
  void qgru_update(std::int64_t n, const std::int8_t* f, const std::int8_t* hh, std::int8_t* h) override {
    reference_int8::qgru_update(n, f, hh, h);
  }
  void qloglik(std::int64_t rows, const std::int8_t* logits, const std::int32_t* targets, std::int32_t* ll) override {
    reference_int8::qloglik(rows, logits, targets, ll);
  }
  void qupdate_accumulate(std::int64_t m, std::int64_t n, std::int64_t rank, std::int64_t n_pairs,
                          const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z) override {
    reference_int8::qupdate_accumulate(m, n, rank, n_pairs, blocks, d, z);
  }
  std::int64_t qapply_moves(std::int64_t n, const std::int64_t* z, std::int64_t threshold, std::int8_t* w) override {
    return reference_int8::qapply_moves(n, z, threshold, w);
  }
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace eggroll
