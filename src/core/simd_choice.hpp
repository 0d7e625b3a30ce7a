// The run-time SIMD level of one kernel family (internal): scalar, avx2, the family's AVX-512
// level or, for a family that has one, a level above it (the int8 kernels' AMX tiles), detected
// once from the CPU, forced by run.simd (tests, resumes), read on every call.
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "eggroll/core/error.hpp"

namespace eggroll {

class SimdChoice {
 public:
  enum Level { scalar = 0, avx2 = 1, avx512 = 2, above_avx512 = 3 };

  // family names the kernels in messages; avx512_name is the AVX-512 level's name ("avx512", or
  // "avx512_vnni" for the int8 kernels) and top_name the level above it (null: none); best is the
  // highest level this machine and build run.
  SimdChoice(const char* family, const char* avx512_name, Level best, const char* top_name = nullptr)
      : family_(family), names_{"scalar", "avx2", avx512_name, top_name}, best_(best), level_(best) {}

  Level level() const { return static_cast<Level>(level_.load(std::memory_order_relaxed)); }
  // The levels this machine runs, lowest first (what set accepts, besides "auto").
  std::vector<std::string> levels() const { return {names_, names_ + best_ + 1}; }
  const char* name() const { return names_[level()]; }

  // "auto" (the detected level), "scalar", "avx2", and for the top level both "avx512" and the
  // family's own name, as run.simd spells them; a level above the detected one is an error.
  void set(const char* name) {
    std::string want = name != nullptr ? name : "";
    if (want == "auto") want = names_[best_];
    if (want == "avx512" || want == "avx512_vnni") want = names_[avx512];
    for (int l = 0; l <= best_; ++l)
      if (names_[l] != nullptr && want == names_[l]) {
        level_.store(l, std::memory_order_relaxed);
        return;
      }
    throw_error(family_, " SIMD level '", want, "' is not available: this machine runs up to '", names_[best_],
                "'; choose one of auto, scalar, avx2, ", names_[avx512],
                names_[above_avx512] != nullptr ? std::string(", ") + names_[above_avx512] : std::string(), " up to that");
  }

 private:
  const char* family_;
  const char* names_[4];
  int best_;
  std::atomic<int> level_;
};

}  // namespace eggroll
