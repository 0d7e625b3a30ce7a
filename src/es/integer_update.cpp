// The discrete update of integer EGGROLL (ALGORITHM.md 2.6): per int8 value, Z = sum over pairs
// of d_k times the pair's noise product, and a move of sign(Z) when |Z| reaches the threshold
// ceil(v sqrt(P' r) z_{1 - alpha_t / 2}). No optimizer state.
#include <algorithm>
#include <memory>

#include "eggroll/es/strategy.hpp"
#include "eggroll/quant/qmath.hpp"

namespace eggroll {
namespace {

// Z of a vector parameter: sum_k d_k e1_k e2_k per element, pairs in order.
void accumulate_vector(const Noiser& noiser, PopulationView& view, const Param& p, const std::vector<std::int8_t>& d,
                       std::int64_t* z) {
  const std::int64_t len = p.value.numel();
  for (std::int64_t k = view.pair_begin(); k < view.pair_end(); ++k) {
    if (d[k] == 0) continue;
    const std::int8_t* e = noiser.qvector_noise(view, p, k);
    for (std::int64_t i = 0; i < len; ++i) z[i] += d[k] * (std::int64_t{e[i]} * e[len + i]);
  }
}

// The factor blocks and d of the view's pairs with d != 0, in order.
struct Decided {
  std::vector<const std::int8_t*> blocks;
  std::vector<std::int8_t> signs;
};
Decided decided_pairs(const Noiser& noiser, PopulationView& view, const Param& p, const std::vector<std::int8_t>& d) {
  const std::vector<const std::int8_t*> all = noiser.qfactor_blocks(view, p);
  Decided out;
  for (std::int64_t k = view.pair_begin(); k < view.pair_end(); ++k) {
    if (d[k] == 0) continue;
    out.blocks.push_back(all[static_cast<std::size_t>(k - view.pair_begin())]);
    out.signs.push_back(d[k]);
  }
  return out;
}

void accumulate_matrix(const Noiser& noiser, Backend& backend, PopulationView& view, const Param& p,
                       const std::vector<std::int8_t>& d, std::int64_t* z) {
  const Decided pairs = decided_pairs(noiser, view, p, d);
  backend.qupdate_accumulate(p.rows(), p.cols(), noiser.rank(), static_cast<std::int64_t>(pairs.blocks.size()),
                             pairs.blocks.data(), pairs.signs.data(), z);
}

}  // namespace

void Strategy::tell_integer(const std::vector<double>& fitness, PopulationView* full_view, EpochUpdate& u) {
  // d_k = sign of the pair's weight sum_i f_i s_i (= 2 d for antithetic_sign).
  const std::int64_t n_pairs = noiser_->n_pairs();
  std::vector<std::int8_t> d(static_cast<std::size_t>(n_pairs), 0);
  for (std::int64_t i = 0; i < es_.population; ++i) {
    const double w = fitness[i] * noiser_->sign_of(i);
    d[noiser_->pair_of(i)] += static_cast<std::int8_t>(w > 0 ? 1 : (w < 0 ? -1 : 0));
  }
  std::int64_t decided = 0;
  for (auto& v : d) {
    v = static_cast<std::int8_t>(v > 0 ? 1 : (v < 0 ? -1 : 0));
    decided += v != 0;
  }
  const double variance = int8_noise_variance();
  u.integer = true;
  u.n_pairs_decided = decided;
  u.alpha = q::alpha_schedule(epoch_, es_.alpha, es_.alpha_decay_epochs);
  u.threshold = q::update_threshold(variance, decided, es_.rank, u.alpha);
  const std::int64_t vector_threshold = q::update_threshold(variance, decided, 1, u.alpha);
  if (decided == 0) return;

  const std::vector<Param*> live_all = live_params();
  std::int64_t moved = 0, total = 0;
  for (const Param* p : live_all) total += p->value.numel();
  // With this epoch's whole view, each matrix's sums and step in one backend op (no Z to zero,
  // write and read back where the backend applies the step as it sums); vectors, and the pairs
  // of views in chunks, through Z.
  std::vector<Param*> through_z;
  for (Param* p : live_all) {
    if (!whole_view(full_view) || !p->low_rank()) {
      through_z.push_back(p);
      continue;
    }
    const Decided pairs = decided_pairs(*noiser_, *full_view, *p, d);
    moved += backend_->qupdate_apply(p->rows(), p->cols(), noiser_->rank(),
                                     static_cast<std::int64_t>(pairs.blocks.size()), pairs.blocks.data(),
                                     pairs.signs.data(), u.threshold, p->value.data<std::int8_t>());
  }
  // Z per value, zeroed in parallel (tens of MB for the language model: one thread's memset
  // would leave the other waiting).
  std::vector<std::unique_ptr<std::int64_t[]>> z;
  for (Param* p : through_z) {
    const std::int64_t count = p->value.numel();
    std::int64_t* zk = z.emplace_back(std::make_unique_for_overwrite<std::int64_t[]>(static_cast<std::size_t>(count))).get();
#pragma omp parallel for schedule(static) if (count >= (std::int64_t{1} << 16))
    for (std::int64_t i = 0; i < count; ++i) zk[i] = 0;
  }
  if (!through_z.empty())
    for_update_views(full_view, [&](PopulationView& view) {
      for (std::size_t k = 0; k < through_z.size(); ++k) {
        if (through_z[k]->low_rank())
          accumulate_matrix(*noiser_, *backend_, view, *through_z[k], d, z[k].get());
        else
          accumulate_vector(*noiser_, view, *through_z[k], d, z[k].get());
      }
    });
  for (std::size_t k = 0; k < through_z.size(); ++k) {
    // Each value moves on its own, so the threads' split changes nothing.
    moved += backend_->qapply_moves(through_z[k]->value.numel(), z[k].get(),
                                    through_z[k]->low_rank() ? u.threshold : vector_threshold,
                                    through_z[k]->value.data<std::int8_t>());
  }
  u.frac_moved = total > 0 ? static_cast<double>(moved) / static_cast<double>(total) : 0.0;
  u.updated = true;
}

}  // namespace eggroll
