// The noisers other than the base EGGROLL behaviour (ALGORITHM.md 1.5): eggroll_sign,
// eggroll_baseline, open_es, sparse and noop, and the factory.
#include <algorithm>
#include <cmath>

#include "eggroll/es/noiser.hpp"

namespace eggroll {
namespace {

class Eggroll final : public Noiser {
 public:
  using Noiser::Noiser;
  std::string name() const override { return "eggroll"; }
};

// Forward as EGGROLL; the update uses sign(A_k) sign(B_k)^T in place of A_k B_k^T.
class EggrollSign final : public Noiser {
 public:
  using Noiser::Noiser;
  std::string name() const override { return "eggroll_sign"; }
  void accumulate_gradient(Backend& backend, PopulationView& view, const Param& p,
                           const std::vector<double>& fitness, Tensor& grad) const override {
    if (!p.perturbed() || !p.low_rank()) return Noiser::accumulate_gradient(backend, view, p, fitness, grad);
    std::vector<double> w = pair_weights(view, fitness);
    const std::int64_t len = rank_ * (p.rows() + p.cols());
    std::vector<float> signs(w.size() * static_cast<std::size_t>(len));
    std::vector<const float*> blocks = factor_blocks(view, p);
    const double scale = -view.sigma() / std::sqrt(static_cast<double>(population_) * rank_);
    for (std::size_t k = 0; k < w.size(); ++k) {
      const float* b = blocks[k];
      float* s = signs.data() + k * len;
      for (std::int64_t e = 0; e < len; ++e) s[e] = b[e] > 0.0f ? 1.0f : (b[e] < 0.0f ? -1.0f : 0.0f);
      blocks[k] = s;
      w[k] *= scale;
    }
    backend.lowrank_update(p.rows(), p.cols(), rank_, static_cast<std::int64_t>(w.size()), blocks.data(), w.data(),
                           grad.data<float>());
  }
};

// Members 0 and 1 of each group of G are unperturbed baselines. A perturbed member's fitness is
// d_i = s_i - (s_0 + s_1) / 2 within its group, divided by the group's sqrt(mean d^2 + 1e-5);
// the update is clipped to global norm 1.
class EggrollBaseline final : public Noiser {
 public:
  EggrollBaseline(const EsConfig& es, std::uint64_t seed) : Noiser(es, seed) {
    check(es.group_size >= 4 && es.population % es.group_size == 0, "es.noiser = \"eggroll_baseline\" needs ",
          "es.group_size >= 4 dividing es.population (two baselines and at least one pair per group), got group_size ",
          es.group_size, " and population ", es.population);
  }
  std::string name() const override { return "eggroll_baseline"; }
  bool perturbs(std::int64_t member) const override { return member % group_size_ >= 2; }
  double clip_norm(double configured) const override { return configured > 0 ? std::min(configured, 1.0) : 1.0; }
  std::vector<double> shape(const std::vector<double>& s, Shaping, std::int64_t) const override {
    std::vector<double> f(s.size(), 0.0);
    const auto g = static_cast<std::size_t>(group_size_);
    for (std::size_t b = 0; b + g <= s.size(); b += g) {
      const double base = 0.5 * (s[b] + s[b + 1]);
      double sq = 0.0;
      for (std::size_t i = b + 2; i < b + g; ++i) sq += (s[i] - base) * (s[i] - base);
      const double norm = std::sqrt(sq / static_cast<double>(g - 2) + 1e-5);
      for (std::size_t i = b + 2; i < b + g; ++i) f[i] = (s[i] - base) / norm;
    }
    return f;
  }
};

// Full-rank Gaussian noise on every parameter: W_i = W + s_i sigma E_i (one GEMM per member).
// Noisers whose noise is drawn per member (no factors shared by the population to generate ahead,
// no low-rank forward): a shared input is repeated per member.
class PerMemberNoiser : public Noiser {
 public:
  using Noiser::Noiser;
  void prefetch(PopulationView&, const ParamStore&) const override {}
  using Noiser::matmul_shared;
  void matmul_shared(ForwardContext& ctx, const Param& w, const float* x, float* y,
                     const RowEpilogue& after) const override {
    matmul_repeated(ctx, w, x, y, after);
  }
};

class OpenEs final : public PerMemberNoiser {
 public:
  using PerMemberNoiser::PerMemberNoiser;
  std::string name() const override { return "open_es"; }  // full noise per member

  using Noiser::matmul;
  void matmul(ForwardContext& ctx, const Param& w, const float* x, float* y, const RowEpilogue& after) const override {
    check(ctx.view != nullptr, "Noiser::matmul needs a population view");
    if (!w.perturbed()) return Noiser::matmul(ctx, w, x, y, after);
    PopulationView& view = *ctx.view;
    const std::int64_t m = w.rows(), n = w.cols(), rows = ctx.rows_per_member;
    std::vector<float> wi(static_cast<std::size_t>(m * n));
    for (std::int64_t j = 0; j < ctx.members(); ++j) {
      member_matrix(view, w, ctx.member(j), wi.data());
      ctx.backend.gemm_nt(rows, m, n, x + j * rows * n, wi.data(), y + j * rows * m);
    }
    ctx.backend.apply_epilogue(ctx.batch(), m, after, y);
  }

  void embedding(ForwardContext& ctx, const Param& w, const std::int32_t* tokens, float* y) const override {
    PopulationView& view = *ctx.view;
    const std::int64_t d = w.cols(), rows = ctx.rows_per_member;
    std::vector<float> wi(static_cast<std::size_t>(w.value.numel()));
    for (std::int64_t j = 0; j < ctx.members(); ++j) {
      member_matrix(view, w, ctx.member(j), wi.data());
      for (std::int64_t t = 0; t < rows; ++t) {
        const std::int64_t row = j * rows + t;
        std::copy_n(wi.data() + tokens[row] * d, d, y + row * d);
      }
    }
  }

  void accumulate_gradient(Backend& backend, PopulationView& view, const Param& p,
                           const std::vector<double>& fitness, Tensor& grad) const override {
    if (!p.perturbed()) return;
    if (!p.low_rank()) return accumulate_vector_gradient(view, p, fitness, grad);
    const std::int64_t len = p.value.numel();
    std::vector<double> w = pair_weights(view, fitness);
    float* g = grad.data<float>();
    for (std::size_t k = 0; k < w.size(); ++k) {
      if (w[k] == 0.0) continue;
      const float* e = view.normals(p, view.pair_begin() + static_cast<std::int64_t>(k), NoiseTag::full, len);
      const auto c = static_cast<float>(-w[k] * view.sigma() / std::sqrt(static_cast<double>(population_)));
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < len; ++i) g[i] += c * e[i];
    }
  }

  std::int64_t bytes_per_pair(const ParamStore& params) const override {
    std::int64_t n = 0;
    for (const Param& p : params.all())
      if (p.perturbed()) n += p.value.numel();
    return n * static_cast<std::int64_t>(sizeof(float));
  }

 private:
  void member_matrix(PopulationView& view, const Param& w, std::int64_t i, float* out) const {
    const std::int64_t len = w.value.numel();
    const float* base = w.value.data<float>();
    if (!w.perturbed() || !perturbs(i)) {
      std::copy_n(base, len, out);
      return;
    }
    const float* e = view.normals(w, pair_of(i), NoiseTag::full, len);
    const float c = sign_of(i) * static_cast<float>(view.sigma());
    for (std::int64_t k = 0; k < len; ++k) out[k] = base[k] + c * e[k];
  }
};

// k = max(m, n) random entries per member: W_i = W + s_i sigma sum_e v_e 1[p_e], with positions
// p_e = bits_e mod (m n) (tag sparse_index) and values v_e standard normal (tag factors).
class Sparse final : public PerMemberNoiser {
 public:
  using PerMemberNoiser::PerMemberNoiser;
  std::string name() const override { return "sparse"; }  // entries drawn per member

  using Noiser::matmul;
  void matmul(ForwardContext& ctx, const Param& w, const float* x, float* y, const RowEpilogue& after) const override {
    check(ctx.view != nullptr, "Noiser::matmul needs a population view");
    const std::int64_t m = w.rows(), n = w.cols(), rows = ctx.rows_per_member;
    if (!w.perturbed()) return Noiser::matmul(ctx, w, x, y, after);
    ctx.backend.gemm_nt(ctx.batch().rows(), m, n, x, w.value.data<float>(), y);
    PopulationView& view = *ctx.view;
    for (std::int64_t j = 0; j < ctx.members(); ++j) {
      const std::int64_t i = ctx.member(j);
      if (!perturbs(i)) continue;
      const Entries e = entries(view, w, pair_of(i));
      const float c = sign_of(i) * static_cast<float>(view.sigma());
      for (std::int64_t t = 0; t < rows; ++t) {
        const std::int64_t row = j * rows + t;
        for (std::int64_t k = 0; k < e.count; ++k) {
          const std::uint64_t pos = e.pos[k] % static_cast<std::uint64_t>(m * n);
          y[row * m + pos / n] += c * e.val[k] * x[row * n + pos % n];
        }
      }
    }
    ctx.backend.apply_epilogue(ctx.batch(), m, after, y);
  }

  void embedding(ForwardContext& ctx, const Param& w, const std::int32_t* tokens, float* y) const override {
    PopulationView& view = *ctx.view;
    const std::int64_t d = w.cols(), rows = ctx.rows_per_member;
    const auto vd = static_cast<std::uint64_t>(w.value.numel());
    const float* base = w.value.data<float>();
    for (std::int64_t j = 0; j < ctx.members(); ++j) {
      const std::int64_t i = ctx.member(j);
      for (std::int64_t t = 0; t < rows; ++t) std::copy_n(base + tokens[j * rows + t] * d, d, y + (j * rows + t) * d);
      if (!w.perturbed() || !perturbs(i)) continue;
      const Entries e = entries(view, w, pair_of(i));
      const float c = sign_of(i) * static_cast<float>(view.sigma());
      for (std::int64_t t = 0; t < rows; ++t) {
        const std::int64_t row = j * rows + t;
        for (std::int64_t k = 0; k < e.count; ++k) {
          const std::uint64_t pos = e.pos[k] % vd;
          if (static_cast<std::int64_t>(pos) / d == tokens[row]) y[row * d + pos % d] += c * e.val[k];
        }
      }
    }
  }

  void accumulate_gradient(Backend& backend, PopulationView& view, const Param& p,
                           const std::vector<double>& fitness, Tensor& grad) const override {
    if (!p.perturbed()) return;
    if (!p.low_rank()) return accumulate_vector_gradient(view, p, fitness, grad);
    const auto mn = static_cast<std::uint64_t>(p.value.numel());
    std::vector<double> w = pair_weights(view, fitness);
    float* g = grad.data<float>();
    for (std::size_t k = 0; k < w.size(); ++k) {
      if (w[k] == 0.0) continue;
      const Entries e = entries(view, p, view.pair_begin() + static_cast<std::int64_t>(k));
      const auto c = static_cast<float>(-w[k] * view.sigma() / std::sqrt(static_cast<double>(population_)));
      for (std::int64_t j = 0; j < e.count; ++j) g[e.pos[j] % mn] += c * e.val[j];
    }
  }

  std::int64_t bytes_per_pair(const ParamStore& params) const override {
    std::int64_t n = 0;
    for (const Param& p : params.all())
      if (p.perturbed()) n += p.low_rank() ? 2 * std::max(p.rows(), p.cols()) : p.value.numel();
    return n * 4;
  }

 private:
  struct Entries {
    std::int64_t count;
    const std::uint32_t* pos;
    const float* val;
  };
  Entries entries(PopulationView& view, const Param& w, std::int64_t pair) const {
    const std::int64_t k = std::max(w.rows(), w.cols());
    return {k, view.bits(w, pair, NoiseTag::sparse_index, k), view.normals(w, pair, NoiseTag::factors, k)};
  }
};

// No noise and no update: evaluation of the unperturbed model.
class Noop final : public Noiser {
 public:
  using Noiser::Noiser;
  std::string name() const override { return "noop"; }
  bool active() const override { return false; }
  bool perturbs(std::int64_t) const override { return false; }
};

}  // namespace

std::unique_ptr<Noiser> make_q_eggroll(const EsConfig& es, std::uint64_t seed);

std::unique_ptr<Noiser> make_noiser(const EsConfig& es, std::uint64_t seed) {
  if (es.noiser == "eggroll") return std::make_unique<Eggroll>(es, seed);
  if (es.noiser == "eggroll_sign") return std::make_unique<EggrollSign>(es, seed);
  if (es.noiser == "eggroll_baseline") return std::make_unique<EggrollBaseline>(es, seed);
  if (es.noiser == "open_es") return std::make_unique<OpenEs>(es, seed);
  if (es.noiser == "sparse") return std::make_unique<Sparse>(es, seed);
  if (es.noiser == "noop") return std::make_unique<Noop>(es, seed);
  if (es.noiser == "q_eggroll") return make_q_eggroll(es, seed);
  throw_error("es.noiser = \"", es.noiser, "\": expected eggroll, open_es, eggroll_sign, eggroll_baseline, sparse, noop or q_eggroll");
}

}  // namespace eggroll
