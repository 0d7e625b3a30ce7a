// Reinforcement learning on classic-control environments: each thread's block of members steps
// its environments in lockstep as one batch (one forward of the block's observations per step,
// the view's factors reused at every step); the members of a group start from the same initial
// states. A member's
// score is its mean return over task.episodes episodes. Optional observation normalisation
// uses statistics frozen within an epoch and merged between epochs in a fixed order.
#include <algorithm>
#include <cmath>

#include "eggroll/noise/noise.hpp"
#include "eggroll/task/rl/env.hpp"
#include "task/builtin_tasks.hpp"

namespace eggroll {
namespace {

class RlTask final : public Task {
 public:
  RlTask(const KindTable& cfg, std::uint64_t seed)
      : kind_(env_from_name(cfg.get_string("env"))), spec_(env_spec(kind_)), seed_(seed) {
    episodes_ = cfg.get_int("episodes");
    sample_ = cfg.get_string("action") == "sample";
    normalize_ = cfg.get_bool("obs_norm");
    action_scale_ = cfg.get_double("action_scale");
    eval_episodes_ = cfg.get_int("eval_episodes");
    const auto d = static_cast<std::size_t>(spec_.obs_dim);
    count_ = 0;
    sum_.assign(d, 0.0);
    sumsq_.assign(d, 0.0);
    freeze_stats();
  }

  std::string kind() const override { return "rl"; }
  std::int64_t input_dim() const override { return spec_.obs_dim; }
  std::int64_t output_dim() const override { return spec_.discrete ? spec_.n_actions : spec_.action_dim; }
  std::string main_figure() const override { return "mean_return"; }
  double figure_from_score(double score) const override { return score; }
  std::string eval_figure() const override { return "mean_return"; }
  void set_population(std::int64_t, std::int64_t group_size) override { group_size_ = group_size; }

  void begin_epoch(std::int64_t epoch) override {
    // Statistics gathered during the last epoch become the frozen ones of this epoch.
    if (normalize_ && epoch != stats_epoch_) {
      merge_pending();
      freeze_stats();
    }
    stats_epoch_ = epoch;
  }

  // Each thread steps the environments of its own block of members, with forwards of that block
  // alone (for_member_blocks): one parallel region per evaluation instead of a few per step, whose
  // work (a step of a small MLP) is too small to share. A member's result does not depend on
  // the split; neither do the observation statistics, gathered per member and merged in member
  // order.
  std::vector<double> evaluate(Model& model, ForwardContext& ctx) override {
    const std::int64_t members = ctx.view->size(), b = ctx.view->begin();
    ctx.rows_per_member = 1;
    std::vector<double> total(static_cast<std::size_t>(members), 0.0);
    std::vector<std::int64_t> steps(static_cast<std::size_t>(members), 0);
    ObsSums gathered;
    if (normalize_) gathered.resize(members, spec_.obs_dim);
    for_member_blocks(ctx, [&](ForwardContext& block) {
      const std::int64_t first = block.member_begin - ctx.member_begin, n = block.members();
      for (std::int64_t e = 0; e < episodes_; ++e) {
        VecEnv env(kind_, n);
        for (std::int64_t j = 0; j < n; ++j)
          env.reset(j, seed_, static_cast<std::uint64_t>(ctx.view->epoch()),
                    static_cast<std::uint64_t>((b + first + j) / group_size_), static_cast<std::uint64_t>(e));
        const std::vector<double> ret =
            run_episodes(model, block, env, normalize_ ? &gathered : nullptr, first, ctx.view->epoch(), b + first);
        for (std::int64_t j = 0; j < n; ++j) {
          total[first + j] += ret[j];
          steps[first + j] += env.steps(j);
        }
      }
    });
    for (std::int64_t s : steps) env_steps_ += s;
    if (normalize_) merge_gathered(gathered);
    for (double& t : total) t /= static_cast<double>(episodes_);
    return total;
  }

  std::map<std::string, double> evaluate_unperturbed(Model& model, Backend& backend) override {
    // each thread its own block of episodes (an episode's return depends on its index alone)
    std::vector<double> ret(static_cast<std::size_t>(eval_episodes_));
    for_blocks(eval_episodes_, [&](std::int64_t first, std::int64_t count) {
      ForwardContext ctx{backend};
      VecEnv env(kind_, count);
      for (std::int64_t i = 0; i < count; ++i)
        env.reset(i, seed_ ^ 0x5EEDull, 0, static_cast<std::uint64_t>(first + i), 0);
      const std::vector<double> part = run_episodes(model, ctx, env, nullptr, 0, 0, 0);
      std::copy(part.begin(), part.end(), ret.begin() + first);
    });
    double mean = 0, sq = 0;
    for (double r : ret) mean += r;
    mean /= static_cast<double>(ret.size());
    for (double r : ret) sq += (r - mean) * (r - mean);
    return {{"mean_return", mean}, {"std_return", std::sqrt(sq / static_cast<double>(ret.size()))}};
  }

  std::map<std::string, double> epoch_figures() override { return {{"env_steps", static_cast<double>(env_steps_)}}; }

  // Merged statistics (sum, sum of squares), this epoch's pending ones, and the counters.
  std::map<std::string, Tensor> state() const override {
    const auto d = static_cast<std::int64_t>(sum_.size());
    Tensor stats(DType::f64, {4, d}), counts(DType::i64, {4});
    for (std::int64_t k = 0; k < d; ++k) {
      stats.data<double>()[k] = sum_[k];
      stats.data<double>()[d + k] = sumsq_[k];
      stats.data<double>()[2 * d + k] = pending_sum_.empty() ? 0.0 : pending_sum_[k];
      stats.data<double>()[3 * d + k] = pending_sumsq_.empty() ? 0.0 : pending_sumsq_[k];
    }
    const std::int64_t c[4] = {count_, pending_count_, env_steps_, stats_epoch_};
    std::copy_n(c, 4, counts.data<std::int64_t>());
    return {{"obs_stats", stats}, {"counts", counts}};
  }

  void load_state(const std::map<std::string, Tensor>& state) override {
    auto s = state.find("obs_stats");
    auto c = state.find("counts");
    const auto d = static_cast<std::int64_t>(sum_.size());
    check(s != state.end() && c != state.end() && s->second.dtype() == DType::f64 && s->second.numel() == 4 * d &&
              c->second.dtype() == DType::i64 && c->second.numel() == 4,
          "checkpoint lacks valid RL task state ('state/obs_stats', 'state/counts') for ", d, " observations");
    const double* v = s->second.data<double>();
    sum_.assign(v, v + d);
    sumsq_.assign(v + d, v + 2 * d);
    pending_sum_.assign(v + 2 * d, v + 3 * d);
    pending_sumsq_.assign(v + 3 * d, v + 4 * d);
    const std::int64_t* k = c->second.data<std::int64_t>();
    count_ = k[0];
    pending_count_ = k[1];
    env_steps_ = k[2];
    stats_epoch_ = k[3];
    freeze_stats();
  }

 private:
  // Per member: the sums of its observations (d each) and their number.
  struct ObsSums {
    std::vector<double> sum, sumsq;
    std::vector<std::int64_t> count;
    void resize(std::int64_t members, std::int64_t d) {
      sum.assign(static_cast<std::size_t>(members * d), 0.0);
      sumsq.assign(sum.size(), 0.0);
      count.assign(static_cast<std::size_t>(members), 0);
    }
  };

  // Steps every environment until all are done; returns each one's return. With gather, each
  // running environment's observations are added to its member's sums (environment i is member
  // gather_first + i there).
  std::vector<double> run_episodes(Model& model, ForwardContext& ctx, VecEnv& env, ObsSums* gather,
                                   std::int64_t gather_first, std::int64_t epoch, std::int64_t first_member) {
    const std::int64_t n = env.size(), d = spec_.obs_dim;
    std::vector<double> ret(static_cast<std::size_t>(n), 0.0);
    Tensor obs(DType::f32, {n, d});
    std::vector<float> actions(static_cast<std::size_t>(n * spec_.action_dim));
    for (std::int64_t t = 0; !env.all_done(); ++t) {
      env.observe(obs.data<float>());
      if (gather) accumulate(env, obs.data<float>(), *gather, gather_first);
      normalise(obs.data<float>(), n);
      Tensor out = model.forward(ctx, obs);
      choose_actions(out, env, actions, epoch, first_member, t);
      env.step(actions.data());
      for (std::int64_t i = 0; i < n; ++i) ret[i] += env.rewards()[i];
    }
    return ret;
  }

  void choose_actions(const Tensor& out, const VecEnv& env, std::vector<float>& actions, std::int64_t epoch,
                      std::int64_t first_member, std::int64_t t) const {
    const std::int64_t n = env.size(), k = out.dim(1);
    const float* o = out.data<float>();
    for (std::int64_t i = 0; i < n; ++i) {
      const float* row = o + i * k;
      if (!spec_.discrete) {
        for (std::int64_t a = 0; a < k; ++a)
          actions[i * k + a] = std::clamp(static_cast<float>(row[a] * action_scale_), spec_.action_low, spec_.action_high);
        continue;
      }
      std::int64_t best = std::max_element(row, row + k) - row;
      if (sample_) best = sample_action(row, k, epoch, first_member + i, t);
      actions[i] = static_cast<float>(best);
    }
  }

  // Softmax sampling with a uniform from the generator keyed by (seed, epoch, member, step).
  std::int64_t sample_action(const float* row, std::int64_t k, std::int64_t epoch, std::int64_t member, std::int64_t t) const {
    const float mx = *std::max_element(row, row + k);
    std::vector<double> p(static_cast<std::size_t>(k));
    double total = 0;
    for (std::int64_t a = 0; a < k; ++a) total += p[a] = std::exp(static_cast<double>(row[a] - mx));
    std::uint32_t bits = 0;
    fill_bits(noise_stream(seed_, param_id("rl.action"), static_cast<std::uint64_t>(epoch), static_cast<std::uint64_t>(member),
                           NoiseTag::init), static_cast<std::uint64_t>(t), 1, &bits);
    double u = (bits + 0.5) * 0x1p-32 * total;
    std::int64_t a = 0;
    while (a + 1 < k && u >= p[a]) u -= p[a++];
    return a;
  }

  // Adds the observations of envs still running to their members' sums.
  void accumulate(const VecEnv& env, const float* obs, ObsSums& sums, std::int64_t first) const {
    const std::int64_t d = spec_.obs_dim;
    for (std::int64_t i = 0; i < env.size(); ++i) {
      if (env.done(i)) continue;
      const std::size_t at = static_cast<std::size_t>((first + i) * d);
      for (std::int64_t k = 0; k < d; ++k) {
        const double v = obs[i * d + k];
        sums.sum[at + k] += v;
        sums.sumsq[at + k] += v * v;
      }
      ++sums.count[static_cast<std::size_t>(first + i)];
    }
  }

  // The members' sums into this epoch's pending ones, in member order.
  void merge_gathered(const ObsSums& sums) {
    const std::int64_t d = spec_.obs_dim;
    if (pending_sum_.empty()) {
      pending_sum_.assign(static_cast<std::size_t>(d), 0.0);
      pending_sumsq_.assign(static_cast<std::size_t>(d), 0.0);
    }
    for (std::size_t i = 0; i < sums.count.size(); ++i) {
      for (std::int64_t k = 0; k < d; ++k) {
        pending_sum_[static_cast<std::size_t>(k)] += sums.sum[i * d + k];
        pending_sumsq_[static_cast<std::size_t>(k)] += sums.sumsq[i * d + k];
      }
      pending_count_ += sums.count[i];
    }
  }

  void merge_pending() {
    for (std::size_t k = 0; k < pending_sum_.size(); ++k) {
      sum_[k] += pending_sum_[k];
      sumsq_[k] += pending_sumsq_[k];
    }
    count_ += pending_count_;
    pending_count_ = 0;
    std::fill(pending_sum_.begin(), pending_sum_.end(), 0.0);
    std::fill(pending_sumsq_.begin(), pending_sumsq_.end(), 0.0);
  }

  void freeze_stats() {
    const auto d = sum_.size();
    mean_.assign(d, 0.0f);
    inv_std_.assign(d, 1.0f);
    if (!normalize_ || count_ < 2) return;
    for (std::size_t k = 0; k < d; ++k) {
      const double m = sum_[k] / static_cast<double>(count_);
      const double var = std::max(sumsq_[k] / static_cast<double>(count_) - m * m, 0.0);
      mean_[k] = static_cast<float>(m);
      inv_std_[k] = static_cast<float>(1.0 / std::sqrt(var + 1e-8));
    }
  }

  // obs = clip((obs - mean) / std, -5, 5) with the frozen statistics.
  void normalise(float* obs, std::int64_t n) const {
    if (!normalize_) return;
    const std::int64_t d = spec_.obs_dim;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < d; ++k)
        obs[i * d + k] = std::clamp((obs[i * d + k] - mean_[k]) * inv_std_[k], -5.0f, 5.0f);
  }

  EnvKind kind_;
  EnvSpec spec_;
  std::uint64_t seed_;
  std::int64_t episodes_ = 1, eval_episodes_ = 100, group_size_ = 2;
  bool sample_ = false, normalize_ = false;
  double action_scale_ = 1.0;
  std::int64_t env_steps_ = 0;
  std::int64_t count_ = 0, pending_count_ = 0, stats_epoch_ = 0;
  std::vector<double> sum_, sumsq_, pending_sum_, pending_sumsq_;
  std::vector<float> mean_, inv_std_;
};

}  // namespace

std::unique_ptr<Task> make_rl_task(const KindTable& cfg, std::uint64_t seed) { return std::make_unique<RlTask>(cfg, seed); }

}  // namespace eggroll
