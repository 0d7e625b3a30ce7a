// Strategy: ask/tell over a ParamStore (ALGORITHM.md 1.3-1.4).
#include "eggroll/es/strategy.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "es/blocked_sum.hpp"

namespace eggroll {
namespace {

// sum_e (after[e] - before[e])^2 in double, the same for any number of threads.
double squared_change(const float* before, const float* after, std::int64_t n) {
  return es_detail::blocked_sum(n, [&](std::int64_t e) {
    const double d = static_cast<double>(after[e]) - before[e];
    return d * d;
  });
}

// A copy of the n values at w, made in parallel (the parameters before the optimizer's step).
std::unique_ptr<float[]> copy_of(const float* w, std::int64_t n) {
  auto out = std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static) if (n >= (std::int64_t{1} << 16))
  for (std::int64_t i = 0; i < n; ++i) out[i] = w[i];
  return out;
}

}  // namespace

Strategy::Strategy(ParamStore& params, const EsConfig& es, const OptimConfig& optim, std::uint64_t seed,
                   std::int64_t total_epochs, Backend& backend)
    : params_(&params), es_(es), optim_(optim), backend_(&backend), noiser_(make_noiser(es, seed)),
      shaping_(shaping_from_name(es.shaping)) {
  if (!noiser_->integer()) optimizer_ = make_optimizer(optim);  // the integer update keeps no state
  if (shaping_ == Shaping::group_zscore)
    check(es.group_size >= 2 && es.population % es.group_size == 0, "es.shaping = \"group_zscore\" needs ",
          "es.group_size dividing es.population, got group_size ", es.group_size, " and population ", es.population);
  noiser_->shape(std::vector<double>(static_cast<std::size_t>(es.population), 0.0), shaping_, es.group_size);
  if (shaping_ == Shaping::antithetic_sign)
    check(es.antithetic, "es.shaping = \"antithetic_sign\" needs es.antithetic = true");
  if (es.freeze_nonmatrix) params.freeze_nonmatrix();
  const std::int64_t horizon = optim.schedule_epochs > 0 ? optim.schedule_epochs : total_epochs;
  lr_schedule_ = {schedule_kind_from_name(optim.lr_schedule), optim.lr, optim.lr_end, horizon, optim.warmup_epochs};
  sigma_schedule_ = {schedule_kind_from_name(optim.sigma_schedule), es.sigma, optim.sigma_end, horizon, 0};
  lr_schedule_.at(1);  // an impossible schedule (an exponential factor <= 0) fails here, not mid-run
  sigma_schedule_.at(1);
}

std::unique_ptr<Strategy> Strategy::for_shapes(const std::vector<std::pair<std::string, Shape>>& shapes,
                                               const EsConfig& es, const OptimConfig& optim, std::uint64_t seed,
                                               std::int64_t total_epochs, Backend& backend) {
  auto store = std::make_unique<ParamStore>();
  for (auto& [name, shape] : shapes)
    store->add(name, shape.size() == 2 ? ParamKind::matrix : ParamKind::vector, Tensor(DType::f32, shape));
  auto s = std::make_unique<Strategy>(*store, es, optim, seed, total_epochs, backend);
  s->owned_ = std::move(store);
  return s;
}

double Strategy::sigma() const { return sigma_schedule_.at(epoch_); }
double Strategy::lr() const { return lr_schedule_.at(epoch_); }

std::unique_ptr<PopulationView> Strategy::ask(std::int64_t begin, std::int64_t end) const {
  // no noise generated here: the forward generates what it reads (Noiser::prefetch)
  return std::make_unique<PopulationView>(*noiser_, epoch_, sigma(), begin, end < 0 ? es_.population : end);
}

std::int64_t Strategy::chunk_members() const {
  const std::int64_t per_pair = std::max<std::int64_t>(1, noiser_->bytes_per_pair(*params_));
  const std::int64_t pairs = std::max<std::int64_t>(1, es_.memory_budget / per_pair);
  const std::int64_t members = pairs * (noiser_->antithetic() ? 2 : 1);
  return std::min(members, es_.population);
}

Tensor Strategy::member_tensor(std::int64_t member, const std::string& name) const {
  check(member >= 0 && member < es_.population, "member ", member, " is outside [0, ", es_.population, ")");
  const Param& p = params_->at(name);
  const std::int64_t first = noiser_->antithetic() ? member & ~std::int64_t{1} : member;
  auto view = ask(first, first + (noiser_->antithetic() ? 2 : 1));
  const std::int64_t j = member - first;
  if (!p.low_rank()) {
    Tensor all = noiser_->vectors(*view, p);
    Tensor out(DType::f32, p.value.shape());
    std::copy_n(all.data<float>() + j * p.value.numel(), p.value.numel(), out.data<float>());
    return out;
  }
  // A forward pass of the identity reads the member's matrix through the noiser's own path.
  const std::int64_t m = p.rows(), n = p.cols();
  ForwardContext ctx{*backend_, view.get(), n};
  Tensor eye(DType::f32, {view->size() * n, n});
  for (std::int64_t r = 0; r < view->size() * n; ++r) eye.data<float>()[r * n + r % n] = 1.0f;
  Tensor yt(DType::f32, {view->size() * n, m});
  noiser_->matmul(ctx, p, eye.data<float>(), yt.data<float>());
  Tensor out(DType::f32, {m, n});
  for (std::int64_t a = 0; a < m; ++a)
    for (std::int64_t b = 0; b < n; ++b) out.data<float>()[a * n + b] = yt.data<float>()[(j * n + b) * m + a];
  return out;
}

MemberFactors Strategy::member_factors(std::int64_t member, const std::string& name) const {
  const Param& p = params_->at(name);
  check(p.low_rank(), "parameter '", name, "' is a ", param_kind_name(p.kind), ": only matrices have factors");
  const std::string kind = noiser_->name();
  check(kind == "eggroll" || kind == "eggroll_sign" || kind == "eggroll_baseline",
        "member_factors needs a low-rank noiser, es.noiser is \"", kind, "\"");
  const std::int64_t first = noiser_->antithetic() ? member & ~std::int64_t{1} : member;
  auto view = ask(first, first + (noiser_->antithetic() ? 2 : 1));
  const std::int64_t m = p.rows(), n = p.cols(), r = noiser_->rank();
  const float* block = view->normals(p, noiser_->pair_of(member), NoiseTag::factors, r * (m + n));
  MemberFactors f{Tensor(DType::f32, {m, r}), Tensor(DType::f32, {n, r}), 0.0};
  std::copy_n(block, n * r, f.b.data<float>());
  std::copy_n(block + n * r, m * r, f.a.data<float>());
  if (p.perturbed() && noiser_->perturbs(member))
    f.coef = noiser_->sign_of(member) * sigma() / std::sqrt(static_cast<double>(r));
  return f;
}

static void score_stats(const std::vector<double>& s, EpochUpdate& u) {
  double sum = 0, sq = 0, mx = -INFINITY;
  std::int64_t n = 0;
  for (double v : s)
    if (std::isfinite(v)) {
      sum += v;
      mx = std::max(mx, v);
      ++n;
    }
  if (n == 0) return;
  u.score_mean = sum / static_cast<double>(n);
  for (double v : s)
    if (std::isfinite(v)) sq += (v - u.score_mean) * (v - u.score_mean);
  u.score_std = std::sqrt(sq / static_cast<double>(n));
  u.score_max = mx;
}

EpochUpdate Strategy::tell(const std::vector<double>& scores, PopulationView* full_view) {
  check(static_cast<std::int64_t>(scores.size()) == es_.population, "tell: got ", scores.size(),
        " scores, expected one per member (", es_.population, ")");
  EpochUpdate u;
  u.epoch = epoch_;
  u.lr = lr();
  u.sigma = sigma();
  score_stats(scores, u);
  std::vector<double> s = scores;
  u.n_nonfinite = replace_nonfinite_scores(s);
  if (u.n_nonfinite == es_.population || !noiser_->active()) {
    ++epoch_;
    return u;
  }
  const std::vector<double> fitness = noiser_->shape(s, shaping_, es_.group_size);
  if (noiser_->integer()) {
    tell_integer(fitness, full_view, u);
    ++epoch_;
    return u;
  }

  std::vector<Param*> live = live_params();
  std::vector<Tensor> grads;
  for (Param* p : live) grads.emplace_back(DType::f32, p->value.shape());
  for_update_views(full_view, [&](PopulationView& view) {
    for (std::size_t k = 0; k < live.size(); ++k)
      noiser_->accumulate_gradient(*backend_, view, *live[k], fitness, grads[k]);
  });

  std::vector<std::pair<float*, std::int64_t>> flat;
  for (Tensor& g : grads) flat.emplace_back(g.data<float>(), g.numel());
  u.grad_norm = clip_global_norm(flat, noiser_->clip_norm(optim_.clip_norm));
  optimizer_->begin_step();
  double moved = 0.0;
  for (std::size_t k = 0; k < live.size(); ++k) {
    float* w = live[k]->value.data<float>();
    const std::int64_t n = live[k]->value.numel();
    const std::unique_ptr<float[]> before = copy_of(w, n);
    optimizer_->apply(live[k]->name, w, grads[k].data<float>(), n, u.lr);
    moved += squared_change(before.get(), w, n);
  }
  u.update_norm = std::sqrt(moved);
  u.updated = true;
  ++epoch_;
  return u;
}

bool Strategy::whole_view(const PopulationView* full_view) const {
  return full_view && full_view->begin() == 0 && full_view->end() == es_.population && full_view->epoch() == epoch_;
}

void Strategy::for_update_views(PopulationView* full_view, const std::function<void(PopulationView&)>& fn) {
  if (whole_view(full_view)) return fn(*full_view);
  const std::int64_t chunk = chunk_members();
  for (std::int64_t b = 0; b < es_.population; b += chunk) fn(*ask(b, std::min(b + chunk, es_.population)));
}

std::vector<Param*> Strategy::live_params() {
  std::vector<Param*> live;
  for (Param& p : params_->all())
    if (p.perturbed()) live.push_back(&p);
  return live;
}

std::map<std::string, Tensor> Strategy::state() const {
  std::map<std::string, Tensor> out;
  if (optimizer_)
    for (auto& [k, v] : optimizer_->state()) out.emplace("opt/" + k, v);
  Tensor e(DType::i32, {1});
  e.data<std::int32_t>()[0] = static_cast<std::int32_t>(epoch_);
  out.emplace("strategy/epoch", std::move(e));
  return out;
}

void Strategy::load_state(const std::map<std::string, Tensor>& state) {
  std::map<std::string, Tensor> opt;
  for (auto& [k, v] : state)
    if (k.rfind("opt/", 0) == 0) opt.emplace(k.substr(4), v);
  if (optimizer_) optimizer_->load_state(opt);
  auto it = state.find("strategy/epoch");
  check(it != state.end() && it->second.dtype() == DType::i32 && it->second.numel() == 1,
        "checkpoint lacks 'strategy/epoch' (an i32 tensor of one value)");
  epoch_ = it->second.data<std::int32_t>()[0];
  check(epoch_ >= 0, "checkpoint 'strategy/epoch' = ", epoch_, " is negative");
}

}  // namespace eggroll
