// The cpu backend: OpenMP threads over rows (or output rows for the update), inner loops
// written so the compiler vectorises across outputs. Every output element is summed in the
// same order as the reference, so results do not depend on the thread count or on the
// number of rows (DESIGN.md contract 2). The base GEMM is cpu_sgemm.hpp; the int8 kernels are
// cpu_int8*.cpp; the float low-rank kernels with SIMD levels are cpu_float*.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_vecmath.hpp"
#include "backend/cpu/cpu_float.hpp"
#include "backend/cpu/cpu_parallel.hpp"
#include "backend/cpu/cpu_sgemm.hpp"
#include "backend/elementwise_math.hpp"
#include "backend/int8_ops.hpp"
#include "eggroll/backend/backend.hpp"
#include "noise/noise_simd.hpp"

namespace eggroll {
namespace {

// The float kernels with SIMD levels follow the level of the int8 kernels (run.simd): AVX-512
// where the int8 level is avx512_vnni or avx512_amx, AVX2 where the fp32 GEMM's level has AVX2, the portable
// loops below otherwise.
// Below this many elements an elementwise op runs on the calling thread (starting a team costs
// more; results never depend on it).
constexpr std::int64_t kParallelMinElements = std::int64_t{1} << 15;

bool float_avx512() {
  const std::string level = cpu_int8::level();
  return level == "avx512_vnni" || level == "avx512_amx";
}
// The AVX2 float kernels serve below that where the GEMM runs at avx2 or above (AVX2 and FMA).
bool float_avx2() {
  const std::string gemm = cpu_sgemm::level();
  return !float_avx512() && (gemm == "avx2" || gemm == "avx512");
}

// y[i] = a(x[i]) for i < n by the portable definition (the scalar level, builds without libmvec).
void activation_portable(Activation a, std::int64_t n, const float* x, float* y) {
  if (a == Activation::relu) {  // branch-free loop the compiler vectorises (the same values)
    for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) y[i] = detail::apply_activation(a, x[i]);
}

// The kernel Backend::activation runs on each stretch of values, on the calling thread: libmvec's
// at the float kernels' vector level, the portable loops otherwise. The GEMM's epilogue
// (cpu_sgemm::RowFinish) runs the same one, so both give the same bits.
void (*activation_kernel())(Activation, std::int64_t, const float*, float*) {
  const std::string level = cpu_sgemm::level();
  if (cpu_vecmath::available() && (level == "avx512" || level == "avx2"))
    // the AVX-512 file is built for the level of float_avx512 (DQ included)
    return float_avx512() ? cpu_vecmath::activation_avx512 : cpu_vecmath::activation_avx2;
  return activation_portable;
}

// op(y[row][k], v[member][k]) for every row: contiguous shares of rows, each walked as runs of
// one member's rows (a division per run, not per row; the inner loops over k vectorise).
template <class Op>
void by_member_runs(const MemberRows& batch, std::int64_t d, const float* v, std::int64_t v_stride, float* y, Op op) {
  const std::int64_t rows = batch.rows(), per = batch.rows_per_member;
  cpu_parallel::team(rows * d >= kParallelMinElements, [&](std::int64_t t, std::int64_t nt) {
    const auto [first, last] = cpu_parallel::share(rows, t, nt);
    for (std::int64_t row = first; row < last;) {
      const std::int64_t j = row / per, end = std::min(last, (j + 1) * per);
      const float* vr = v + j * v_stride;
      for (; row < end; ++row) {
        float* yr = y + row * d;
        for (std::int64_t k = 0; k < d; ++k) op(yr[k], vr[k]);
      }
    }
  });
}

class CpuBackend final : public Backend {
 public:
  // Kernels called inside a parallel region (for_member_blocks) run on their thread alone.
  CpuBackend() { omp_set_max_active_levels(1); }
  std::string name() const override { return "cpu"; }
  // Every family follows run.simd. The fp32 GEMM and the noise fills give the same bits at every
  // level; the int8 kernels too; the other float kernels differ between levels by rounding only.
  void set_simd(const std::string& level) override {
    cpu_int8::set_level(level.c_str());
    // the int8 kernels' own names for their AVX-512 levels are the other families' avx512
    const bool int8_name = level == "avx512_vnni" || level == "avx512_amx";
    cpu_sgemm::set_level(int8_name ? "avx512" : level.c_str());
    set_noise_simd(int8_name ? "avx512" : level.c_str());
  }
  void set_threads(int threads) override {
    if (threads > 0) omp_set_num_threads(threads);
  }

  void gemm_nt(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w,
               float* y) override {
    cpu_sgemm::gemm_nt(rows, m, n, x, w, y);
  }

  void perturbed_matmul(const MemberRows& batch, const LowRankFactors& f, const float* x, const float* w,
                        float* y) override {
    // Fused at the AVX-512 and AVX2 levels (the same bits as the two kernels in sequence).
    if (float_avx512() && std::string(cpu_sgemm::level()) == "avx512")
      return cpu_float_avx512::perturbed_matmul(batch, f, x, w, y);
    if (float_avx2()) return cpu_float_avx2::perturbed_matmul(batch, f, x, w, y);
    f.ready(0, batch.n_members);
    gemm_nt(batch.rows(), f.m, f.n, x, w, y);
    lowrank_correction(batch, f, x, y);
  }

  // The layer's epilogue in the GEMM's stores (cpu_sgemm::RowFinish) and W's pack at its vector
  // levels, with or without the fused correction; the ops in sequence elsewhere.
  void linear(const MemberRows& batch, std::int64_t m, std::int64_t n, const float* x, const float* w,
              const LowRankFactors* f, const RowEpilogue& e, float* y, const PackedWeights* packed) override {
    const std::string level = cpu_sgemm::level();
    const bool fused_correction = float_avx512() ? level == "avx512" : float_avx2();
    if ((level != "avx512" && level != "avx2") || (f != nullptr && !fused_correction))
      return Backend::linear(batch, m, n, x, w, f, e, y, packed);
    cpu_sgemm::RowFinish finish;
    finish.bias = e.bias;
    finish.bias_stride = e.bias_stride;
    finish.rows_per_member = batch.rows_per_member;
    finish.relu = e.activation == Activation::relu;
    if (e.activation != Activation::none && !finish.relu) {
      finish.activation = e.activation;
      finish.kernel = activation_kernel();
    }
    const cpu_sgemm::RowFinish* fin = e.empty() ? nullptr : &finish;
    if (f == nullptr) return cpu_sgemm::gemm_nt(batch.rows(), m, n, x, w, y, fin, packed);
    if (float_avx512()) return cpu_float_avx512::perturbed_matmul(batch, *f, x, w, y, fin, packed);
    cpu_float_avx2::perturbed_matmul(batch, *f, x, w, y, fin, packed);
  }

  // The fp32 GEMM's panels at its level (none at the scalar level), filled by the first calls
  // that read them (cpu_sgemm::PackedPanels).
  std::shared_ptr<const PackedWeights> pack(std::int64_t m, std::int64_t n, const float*) override {
    return cpu_sgemm::pack(m, n);
  }

  void lowrank_correction(const MemberRows& batch, const LowRankFactors& f, const float* x,
                          float* y) override {
    if (float_avx512() || float_avx2()) return correction_simd(batch, f, x, nullptr, y);
    const std::int64_t m = f.m, n = f.n, r = f.rank;
    const bool big = batch.rows() * r * (m + n) >= kParallelMinElements;
    cpu_parallel::team(big, [&](std::int64_t t, std::int64_t nt) {
      std::vector<float> xb(static_cast<std::size_t>(r));
      const auto [first, last] = cpu_parallel::share(batch.rows(), t, nt);
      for (std::int64_t row = first; row < last; ++row) {
        std::int64_t j = row / batch.rows_per_member;
        if (f.coef[j] == 0.0f) continue;
        const float* B = f.blocks[j];
        const float* A = B + n * r;
        for (std::int64_t c = 0; c < r; ++c) {
          float acc = 0.0f;
          for (std::int64_t k = 0; k < n; ++k) acc += x[row * n + k] * B[k * r + c];
          xb[c] = acc;
        }
        float* yr = y + row * m;
        for (std::int64_t a = 0; a < m; ++a) {
          float acc = 0.0f;
          for (std::int64_t c = 0; c < r; ++c) acc += xb[c] * A[a * r + c];
          yr[a] += f.coef[j] * acc;
        }
      }
    });
  }

  void lowrank_correction_onto(const MemberRows& batch, const LowRankFactors& f, const float* x, const float* base,
                               float* y) override {
    if (!float_avx512() && !float_avx2()) return Backend::lowrank_correction_onto(batch, f, x, base, y);
    correction_simd(batch, f, x, base, y);
  }

  void lowrank_update(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_terms,
                      const float* const* blocks, const double* weight, float* out) override {
    if (float_avx512()) return cpu_float_avx512::lowrank_update(m, n, r, n_terms, blocks, weight, out);
    if (float_avx2()) return cpu_float_avx2::lowrank_update(m, n, r, n_terms, blocks, weight, out);
    // Bt (n_terms, r, n): each B_k transposed so the inner loop runs over contiguous outputs.
    std::vector<float> bt(static_cast<std::size_t>(n_terms * r * n));
#pragma omp parallel for schedule(static)
    for (std::int64_t k = 0; k < n_terms; ++k)
      for (std::int64_t b = 0; b < n; ++b)
        for (std::int64_t c = 0; c < r; ++c) bt[(k * r + c) * n + b] = blocks[k][b * r + c];
#pragma omp parallel
    {
      std::vector<float> ab(static_cast<std::size_t>(n));
#pragma omp for schedule(static)
      for (std::int64_t a = 0; a < m; ++a) {
        float* o = out + a * n;
        for (std::int64_t k = 0; k < n_terms; ++k) {
          const float* A = blocks[k] + n * r;
          for (std::int64_t b = 0; b < n; ++b) ab[b] = 0.0f;
          for (std::int64_t c = 0; c < r; ++c) {
            const float av = A[a * r + c];
            const float* btc = bt.data() + (k * r + c) * n;
            for (std::int64_t b = 0; b < n; ++b) ab[b] += av * btc[b];
          }
          const float wk = static_cast<float>(weight[k]);
          for (std::int64_t b = 0; b < n; ++b) o[b] += wk * ab[b];
        }
      }
    }
  }

  void add_rows(const MemberRows& batch, std::int64_t d, const float* v, std::int64_t v_stride,
                float* y) override {
    by_member_runs(batch, d, v, v_stride, y, [](float& a, float b) { a += b; });
  }

  void mul_rows(const MemberRows& batch, std::int64_t d, const float* v, std::int64_t v_stride,
                float* y) override {
    by_member_runs(batch, d, v, v_stride, y, [](float& a, float b) { a *= b; });
  }

  void layer_norm(std::int64_t rows, std::int64_t d, const float* x, float eps, float* y) override {
    cpu_parallel::for_each(rows, rows * d >= kParallelMinElements,
                           [&](std::int64_t i) { detail::layer_norm_row(d, x + i * d, eps, y + i * d); });
  }

  void l1_norm(std::int64_t rows, std::int64_t d, const float* x, float eps, float* y) override {
    cpu_parallel::for_each(rows, rows * d >= kParallelMinElements,
                           [&](std::int64_t i) { detail::l1_norm_row(d, x + i * d, eps, y + i * d); });
  }

  void activation(Activation a, std::int64_t n, const float* x, float* y) override {
    // blocks of whole vectors, so that each thread's part but the last has no masked tail
    // (results do not depend on the split either way: cpu_vecmath.hpp)
    const auto kernel = activation_kernel();
    constexpr std::int64_t kBlock = 4096;
    cpu_parallel::for_each((n + kBlock - 1) / kBlock, n >= kParallelMinElements, [&](std::int64_t b) {
      kernel(a, std::min(kBlock, n - b * kBlock), x + b * kBlock, y + b * kBlock);
    });
  }

  void cross_entropy(std::int64_t rows, std::int64_t classes, const float* logits, const std::int32_t* labels,
                     std::int64_t label_period, double* loss, std::uint8_t* correct) override {
    if (!cpu_vecmath::available() || !float_avx512())
      return Backend::cross_entropy(rows, classes, logits, labels, label_period, loss, correct);
    detail::check_cross_entropy(rows, classes, labels, label_period);
    constexpr std::int64_t kBlock = 1024;  // rows, whole vectors of 8 but the last block's
    cpu_parallel::for_each((rows + kBlock - 1) / kBlock, rows * classes >= kParallelMinElements, [&](std::int64_t b) {
      cpu_vecmath::cross_entropy_avx512(b * kBlock, std::min(rows, (b + 1) * kBlock), classes, logits, labels,
                                        label_period, loss, correct);
    });
  }

  void embedding(const MemberRows& batch, std::int64_t vocab, std::int64_t d, const std::int32_t* tokens,
                 const float* w, const LowRankFactors& f, float* y) override {
    const std::int64_t r = f.rank;
    cpu_parallel::for_each(batch.rows(), batch.rows() * d * r >= kParallelMinElements, [&](std::int64_t row) {
      std::int64_t j = row / batch.rows_per_member, t = tokens[row];
      float* yr = y + row * d;
      for (std::int64_t k = 0; k < d; ++k) yr[k] = w[t * d + k];
      if (!f.blocks || f.coef[j] == 0.0f) return;
      const float* B = f.blocks[j];
      const float* At = B + d * r + t * r;
      for (std::int64_t k = 0; k < d; ++k) {
        float acc = 0.0f;
        for (std::int64_t c = 0; c < r; ++c) acc += At[c] * B[k * r + c];
        yr[k] += f.coef[j] * acc;
      }
    });
  }

  using Backend::qmm;
  void qmm(const MemberRows& batch, std::int64_t m, std::int64_t n, const std::int8_t* x, const std::int8_t* w,
           const QFactors& f, std::int8_t* y, const QAddend& add, const PackedWeights* packed) override {
    cpu_int8::qmm(batch, m, n, x, w, f, y, add, packed);
  }
  std::shared_ptr<const PackedWeights> qpack(std::int64_t m, std::int64_t n, const std::int8_t* w) override {
    return cpu_int8::qpack(m, n, w);
  }
  void qembedding(const MemberRows& batch, std::int64_t vocab, std::int64_t d, const std::int32_t* tokens,
                  const std::int8_t* w, const QFactors& f, std::int8_t* y) override {
    cpu_int8::qembedding(batch, vocab, d, tokens, w, f, y);
  }
  void ql1_norm(const MemberRows& batch, std::int64_t d, const std::int8_t* x, const std::int8_t* w,
                std::int64_t w_stride, std::int8_t* y) override { cpu_int8::ql1_norm(batch, d, x, w, w_stride, y); }
  void qadd(const MemberRows& batch, std::int64_t d, const std::int8_t* a, const std::int8_t* b, const std::int8_t* v,
            std::int64_t v_stride, std::int8_t* y) override { cpu_int8::qadd(batch, d, a, b, v, v_stride, y); }
  void qgru_gate(std::int64_t n, const std::int8_t* f, const std::int8_t* h, std::int8_t* g) override {
    cpu_int8::qgru_gate(n, f, h, g);
  }
  void qgru_update_add(std::int64_t n, const std::int8_t* f, const std::int8_t* hh, std::int8_t* h,
                       const std::int8_t* x, std::int8_t* y) override {
    cpu_int8::qgru_update_add(n, f, hh, h, x, y);
  }
  void qgru_update(std::int64_t n, const std::int8_t* f, const std::int8_t* hh, std::int8_t* h) override {
    cpu_int8::qgru_update(n, f, hh, h);
  }
  void qloglik(std::int64_t rows, const std::int8_t* logits, const std::int32_t* targets, std::int32_t* ll) override {
    cpu_int8::qloglik(rows, logits, targets, ll);
  }
  void qupdate_accumulate(std::int64_t m, std::int64_t n, std::int64_t rank, std::int64_t n_pairs,
                          const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z) override {
    cpu_int8::qupdate_accumulate(m, n, rank, n_pairs, blocks, d, z);
  }
  std::int64_t qapply_moves(std::int64_t n, const std::int64_t* z, std::int64_t threshold, std::int8_t* w) override {
    return cpu_int8::qapply_moves(n, z, threshold, w);
  }
  std::int64_t qupdate_apply(std::int64_t m, std::int64_t n, std::int64_t rank, std::int64_t n_pairs,
                             const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t threshold,
                             std::int8_t* w) override {
    std::int64_t moved = 0;  // in the kernel's last pass where the level has one, else the two ops
    if (cpu_int8::detail::apply_signs_dispatch(m, n, rank, n_pairs, blocks, d, threshold, w, &moved)) return moved;
    return Backend::qupdate_apply(m, n, rank, n_pairs, blocks, d, threshold, w);
  }

 private:
  // The AVX-512 or AVX2 correction (from base when given), members split over a team when it pays.
  static void correction_simd(const MemberRows& batch, const LowRankFactors& f, const float* x, const float* base,
                              float* y) {
    const auto kernel = float_avx512() ? cpu_float_avx512::lowrank_correction : cpu_float_avx2::lowrank_correction;
    const bool big = batch.rows() * f.rank * (f.m + f.n) >= kParallelMinElements;
    cpu_parallel::team(big, [&](std::int64_t t, std::int64_t nt) {
      const auto [first, last] = cpu_parallel::share(batch.n_members, t, nt);
      kernel(batch, f, x, y, first, last - first, base);
    });
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace eggroll
