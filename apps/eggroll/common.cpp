// What the subcommands share: config loading (with the built-in default) and JSON output.
#include <cstdio>
#include <fstream>

#include "commands.hpp"
#include "default_config.hpp"
#include "eggroll/core/error.hpp"
#include "eggroll/model/model.hpp"
#include "eggroll/task/task.hpp"

namespace eggroll::cli {


Config load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  register_model_kinds();
  register_task_kinds();
  if (path.empty()) return parse_config(kDefaultConfigText, "<built-in default: configs/charlm_fortunes.toml>", overrides);
  return load_config(path, overrides);
}

Config load_run_config_text(const std::string& text, const std::string& source) {
  register_model_kinds();
  register_task_kinds();
  return parse_config(text, source);
}

void write_json(const std::string& path, const nlohmann::json& j) {
  // bytes that are not UTF-8 (a byte-level model may write any) become U+FFFD, not an error
  const std::string text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
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
