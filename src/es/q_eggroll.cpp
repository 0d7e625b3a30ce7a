// q_eggroll: integer EGGROLL (ALGORITHM.md 2.2-2.3). int8 weights, rank-r int8 factors shared by
// the two members of a pair, and the perturbation added inside the int32 accumulator.
#include <algorithm>

#include "eggroll/es/noiser.hpp"
#include "eggroll/quant/qmath.hpp"

namespace eggroll {
namespace {

class QEggroll final : public Noiser {
 public:
  QEggroll(const EsConfig& es, std::uint64_t seed) : Noiser(es, seed) {
    check(es.antithetic, "es.noiser = \"q_eggroll\" needs es.antithetic = true (pairs share noise with opposite signs)");
    check(es.sigma_shift >= 0 && es.sigma_shift <= 7, "es.sigma_shift = ", es.sigma_shift, ": expected 0..7");
  }
  std::string name() const override { return "q_eggroll"; }
  bool integer() const override { return true; }

  void qmatmul(ForwardContext& ctx, const Param& w, const std::int8_t* x, std::int8_t* y,
               const QAddend& add) const override {
    std::vector<const std::int8_t*> blocks(static_cast<std::size_t>(ctx.members()), nullptr);
    std::vector<std::int8_t> signs = member_signs(ctx, w);
    if (w.perturbed()) blocks = qmember_blocks(ctx, w);
    ctx.backend.qmm(ctx.batch(), w.rows(), w.cols(), x, w.value.data<std::int8_t>(),
                    {w.rows(), w.cols(), rank_, blocks.data(), signs.data(), qshift(w)}, y, add,
                    ctx.view->qpacked(w, ctx.backend));
  }

  Tensor qvectors(PopulationView& view, const Param& v) const override {
    const std::int64_t len = v.value.numel();
    Tensor out(DType::i8, {view.size(), len});
    const std::int8_t* base = v.value.data<std::int8_t>();
    std::int8_t* o = out.data<std::int8_t>();
    const int shift = qshift(v);
    for (std::int64_t j = 0; j < view.size(); ++j) {
      const std::int64_t i = view.begin() + j;
      std::int8_t* oj = o + j * len;
      if (!v.perturbed()) {
        std::copy_n(base, len, oj);
        continue;
      }
      const std::int8_t* e = qvector_noise(view, v, pair_of(i));  // e1 (len), then e2 (len)
      const std::int64_t s = sign_of(i) > 0 ? 1 : -1;
      for (std::int64_t k = 0; k < len; ++k) {
        const std::int64_t p = std::int64_t{e[k]} * e[len + k];
        oj[k] = static_cast<std::int8_t>(q::clip8(base[k] + s * (p >> shift)));
      }
    }
    return out;
  }

  void qembedding(ForwardContext& ctx, const Param& w, const std::int32_t* tokens, std::int8_t* y) const override {
    std::vector<const std::int8_t*> blocks(static_cast<std::size_t>(ctx.members()), nullptr);
    std::vector<std::int8_t> signs = member_signs(ctx, w);
    if (w.perturbed()) blocks = qmember_blocks(ctx, w);
    ctx.backend.qembedding(ctx.batch(), w.rows(), w.cols(), tokens, w.value.data<std::int8_t>(),
                           {w.rows(), w.cols(), rank_, blocks.data(), signs.data(), qshift(w)}, y);
  }

  std::vector<double> shape(const std::vector<double>& scores, Shaping shaping, std::int64_t group_size) const override {
    check(shaping == Shaping::antithetic_sign, "es.noiser = \"q_eggroll\" needs es.shaping = \"antithetic_sign\" ",
          "(the discrete update reads one sign per pair), got \"", shaping_name(shaping), "\"");
    return Noiser::shape(scores, shaping, group_size);
  }

  std::int64_t bytes_per_pair(const ParamStore& params) const override {
    std::int64_t n = 0;
    for (const Param& p : params.all())
      if (p.perturbed())  // factor blocks from the int8 noise table are read in place, not held
        n += p.low_rank() ? (int8_table() != nullptr ? 0 : rank_ * (p.rows() + p.cols())) : 2 * p.value.numel();
    return n;
  }

 private:
  std::vector<std::int8_t> member_signs(const ForwardContext& ctx, const Param& w) const {
    std::vector<std::int8_t> signs(static_cast<std::size_t>(ctx.members()), 0);
    if (w.perturbed())
      for (std::int64_t j = 0; j < ctx.members(); ++j) signs[j] = sign_of(ctx.member(j)) > 0 ? 1 : -1;
    return signs;
  }
};

}  // namespace

std::unique_ptr<Noiser> make_q_eggroll(const EsConfig& es, std::uint64_t seed) {
  return std::make_unique<QEggroll>(es, seed);
}

}  // namespace eggroll
