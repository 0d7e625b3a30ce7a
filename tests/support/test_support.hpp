// Helpers shared by the tests: random tensors, temporary folders, running the CLI.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "eggroll/backend/backend.hpp"
#include "eggroll/core/tensor.hpp"
#include "eggroll/io/config.hpp"

namespace eggroll::testing {

// Uniform values in [-1, 1) from a fixed seed (never all zeros).
std::vector<float> random_values(std::int64_t n, std::uint64_t seed);
// The same values mapped to [lo, hi).
std::vector<float> random_values(std::int64_t n, std::uint64_t seed, float lo, float hi);
Tensor random_tensor(Shape shape, std::uint64_t seed);

// A fresh empty folder under the system temp folder, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};
// Runs the eggroll CLI with the given arguments (a shell command line fragment).
CommandResult run_cli(const std::string& args);

// The SIMD levels (run.simd spellings) a backend runs on this machine, lowest first; the float
// kernels have a path per level, and each is checked. Leaves the backend at its best level.
std::vector<std::string> simd_levels(Backend& be);

// A config from TOML text, with the built-in model and task kinds registered.
Config config_from(const std::string& toml, const std::vector<std::string>& overrides = {});

}  // namespace eggroll::testing
