// The EGG byte-level language model of ALGORITHM.md 2.4: int8 weights and activations, an
// embedding, L blocks of (L1 norm -> one-gate GRU, L1 norm -> MLP d -> 4d -> d) with residual
// clips, a final L1 norm and a head to 256 logits (log2-probabilities in 1/16 bit).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "eggroll/model/model.hpp"
#include "eggroll/model/qlayers.hpp"

namespace eggroll {

struct EggSpec {
  std::int64_t width = 256;   // d
  std::int64_t layers = 6;    // L
  std::int64_t mlp_ratio = 4; // MLP hidden = mlp_ratio * d
};

class EggModel final : public Model {
 public:
  static constexpr std::int64_t kVocab = 256;
  EggModel(const EggSpec& spec, std::uint64_t seed);
  std::string kind() const override { return "egg"; }
  std::int64_t input_dim() const override { return kVocab; }
  std::int64_t output_dim() const override { return kVocab; }
  // The EGG model is stepped token by token (step); forward is not defined for it.
  Tensor forward(ForwardContext& ctx, const Tensor& x) override;

  const EggSpec& spec() const { return spec_; }
  // Per layer activation statistics (diagnostics): mean |activation|, % saturated at +-127,
  // and the entropy of the value histogram in bits.
  struct LayerStats {
    double mean_abs = 0, saturated_pct = 0, entropy_bits = 0;
  };
  // One token for every row: tokens (rows), state[l] (rows, d) int8 per layer, updated in place
  // (rows whose token is 0, a document boundary, start from h = 0). Returns logits (rows, 256).
  // With stats, fills 2 L + 1 entries: each layer's GRU state and MLP hidden, then the logits.
  Tensor step(ForwardContext& ctx, const std::vector<std::int32_t>& tokens, std::vector<Tensor>& state,
              std::vector<LayerStats>* stats = nullptr) const;

 private:
  Tensor gru(ForwardContext& ctx, std::int64_t layer, const Tensor& a, Tensor& h, const Tensor& x,
             const std::vector<std::int32_t>& tokens) const;
  EggSpec spec_;
};

// Generates n_bytes after the prompt (the model first reads token 0, then the prompt): byte t is
// drawn with p(t) proportional to 2^(l_t / (16 temperature)) using uniforms from the generator
// (seed); temperature 0 takes the most likely byte. Byte 0 (a document boundary) ends the text.
std::string egg_sample(EggModel& model, Backend& backend, const std::string& prompt, std::int64_t n_bytes,
                       double temperature, std::uint64_t seed);

}  // namespace eggroll
