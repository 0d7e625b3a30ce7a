// The eggroll subcommands and what they share.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eggroll/io/config.hpp"

namespace eggroll::cli {

struct TrainArgs {
  std::string config;                  // "" = the built-in demo
  std::vector<std::string> overrides;  // --set section.key=value
  std::string run_dir;
  bool resume = false;
  std::string json;
};
int train(const TrainArgs& args);

struct EvalArgs {
  std::string target;  // run folder or checkpoint file
  std::string json;
};
int eval(const EvalArgs& args);

struct SampleArgs {
  std::string checkpoint;
  std::string prompt;
  std::int64_t bytes = 200;
  double temperature = 1.0;
  std::uint64_t seed = 0;
  std::string json;
};
int sample(const SampleArgs& args);

struct BenchArgs {
  std::string suite = "forward";  // peak | forward | update | epoch | lm | memory
  bool quick = false;
  int reps = 5;
  int threads = 0;                // 0 = OpenMP's default
  // Sweep overrides (empty = the suite's default sweep).
  std::vector<std::string> models, dtypes, noises;
  std::vector<std::int64_t> populations, ranks, rows;
  int table_log2 = 24;            // es.table_log2_size of table noise
  std::string simd = "auto";      // the kernels' SIMD level, as run.simd
  std::string json;
};
int bench(const BenchArgs& args);

int plot(const std::string& run_dir, const std::string& out, const std::string& json, bool time_axis);
int info(const std::string& json);

// Registers the model and task kinds, then loads (or, for "", parses the default) config.
Config load_run_config(const std::string& path, const std::vector<std::string>& overrides);
// Parses a config text (a checkpoint's metadata) with the built-in kinds registered.
Config load_run_config_text(const std::string& text, const std::string& source);
// Writes JSON to path ("-" = standard output).
void write_json(const std::string& path, const nlohmann::json& j);

}  // namespace eggroll::cli
