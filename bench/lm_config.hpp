// The EGG language model's training configuration that bench/lm_throughput and `builds_ab --models
// lm` time: the q_eggroll noiser with antithetic sign shaping on the text task's corpus.
#pragma once
#include <cstdint>
#include <sstream>
#include <string>

inline std::string lm_config_text(std::int64_t width, std::int64_t layers, std::int64_t population,
                                  std::int64_t tokens, std::int64_t rank = 1, const std::string& simd = "auto") {
  std::ostringstream c;
  c << "[run]\nepochs = 1000\nsimd = \"" << simd << "\"\n"
    << "[es]\nnoiser = \"q_eggroll\"\nshaping = \"antithetic_sign\"\npopulation = " << population << "\n"
    << "rank = " << rank << "\n"
    << "[model]\nkind = \"egg\"\nwidth = " << width << "\nlayers = " << layers << "\n"
    << "[task]\nkind = \"text\"\ntokens_per_epoch = " << tokens << "\n";
  return c.str();
}
