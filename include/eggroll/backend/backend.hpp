// Backend: the ops every forward pass and update is built from, with one implementation per
// backend (reference = scalar oracle, cpu = threads). Shapes are in comments as (rows, cols);
// all matrices are row-major. A matrix parameter W is (m, n) and is applied as y = x W^T.
//
// Factor blocks (ALGORITHM.md 1.6 layout): one pair's factors for an (m, n) matrix at rank r
// are r (n + m) contiguous floats, B (n, r) first, then A (m, r).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace eggroll {

enum class Activation { none, relu, tanh, gelu, silu };
Activation activation_from_name(const std::string& name);
std::string activation_name(Activation a);

// A batch of members, each owning rows_per_member consecutive rows of the activations.
struct MemberRows {
  std::int64_t n_members = 0;
  std::int64_t rows_per_member = 1;
  std::int64_t rows() const { return n_members * rows_per_member; }
};

// Per-member low-rank perturbation of one matrix: member j uses blocks[j] scaled by coef[j]
// (coef = s_j sigma / sqrt(r); 0 for an unperturbed member, whose block may be null).
struct LowRankFactors {
  std::int64_t m = 0, n = 0, rank = 1;
  const float* const* blocks = nullptr;  // (n_members) pointers to r (n + m) floats
  const float* coef = nullptr;           // (n_members)
  // Null: every block's values are present. Otherwise they may not be generated yet, and
  // (*fill)(first, count) generates those of members [first, first + count) of the call: a
  // backend calls ready() for the members it is about to read (any ranges, any number of times,
  // from any of its threads), so that a fused kernel can generate a block of rows' factors just
  // before its tiles read them, while they are in cache.
  const std::function<void(std::int64_t, std::int64_t)>* fill = nullptr;
  void ready(std::int64_t first, std::int64_t count) const {
    if (fill != nullptr && count > 0) (*fill)(first, count);
  }
};

// What a linear layer does to each row of its matmul's output (Backend::linear): y[row] =
// activation(y[row] + bias of the row's member), elementwise; bias null: no add; bias_stride 0:
// one bias vector for every row, else member j's at bias + j bias_stride.
struct RowEpilogue {
  const float* bias = nullptr;
  std::int64_t bias_stride = 0;
  Activation activation = Activation::none;
  bool empty() const { return bias == nullptr && activation == Activation::none; }
};

// Per-member low-rank int8 perturbation of one matrix (ALGORITHM.md 2.3): member j adds
// sign[j] * floor(((x B_j) A_j^T) / 2^shift) to its int32 accumulator; sign 0 (or a null block)
// means unperturbed. Blocks use the same layout as the float ones: B (n, r), then A (m, r).
struct QFactors {
  std::int64_t m = 0, n = 0, rank = 1;
  const std::int8_t* const* blocks = nullptr;  // (n_members) pointers to r (n + m) int8 values
  const std::int8_t* sign = nullptr;           // (n_members) +1, -1 or 0
  int shift = 0;                               // S = 4 + sigma_shift + k_r
};

// What a qmm adds to its output before storing it: the residual and bias adds of 2.4 fused into
// the matmul, y = clip(MM(x, W) + rows[row] + vec[member]) with the sum exact (as qadd). Either
// pointer may be null; none = plain qmm.
struct QAddend {
  const std::int8_t* rows = nullptr;  // (rows, m)
  const std::int8_t* vec = nullptr;   // (m) per member at row stride vec_stride (0 = one for all)
  std::int64_t vec_stride = 0;
  bool empty() const { return rows == nullptr && vec == nullptr; }
};

// A weight matrix in a backend's own layout for its qmm (Backend::qpack) or its float matmuls
// (Backend::pack), for callers that run many matmuls on unchanged weights (WeightPacks: a
// population view keeps one per matrix for its epoch).
class PackedWeights {
 public:
  virtual ~PackedWeights() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual void set_threads(int threads) {}
  // Forces a SIMD level ("auto", "avx512", "avx2", "scalar"; run.simd) for the kernels that have
  // levels (the cpu int8 kernels); a level the machine lacks is an error.
  virtual void set_simd(const std::string& level) {}

  // y (rows, m) = x (rows, n) W^T, W (m, n). Each row's result depends on that row alone.
  virtual void gemm_nt(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x,
                       const float* w, float* y) = 0;
  // y[row] += coef_j * (x[row] B_j) A_j^T for every row of member j.
  virtual void lowrank_correction(const MemberRows& batch, const LowRankFactors& f, const float* x,
                                  float* y) = 0;
  // The shared-input form: y[j R + t] = base[t] + the correction of row j R + t (R = rows per
  // member), every member's rows starting from the same R base rows (x W^T of an input that all
  // members share). Equals copying base into each member's rows, then lowrank_correction; a
  // backend may read base in place of the copy (the cpu backend does).
  virtual void lowrank_correction_onto(const MemberRows& batch, const LowRankFactors& f, const float* x,
                                       const float* base, float* y);
  // y (rows, m) = x W^T followed by lowrank_correction: the perturbed forward of a matrix. A backend
  // may fuse the two (the cpu backend does); the result equals the two calls in sequence.
  virtual void perturbed_matmul(const MemberRows& batch, const LowRankFactors& f, const float* x, const float* w,
                                float* y) {
    f.ready(0, batch.n_members);
    gemm_nt(batch.rows(), f.m, f.n, x, w, y);
    lowrank_correction(batch, f, x, y);
  }
  // A linear layer: y (rows, m) = x W^T, plus the low-rank correction when f is given (as
  // perturbed_matmul), then the epilogue e on every row (add_rows of e.bias, then activation). The
  // result equals those calls in sequence, which this default makes; a backend may instead apply
  // e in the GEMM's stores, while the values are in registers or cache (the cpu backend does).
  // packed (may be null) is this backend's pack(m, n, w) of the same, unchanged w: the matmul then
  // skips packing W; the result is the same.
  virtual void linear(const MemberRows& batch, std::int64_t m, std::int64_t n, const float* x, const float* w,
                      const LowRankFactors* f, const RowEpilogue& e, float* y, const PackedWeights* packed);
  // W (m, n) in the layout this backend's linear reads at its current SIMD level, or null when it
  // has none. The pack may be filled later, by the first linear calls that pass it (the cpu
  // backend's is: those calls pack W into it inside their own parallel regions, sharing the work
  // between all threads that arrive, and no later call packs again). The caller passes the same
  // w with it and must not change w while it uses the pack.
  virtual std::shared_ptr<const PackedWeights> pack(std::int64_t m, std::int64_t n, const float* w) {
    (void)m, (void)n, (void)w;
    return nullptr;
  }
  // The epilogue e alone on y (rows, m): add_rows of e.bias, then activation.
  void apply_epilogue(const MemberRows& batch, std::int64_t m, const RowEpilogue& e, float* y);
  // out (m, n) += weight[k] * A_k B_k^T for k = 0, 1, ..., n_terms - 1, added to out one term at a
  // time in k order (so splitting the terms over calls gives the same bits).
  virtual void lowrank_update(std::int64_t m, std::int64_t n, std::int64_t rank, std::int64_t n_terms,
                              const float* const* blocks, const double* weight, float* out) = 0;
  // y (rows, d) += v[member of row] where v is (n_members, d) with row stride v_stride (0 = shared).
  virtual void add_rows(const MemberRows& batch, std::int64_t d, const float* v, std::int64_t v_stride,
                        float* y) = 0;
  // y (rows, d) *= v[member of row], the same stride convention.
  virtual void mul_rows(const MemberRows& batch, std::int64_t d, const float* v, std::int64_t v_stride,
                        float* y) = 0;
  // y = (x - mean) / sqrt(var + eps) per row (no affine part).
  virtual void layer_norm(std::int64_t rows, std::int64_t d, const float* x, float eps, float* y) = 0;
  // y = x / (mean |x| + eps) per row (no affine part).
  virtual void l1_norm(std::int64_t rows, std::int64_t d, const float* x, float eps, float* y) = 0;
  // y[i] = a(x[i]); y may be x (in place).
  virtual void activation(Activation a, std::int64_t n, const float* x, float* y) = 0;
  // Softmax cross-entropy of rows of logits (rows, classes), in double: loss[row] = top +
  // log(sum_k exp(l_k - top)) - l_label, top the row's largest logit, and correct[row] = 1 where
  // the row's first largest logit is its label's and the loss is finite (0 otherwise). Row i's
  // label is labels[i % label_period] (a minibatch's labels, repeated for each member's rows);
  // a label outside [0, classes) is an error. This default is the scalar definition.
  virtual void cross_entropy(std::int64_t rows, std::int64_t classes, const float* logits, const std::int32_t* labels,
                             std::int64_t label_period, double* loss, std::uint8_t* correct);
  // y (rows, d): row of member j, position t = W[tokens[row]] + coef_j * A_j[tokens[row]] B_j^T,
  // with W (vocab, d) and factors for an (m = vocab, n = d) matrix.
  virtual void embedding(const MemberRows& batch, std::int64_t vocab, std::int64_t d, const std::int32_t* tokens,
                         const float* w, const LowRankFactors& f, float* y) = 0;

  // ---- int8 (ALGORITHM.md section 2): every division floors, clip() is to [-127, 127] ----

  // The scaled integer matmul MM of 2.1 with the perturbation of 2.3 (f.blocks may be null):
  // y (rows, m) = clip(floor(acc / D_n)), acc = x W^T (+ perturbation), D_n = 16 isqrt(n).
  // With an addend, y = clip(that + addend), as qadd(y, addend.rows, addend.vec) would give.
  // packed (may be null) is this backend's qpack(m, n, w) of the same, unchanged w: qmm then
  // skips packing W; the result is the same.
  virtual void qmm(const MemberRows& batch, std::int64_t m, std::int64_t n, const std::int8_t* x,
                   const std::int8_t* w, const QFactors& f, std::int8_t* y, const QAddend& add,
                   const PackedWeights* packed) = 0;
  void qmm(const MemberRows& batch, std::int64_t m, std::int64_t n, const std::int8_t* x, const std::int8_t* w,
           const QFactors& f, std::int8_t* y) {
    qmm(batch, m, n, x, w, f, y, QAddend{}, nullptr);
  }
  // W (m, n) in the layout this backend's qmm reads at its current SIMD level, or null when the
  // backend or level has none (qmm then packs W itself). The caller must not change w while it
  // passes the result to qmm.
  virtual std::shared_ptr<const PackedWeights> qpack(std::int64_t m, std::int64_t n, const std::int8_t* w) {
    return nullptr;
  }
  // Embedding rows: y[row] = clip(W[t] + sign_j floor((A_j[t] B_j^T) / 2^shift)), t = tokens[row].
  virtual void qembedding(const MemberRows& batch, std::int64_t vocab, std::int64_t d, const std::int32_t* tokens,
                          const std::int8_t* w, const QFactors& f, std::int8_t* y) = 0;
  // L1 norm of 2.4: mav = max(floor(sum |x| / d), 1), y = clip(floor(x * w / mav)), w per member
  // (row stride w_stride, 0 = shared).
  virtual void ql1_norm(const MemberRows& batch, std::int64_t d, const std::int8_t* x, const std::int8_t* w,
                        std::int64_t w_stride, std::int8_t* y) = 0;
  // y = clip(a + b + v[member]) elementwise over (rows, d); b and v may be null.
  virtual void qadd(const MemberRows& batch, std::int64_t d, const std::int8_t* a, const std::int8_t* b,
                    const std::int8_t* v, std::int64_t v_stride, std::int8_t* y) = 0;
  // GRU pieces of 2.4 over n values: g = floor((f + 127) h / 256);
  // h' = clip(h + floor((f + 127) (hh - h) / 256)).
  virtual void qgru_gate(std::int64_t n, const std::int8_t* f, const std::int8_t* h, std::int8_t* g) = 0;
  virtual void qgru_update(std::int64_t n, const std::int8_t* f, const std::int8_t* hh, std::int8_t* h) = 0;
  // qgru_update, then y = clip(x + h') over the same n values (the GRU block's residual add); a
  // backend may do both a chunk at a time, while the chunk is in cache. The same bits as the two
  // ops, which this default runs.
  virtual void qgru_update_add(std::int64_t n, const std::int8_t* f, const std::int8_t* hh, std::int8_t* h,
                               const std::int8_t* x, std::int8_t* y) {
    qgru_update(n, f, hh, h);
    qadd({1, 1}, n, x, h, nullptr, 0, y);
  }
  // Per-row log-likelihood of 2.5 in 1/16 bit: ll[row] = (logits[row][t] + 128) - LOG2(sum_u EXP2[l_u + 128]).
  virtual void qloglik(std::int64_t rows, const std::int8_t* logits, const std::int32_t* targets, std::int32_t* ll) = 0;
  // The discrete update's accumulator of 2.6 for one matrix: z (m, n) = sum_k d[k] A_k B_k^T over
  // k in [0, n_pairs) (int64, exact), blocks in the layout above.
  virtual void qupdate_accumulate(std::int64_t m, std::int64_t n, std::int64_t rank, std::int64_t n_pairs,
                                  const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z) = 0;
  // The discrete update's step of 2.6 over n values: w = clip(w + sign(z)) where z != 0 and
  // |z| >= threshold, w unchanged elsewhere; returns how many values changed (a move against the
  // clip changes nothing).
  virtual std::int64_t qapply_moves(std::int64_t n, const std::int64_t* z, std::int64_t threshold, std::int8_t* w) = 0;
  // Both for one matrix from zero: w = clip(w + sign(z)) where |z| >= threshold, z the sum
  // qupdate_accumulate would give from zero; returns how many values changed. By default those
  // two ops over a z of its own; a backend may apply the step where the sums are made, with no
  // z to write and read back.
  virtual std::int64_t qupdate_apply(std::int64_t m, std::int64_t n, std::int64_t rank, std::int64_t n_pairs,
                                     const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t threshold,
                                     std::int8_t* w);
};

// D_n of 2.1: 16 * floor(sqrt(n)).
std::int64_t qmm_divisor(std::int64_t n);

enum class BackendKind { reference, cpu };
std::unique_ptr<Backend> make_backend(BackendKind kind);
BackendKind backend_from_name(const std::string& name);

}  // namespace eggroll
