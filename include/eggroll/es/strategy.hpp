// Strategy: ES with ask/tell. Owns the noiser, the fitness shaper, the optimizer, the lr and
// sigma schedules and the epoch counter; works on a ParamStore (a model's, or one built from
// the user's named shapes).
//
//   auto view = strategy.ask();            // members [0, N) of the current epoch
//   ... score every member (forward passes read the view, or member_tensor / member_factors) ...
//   EpochUpdate u = strategy.tell(scores); // shape, estimate the gradient, step; epoch += 1
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "eggroll/backend/backend.hpp"
#include "eggroll/es/noiser.hpp"
#include "eggroll/es/optimizer.hpp"
#include "eggroll/es/schedule.hpp"
#include "eggroll/es/shaping.hpp"
#include "eggroll/io/config.hpp"
#include "eggroll/model/params.hpp"

namespace eggroll {

struct EpochUpdate {
  std::int64_t epoch = 0;        // the epoch that was told
  std::int64_t n_nonfinite = 0;  // scores replaced by the worst finite score
  bool updated = false;          // false when no score was finite (or noop)
  double score_mean = 0, score_std = 0, score_max = 0;  // of the finite raw scores
  double lr = 0, sigma = 0;
  double grad_norm = 0;          // of the gradient before clipping
  double update_norm = 0;        // || parameters after - before ||
  // Integer noisers (ALGORITHM.md 2.6) instead of lr, sigma and the norms:
  bool integer = false;
  double alpha = 0;              // alpha_t: the fraction of weights expected to move under the null
  std::int64_t threshold = 0;    // |Z| threshold of the matrices (rank r)
  double frac_moved = 0;         // fraction of perturbed int8 values that moved
  std::int64_t n_pairs_decided = 0;  // pairs with d != 0 (P')
};

// A member's low-rank factors for one matrix: W_i = W + coef * A B^T.
struct MemberFactors {
  Tensor a;      // (m, r)
  Tensor b;      // (n, r)
  double coef;   // s_i sigma / sqrt(r), 0 for an unperturbed member
};

class Strategy {
 public:
  // total_epochs fixes the schedules' horizon when optim.schedule_epochs is 0.
  Strategy(ParamStore& params, const EsConfig& es, const OptimConfig& optim, std::uint64_t seed,
           std::int64_t total_epochs, Backend& backend);
  // For users' own parameters given as named shapes: 2-D shapes are matrices (low-rank noise),
  // others vectors; initial values are zero unless set through params().
  static std::unique_ptr<Strategy> for_shapes(const std::vector<std::pair<std::string, Shape>>& shapes,
                                              const EsConfig& es, const OptimConfig& optim, std::uint64_t seed,
                                              std::int64_t total_epochs, Backend& backend);

  ParamStore& params() { return *params_; }
  const Noiser& noiser() const { return *noiser_; }
  Backend& backend() { return *backend_; }
  std::int64_t epoch() const { return epoch_; }
  std::int64_t population() const { return es_.population; }
  double sigma() const;  // this epoch's
  double lr() const;

  // Members [begin, end) of the current epoch (end < 0: the whole population).
  std::unique_ptr<PopulationView> ask(std::int64_t begin = 0, std::int64_t end = -1) const;
  // Members per view that keep the view's noise within es.memory_budget (even, >= 2).
  std::int64_t chunk_members() const;

  // Member i's parameter, materialised (small problems): W_i or v_i.
  Tensor member_tensor(std::int64_t member, const std::string& name) const;
  MemberFactors member_factors(std::int64_t member, const std::string& name) const;

  // Scores of all N members (higher is better). NaN / inf scores get the worst finite score.
  EpochUpdate tell(const std::vector<double>& scores, PopulationView* full_view = nullptr);

  // Optimizer state and the epoch counter, for checkpoints ("opt/..." and "strategy/epoch").
  std::map<std::string, Tensor> state() const;
  void load_state(const std::map<std::string, Tensor>& state);

 private:
  // The discrete update of integer noisers (src/es/integer_update.cpp).
  void tell_integer(const std::vector<double>& fitness, PopulationView* full_view, EpochUpdate& u);
  std::vector<Param*> live_params();
  // Whether full_view is this epoch's whole population (its cached noise can be reused).
  bool whole_view(const PopulationView* full_view) const;
  // Calls fn on views covering the population in member order: full_view when it is whole,
  // else chunks within es.memory_budget.
  void for_update_views(PopulationView* full_view, const std::function<void(PopulationView&)>& fn);

  std::unique_ptr<ParamStore> owned_;
  ParamStore* params_;
  EsConfig es_;
  OptimConfig optim_;
  Backend* backend_;
  std::unique_ptr<Noiser> noiser_;
  std::unique_ptr<Optimizer> optimizer_;
  Shaping shaping_;
  Schedule lr_schedule_, sigma_schedule_;
  std::int64_t epoch_ = 0;
};

}  // namespace eggroll
