// What the subcommands share: config loading (with the built-in default) and JSON output.
#include <cstdio>
#include <fstream>

#include "commands.hpp"
#include "eggroll/core/error.hpp"
#include "eggroll/model/model.hpp"
#include "eggroll/task/task.hpp"

namespace eggroll::cli {

const char* const kDefaultConfig = R"(# The built-in demo: an MLP learns a smooth function of 4 inputs by EGGROLL.
[run]
epochs = 400
eval_every = 20
checkpoint_every = 100

[es]
population = 256
rank = 1
sigma = 0.05

[optim]
name = "adam"
lr = 0.02

[model]
kind = "mlp"
hidden = [32, 32]
activation = "tanh"

[task]
kind = "regression"
input_dim = 4
batch_size = 64
)";

Config load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  register_model_kinds();
  register_task_kinds();
  if (path.empty()) return parse_config(kDefaultConfig, "<built-in default>", overrides);
  return load_config(path, overrides);
}

Config load_run_config_text(const std::string& text, const std::string& source) {
  register_model_kinds();
  register_task_kinds();
  return parse_config(text, source);
}

void write_json(const std::string& path, const nlohmann::json& j) {
  const std::string text = j.dump(2) + "\n";
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  std::ofstream out(path);
  check(out.good(), "cannot write JSON to '", path, "'");
  out << text;
  check(out.good(), "writing JSON to '", path, "' failed");
}

}  // namespace eggroll::cli
