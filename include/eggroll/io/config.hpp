// Run configuration: the canonical TOML keys of DESIGN.md, validated, with defaults resolved.
// [run], [es], [optim] and [dist] are typed structs; [model] and [task] are kind-specific tables
// validated against the schema that the model or task kind registers (KindSchema).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace eggroll {

struct RunConfig {
  std::uint64_t seed = 0;
  std::int64_t epochs = 100;
  int threads = 0;                  // 0 = all hardware threads
  std::int64_t checkpoint_every = 0;   // epochs; 0 = only at the end
  int keep_checkpoints = 3;
  std::int64_t eval_every = 10;     // epochs; 0 = only at the end
  int max_bad_epochs = 5;           // stop after this many consecutive epochs with no finite score
  std::string simd = "auto";        // auto | avx512 | avx2 | scalar
};

struct EsConfig {
  std::string noiser = "eggroll";   // eggroll | open_es | eggroll_sign | eggroll_baseline | sparse | noop | q_eggroll
  std::int64_t population = 256;
  int rank = 1;
  double sigma = 0.05;
  std::int64_t noise_reuse = 1;     // >= 1, or 0 together with fixed_noise = true
  bool fixed_noise = false;
  bool antithetic = true;
  std::string shaping = "zscore";   // zscore | group_zscore | centered_rank | antithetic_sign | raw
  std::int64_t group_size = 2;      // group_zscore blocks, eggroll_baseline groups, task streams
  std::string noise_source = "generator";  // generator | table
  int table_log2_size = 24;         // 20..30
  bool freeze_nonmatrix = false;
  std::int64_t memory_budget = std::int64_t{1} << 30;  // bytes for per-member noise (factors, open_es chunks)
  int sigma_shift = 4;              // int8
  int alpha = 4;                    // int8: a in alpha_t = 1 / ((2^a - 1) t / t_decay + 1)
  std::int64_t alpha_decay_epochs = 1000;  // int8: t_decay
};

struct OptimConfig {
  std::string name = "sgd";         // sgd | adam | adamw
  double lr = 0.1;
  double momentum = 0.0;
  bool nesterov = false;
  std::vector<double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  std::string lr_schedule = "constant";     // constant | linear | cosine | exponential
  double lr_end = 0.0;                      // final lr (linear, cosine) or per-epoch factor (exponential)
  std::string sigma_schedule = "constant";
  double sigma_end = 0.0;
  std::int64_t schedule_epochs = 0;         // horizon; 0 = run.epochs at the start of the run
  std::int64_t warmup_epochs = 0;
  double clip_norm = 0.0;                   // 0 = no clipping
};

struct DistConfig {
  std::int64_t check_every = 0;
};

// A value of a kind-specific key ([model] or [task]).
using ConfigValue = std::variant<bool, std::int64_t, double, std::string, std::vector<std::int64_t>>;

// A resolved [model] or [task] table: kind plus every key of that kind's schema, defaults filled.
struct KindTable {
  std::string kind;
  std::map<std::string, ConfigValue> values;

  bool get_bool(const std::string& key) const;
  std::int64_t get_int(const std::string& key) const;
  double get_double(const std::string& key) const;  // also accepts an integer value
  const std::string& get_string(const std::string& key) const;
  const std::vector<std::int64_t>& get_ints(const std::string& key) const;
};

// Schema of one key of a kind-specific table.
struct KeySpec {
  std::string name;
  ConfigValue default_value;        // its alternative fixes the type
  std::string help;                 // one line, used in error messages and docs
  std::optional<double> min;        // inclusive bounds for numbers (and for each list element)
  std::optional<double> max;
  std::vector<std::string> choices; // allowed strings, if not empty
};
struct KindSchema {
  std::string section;              // "model" or "task"
  std::string kind;
  std::vector<KeySpec> keys;
};

struct Config {
  RunConfig run;
  EsConfig es;
  OptimConfig optim;
  DistConfig dist;
  KindTable model;
  KindTable task;
};

// Registry of the model and task kinds that exist (filled by the model and task factories).
void register_kind_schema(KindSchema schema);
const KindSchema* find_kind_schema(const std::string& section, const std::string& kind);
std::vector<std::string> kind_names(const std::string& section);

// Parses TOML text (source names the file in messages), applies overrides "section.key=value"
// (the value parsed as a TOML value, or as a bare string when it is not one), fills defaults and
// validates every key: an unknown key, a wrong type or an out-of-range value throws an Error
// that names the key, the value and what is allowed.
Config parse_config(const std::string& toml_text, const std::string& source,
                    const std::vector<std::string>& overrides = {});
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// The fully resolved config as TOML text (every key, defaults included); parse_config of the
// result gives back an equal Config.
std::string config_to_toml(const Config& config);

// Keys ("section.key") whose values differ between a and b.
std::vector<std::string> config_diff(const Config& a, const Config& b);

}  // namespace eggroll
