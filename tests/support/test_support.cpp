// Helpers shared by the tests.
#include "support/test_support.hpp"

#include <array>
#include <atomic>
#include <cstdio>
#include <sys/wait.h>
#include <unistd.h>

#include "eggroll/model/model.hpp"
#include "eggroll/noise/noise.hpp"
#include "eggroll/task/task.hpp"

namespace eggroll::testing {

std::vector<float> random_values(std::int64_t n, std::uint64_t seed) {
  std::vector<std::uint32_t> bits(static_cast<std::size_t>(n));
  fill_bits(noise_stream(seed, 12345, 0, 0, NoiseTag::init), 0, bits.size(), bits.data());
  std::vector<float> v(bits.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(bits[i] * 0x1p-31 - 1.0);
  return v;
}

std::vector<float> random_values(std::int64_t n, std::uint64_t seed, float lo, float hi) {
  std::vector<float> v = random_values(n, seed);
  for (float& x : v) x = lo + (x + 1.0f) * 0.5f * (hi - lo);
  return v;
}

std::vector<std::string> simd_levels(Backend& be) {
  std::vector<std::string> out;
  for (const char* l : {"scalar", "avx2", "avx512"}) {
    try {
      be.set_simd(l);
      out.push_back(l);
    } catch (const std::exception&) {
    }
  }
  be.set_simd("auto");
  return out;
}

Tensor random_tensor(Shape shape, std::uint64_t seed) {
  Tensor t(DType::f32, std::move(shape));
  auto v = random_values(t.numel(), seed);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::temp_directory_path() /
          ("eggroll-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

CommandResult run_cli(const std::string& args) {
  std::string cmd = std::string(EGGROLL_CLI_PATH) + " " + args + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::string out;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

Config config_from(const std::string& toml, const std::vector<std::string>& overrides) {
  register_model_kinds();
  register_task_kinds();
  return parse_config(toml, "<test>", overrides);
}

}  // namespace eggroll::testing
