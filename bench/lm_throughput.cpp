// Member-tokens per second of the EGG language model's training epoch (forward of every member
// over T tokens + the discrete update) on the CPU backend, on the fortunes text.
//   lm_throughput [--width 256] [--layers 6] [--tokens 100] [--epochs 2] [--populations 1024,4096,16384]
// Prints one line per population and, with --json FILE, JSON records. The first epoch is a
// warm-up; the figure is the median of the others.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eggroll/backend/backend.hpp"
#include "eggroll/core/system.hpp"
#include "eggroll/model/model.hpp"
#include "eggroll/task/task.hpp"
#include "eggroll/train/trainer.hpp"
#include "lm_config.hpp"

using namespace eggroll;

namespace {

// Multiply-adds per member-token of the model (matmuls only).
double macs_per_token(std::int64_t d, std::int64_t layers) {
  return static_cast<double>(layers) * (4.0 * d * d + 8.0 * d * d) + 256.0 * d;
}

}  // namespace

int main(int argc, char** argv) {
  eggroll::retain_freed_memory();
  std::int64_t width = 256, layers = 6, tokens = 100, epochs = 2;
  std::vector<std::int64_t> populations = {1024, 4096, 16384};
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--width") width = std::stoll(v);
    else if (a == "--layers") layers = std::stoll(v);
    else if (a == "--tokens") tokens = std::stoll(v);
    else if (a == "--epochs") epochs = std::max<std::int64_t>(2, std::stoll(v));
    else if (a == "--json") json_path = v;
    else if (a == "--populations") {
      populations.clear();
      std::stringstream ss(v);
      for (std::string p; std::getline(ss, p, ',');) populations.push_back(std::stoll(p));
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  register_model_kinds();
  register_task_kinds();
  const SystemInfo sys = system_info();
  std::printf("cpu: %s, simd %s%s, %d threads; model egg width %lld x %lld layers, %lld tokens per epoch\n",
              sys.cpu_model.c_str(), sys.simd_level.c_str(), sys.avx512_vnni ? "+vnni" : "", sys.max_threads,
              static_cast<long long>(width), static_cast<long long>(layers), static_cast<long long>(tokens));
  nlohmann::json records = nlohmann::json::array();
  auto backend = make_backend(BackendKind::cpu);
  for (std::int64_t population : populations) {
    Trainer trainer(parse_config(lm_config_text(width, layers, population, tokens), "<bench>"), *backend);
    std::vector<double> seconds;
    for (std::int64_t e = 0; e < epochs; ++e) seconds.push_back(trainer.train_epoch().epoch_s);
    std::vector<double> timed(seconds.begin() + 1, seconds.end());
    std::sort(timed.begin(), timed.end());
    const double s = timed[timed.size() / 2];
    const double mtps = static_cast<double>(population * tokens) / s;
    const double gmacs = mtps * macs_per_token(width, layers) / 1e9;
    std::printf("population %6lld: epoch %.2f s, %.0f member-tokens/s, %.1f G MAC/s\n", static_cast<long long>(population),
                s, mtps, gmacs);
    std::fflush(stdout);
    records.push_back({{"suite", "lm"}, {"model", "egg"}, {"width", width}, {"layers", layers}, {"dtype", "int8"},
                       {"population", population}, {"rank", 1}, {"tokens_per_epoch", tokens}, {"epoch_s", s},
                       {"member_tokens_per_s", mtps}, {"gmacs", gmacs}, {"cpu", sys.cpu_model}, {"simd", sys.simd_level},
                       {"threads", sys.max_threads}});
  }
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) return 1;
    std::fprintf(f, "%s\n", records.dump(2).c_str());
    std::fclose(f);
  }
  return 0;
}
