// The Noiser base: EGGROLL's low-rank behaviour (ALGORITHM.md 1.1, 1.4), which eggroll_sign and
// eggroll_baseline extend, and full-rank vector noise shared by every noiser.
#include "eggroll/es/noiser.hpp"

#include <algorithm>
#include <cmath>

#include "eggroll/quant/qmath.hpp"

namespace eggroll {

Noiser::Noiser(const EsConfig& es, std::uint64_t seed)
    : seed_(seed), rank_(es.rank), antithetic_(es.antithetic), population_(es.population),
      noise_reuse_(es.noise_reuse), fixed_noise_(es.fixed_noise), group_size_(es.group_size),
      sigma_shift_(es.sigma_shift) {
  check(es.population >= 1, "es.population = ", es.population, ": expected >= 1");
  check(es.rank >= 1, "es.rank = ", es.rank, ": expected >= 1");
  check(!es.antithetic || es.population % 2 == 0, "es.population = ", es.population,
        " is odd but es.antithetic = true: use an even population or set es.antithetic = false");
  check(std::isfinite(es.sigma) && es.sigma > 0, "es.sigma = ", es.sigma, ": expected a finite value > 0");
  check(es.noise_reuse >= 1 || es.fixed_noise, "es.noise_reuse = ", es.noise_reuse,
        ": expected >= 1 (0 keeps one noise forever and needs es.fixed_noise = true)");
  if (es.noise_source == "table") {
    if (es.noiser == "q_eggroll")
      int8_table_ = std::make_shared<Int8NoiseTable>(seed, es.table_log2_size);
    else
      table_ = std::make_shared<NoiseTable>(seed, es.table_log2_size);
  }
}

std::uint64_t Noiser::noise_epoch(std::int64_t epoch) const {
  if (fixed_noise_ || noise_reuse_ <= 0) return 0;
  return static_cast<std::uint64_t>(epoch / noise_reuse_);
}

std::vector<const float*> Noiser::factor_blocks(PopulationView& view, const Param& p) const {
  std::vector<const float*> blocks(static_cast<std::size_t>(view.pair_end() - view.pair_begin()));
  view.normals_range(p, NoiseTag::factors, rank_ * (p.rows() + p.cols()), view.pair_begin(),
                     static_cast<std::int64_t>(blocks.size()), blocks.data());
  return blocks;
}

std::vector<const float*> Noiser::member_blocks(const ForwardContext& ctx, const Param& p, bool present,
                                               bool* all_present) const {
  const std::int64_t members = ctx.members();
  std::vector<const float*> blocks(static_cast<std::size_t>(members), nullptr);
  if (all_present != nullptr) *all_present = true;
  if (members == 0) return blocks;
  const std::int64_t first = pair_of(ctx.member(0)), count = pair_of(ctx.member(members - 1)) - first + 1;
  std::vector<const float*> pairs(static_cast<std::size_t>(count));
  const bool there =
      ctx.view->normals_range(p, NoiseTag::factors, rank_ * (p.rows() + p.cols()), first, count, pairs.data(), present);
  if (all_present != nullptr) *all_present = there;
  for (std::int64_t j = 0; j < members; ++j) blocks[j] = pairs[pair_of(ctx.member(j)) - first];
  return blocks;
}

std::vector<const std::int8_t*> Noiser::qmember_blocks(const ForwardContext& ctx, const Param& p) const {
  const std::int64_t members = ctx.members();
  std::vector<const std::int8_t*> blocks(static_cast<std::size_t>(members), nullptr);
  if (members == 0) return blocks;
  const std::int64_t first = pair_of(ctx.member(0)), count = pair_of(ctx.member(members - 1)) - first + 1;
  std::vector<const std::int8_t*> pairs(static_cast<std::size_t>(count));
  ctx.view->int8s_range(p, NoiseTag::factors, rank_ * (p.rows() + p.cols()), first, count, pairs.data());
  for (std::int64_t j = 0; j < members; ++j) blocks[j] = pairs[pair_of(ctx.member(j)) - first];
  return blocks;
}

void Noiser::prefetch(PopulationView& view, const ParamStore& params) const {
  if (!active() || view.size() == 0) return;
  for (const Param& p : params.all()) {
    if (!p.perturbed()) continue;
    const std::int64_t len = p.low_rank() ? rank_ * (p.rows() + p.cols()) : p.value.numel() * (integer() ? 2 : 1);
    if (integer())
      view.int8s(p, view.pair_begin(), NoiseTag::factors, len);
    else
      view.normals(p, view.pair_begin(), NoiseTag::factors, len);
  }
}

std::vector<float> Noiser::member_coefs(const ForwardContext& ctx) const {
  std::vector<float> coef(static_cast<std::size_t>(ctx.members()));
  const float scale = static_cast<float>(ctx.view->sigma() / std::sqrt(static_cast<double>(rank_)));
  for (std::int64_t j = 0; j < ctx.members(); ++j) {
    std::int64_t i = ctx.member(j);
    coef[j] = perturbs(i) ? sign_of(i) * scale : 0.0f;
  }
  return coef;
}

void Noiser::matmul(ForwardContext& ctx, const Param& w, const float* x, float* y, const RowEpilogue& after) const {
  const std::int64_t m = w.rows(), n = w.cols();
  check(ctx.view != nullptr, "Noiser::matmul needs a population view");
  // W's pack, made once for the view's epoch (or the caller's packs), not in every call
  const PackedWeights* packed = ctx.packed(w);
  if (!w.perturbed() || !active())
    return ctx.backend.linear(ctx.batch(), m, n, x, w.value.data<float>(), nullptr, after, y, packed);
  // The factors are made present by the backend, for the members it is about to read (ready()):
  // a fused kernel generates each block of rows' factors just before its tiles, in cache. No
  // hook when they are all there (table slices, or a view that has made them already): the
  // backend may then fetch ahead the blocks it will read.
  bool present = false;
  std::vector<const float*> blocks = member_blocks(ctx, w, false, &present);
  std::vector<float> coef = member_coefs(ctx);
  const std::function<void(std::int64_t, std::int64_t)> fill = [&](std::int64_t first, std::int64_t count) {
    const std::int64_t pair_first = pair_of(ctx.member(first));
    ctx.view->fill_normals(w, NoiseTag::factors, rank_ * (m + n), pair_first,
                           pair_of(ctx.member(first + count - 1)) - pair_first + 1);
  };
  const LowRankFactors factors{m, n, rank_, blocks.data(), coef.data(), present ? nullptr : &fill};
  ctx.backend.linear(ctx.batch(), m, n, x, w.value.data<float>(), &factors, after, y, packed);
}

void Noiser::matmul_shared(ForwardContext& ctx, const Param& w, const float* x, float* y,
                           const RowEpilogue& after) const {
  check(ctx.view != nullptr, "Noiser::matmul_shared needs a population view");
  const std::int64_t m = w.rows(), n = w.cols(), rows = ctx.rows_per_member, members = ctx.members();
  if (members == 0) return;
  std::vector<float> base(static_cast<std::size_t>(rows * m));  // x W^T, the part every member shares
  ctx.backend.gemm_nt(rows, m, n, x, w.value.data<float>(), base.data());
  const bool perturb = w.perturbed() && active();
  std::vector<const float*> blocks;
  std::vector<float> coef;
  if (perturb) {
    blocks = member_blocks(ctx, w);
    coef = member_coefs(ctx);
  }
  for_member_blocks(ctx, [&](ForwardContext& block) {
    for (std::int64_t j = block.member_begin - ctx.member_begin, end = j + block.members(); j < end; ++j) {
      float* yj = y + j * rows * m;
      if (perturb)  // base + the member's correction, base read in place of a copy
        block.backend.lowrank_correction_onto({1, rows}, {m, n, rank_, &blocks[j], &coef[j]}, x, base.data(), yj);
      else
        std::copy(base.begin(), base.end(), yj);
      // the member's bias and activation while its rows are in cache
      RowEpilogue own = after;
      if (own.bias != nullptr) own.bias += j * own.bias_stride;
      block.backend.apply_epilogue({1, rows}, m, own, yj);
    }
  });
}

void Noiser::matmul_repeated(ForwardContext& ctx, const Param& w, const float* x, float* y,
                             const RowEpilogue& after) const {
  const std::int64_t rows = ctx.rows_per_member, n = w.cols();
  std::vector<float> repeated(static_cast<std::size_t>(ctx.members() * rows * n));
  for (std::int64_t j = 0; j < ctx.members(); ++j) std::copy_n(x, rows * n, repeated.data() + j * rows * n);
  ForwardContext each = ctx;
  each.shared_input = false;
  matmul(each, w, repeated.data(), y, after);
}

Tensor Noiser::vectors(PopulationView& view, const Param& v) const {
  const std::int64_t len = v.value.numel();
  Tensor out(DType::f32, {view.size(), len});
  const float* base = v.value.data<float>();
  float* o = out.data<float>();
  const float sigma = static_cast<float>(view.sigma());
  for (std::int64_t j = 0; j < view.size(); ++j) {
    std::int64_t i = view.begin() + j;
    float* oj = o + j * len;
    if (!v.perturbed() || !active() || !perturbs(i)) {
      for (std::int64_t k = 0; k < len; ++k) oj[k] = base[k];
      continue;
    }
    const float* eps = view.normals(v, pair_of(i), NoiseTag::factors, len);
    const float c = sign_of(i) * sigma;
    for (std::int64_t k = 0; k < len; ++k) oj[k] = base[k] + c * eps[k];
  }
  return out;
}

void Noiser::embedding(ForwardContext& ctx, const Param& w, const std::int32_t* tokens, float* y) const {
  std::vector<const float*> blocks(static_cast<std::size_t>(ctx.members()), nullptr);
  std::vector<float> coef(static_cast<std::size_t>(ctx.members()), 0.0f);
  if (w.perturbed() && active()) {
    blocks = member_blocks(ctx, w);
    coef = member_coefs(ctx);
  }
  ctx.backend.embedding(ctx.batch(), w.rows(), w.cols(), tokens, w.value.data<float>(),
                        {w.rows(), w.cols(), rank_, blocks.data(), coef.data()}, y);
}

std::vector<double> Noiser::shape(const std::vector<double>& scores, Shaping shaping, std::int64_t group_size) const {
  return shape_fitness(shaping, scores, group_size);
}

std::vector<double> Noiser::pair_weights(const PopulationView& view, const std::vector<double>& fitness) const {
  std::vector<double> w(static_cast<std::size_t>(view.pair_end() - view.pair_begin()), 0.0);
  for (std::int64_t i = view.begin(); i < view.end(); ++i)
    if (perturbs(i)) w[pair_of(i) - view.pair_begin()] += fitness[i] * sign_of(i);
  return w;
}

void Noiser::accumulate_vector_gradient(PopulationView& view, const Param& p, const std::vector<double>& fitness,
                                        Tensor& grad) const {
  const std::int64_t len = p.value.numel();
  const double n = static_cast<double>(population_);
  // grad = -sqrt(N) * (1/N) sum_i f_i s_i sigma eps_i
  std::vector<double> w = pair_weights(view, fitness);
  float* g = grad.data<float>();
  for (std::int64_t k = 0; k < static_cast<std::int64_t>(w.size()); ++k) {
    if (w[k] == 0.0) continue;
    const float* eps = view.normals(p, view.pair_begin() + k, NoiseTag::factors, len);
    const float c = static_cast<float>(-w[k] * view.sigma() / std::sqrt(n));
    for (std::int64_t e = 0; e < len; ++e) g[e] += c * eps[e];
  }
}

void Noiser::accumulate_gradient(Backend& backend, PopulationView& view, const Param& p,
                                 const std::vector<double>& fitness, Tensor& grad) const {
  if (!p.perturbed() || !active()) return;
  if (!p.low_rank()) return accumulate_vector_gradient(view, p, fitness, grad);
  // grad = -sqrt(N) (1/N) (sigma / sqrt(r)) sum_k w_k A_k B_k^T
  std::vector<double> w = pair_weights(view, fitness);
  const double scale = -view.sigma() / std::sqrt(static_cast<double>(population_) * rank_);
  const std::vector<const float*> blocks = factor_blocks(view, p);
  for (double& wk : w) wk *= scale;
  backend.lowrank_update(p.rows(), p.cols(), rank_, static_cast<std::int64_t>(w.size()), blocks.data(), w.data(),
                         grad.data<float>());
}

[[noreturn]] static void not_integer(const std::string& name) {
  throw_error("int8 parameters need es.noiser = \"q_eggroll\", got \"", name, "\"");
}
void Noiser::qmatmul(ForwardContext&, const Param&, const std::int8_t*, std::int8_t*, const QAddend&) const {
  not_integer(name());
}
Tensor Noiser::qvectors(PopulationView&, const Param&) const { not_integer(name()); }
void Noiser::qembedding(ForwardContext&, const Param&, const std::int32_t*, std::int8_t*) const { not_integer(name()); }

const std::int8_t* Noiser::qfactor_block(PopulationView& view, const Param& p, std::int64_t pair) const {
  return view.int8s(p, pair, NoiseTag::factors, rank_ * (p.rows() + p.cols()));
}

std::vector<const std::int8_t*> Noiser::qfactor_blocks(PopulationView& view, const Param& p) const {
  std::vector<const std::int8_t*> blocks(static_cast<std::size_t>(view.pair_end() - view.pair_begin()));
  view.int8s_range(p, NoiseTag::factors, rank_ * (p.rows() + p.cols()), view.pair_begin(),
                   static_cast<std::int64_t>(blocks.size()), blocks.data());
  return blocks;
}

const std::int8_t* Noiser::qvector_noise(PopulationView& view, const Param& p, std::int64_t pair) const {
  return view.int8s(p, pair, NoiseTag::factors, 2 * p.value.numel());
}

int Noiser::qshift(const Param& p) const {
  return q::kFixedPoint + sigma_shift_ + (p.low_rank() ? q::rank_shift(rank_) : 0);
}

std::int64_t Noiser::bytes_per_pair(const ParamStore& params) const {
  std::int64_t n = 0;
  for (const Param& p : params.all()) {
    if (!p.perturbed()) continue;
    // factor blocks from the noise table are read in place, not held
    if (p.low_rank()) n += table() != nullptr ? 0 : rank_ * (p.rows() + p.cols());
    else n += p.value.numel();
  }
  return n * static_cast<std::int64_t>(sizeof(float));
}

}  // namespace eggroll
