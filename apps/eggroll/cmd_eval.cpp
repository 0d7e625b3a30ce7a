// eggroll eval: the unperturbed model of a run folder's newest valid checkpoint, or of a file.
#include <cstdio>
#include <filesystem>

#include "commands.hpp"
#include "eggroll/backend/backend.hpp"
#include "eggroll/io/checkpoint_dir.hpp"
#include "eggroll/model/model.hpp"
#include "eggroll/task/task.hpp"
#include "eggroll/train/trainer.hpp"

namespace fs = std::filesystem;

namespace eggroll::cli {

int eval(const EvalArgs& args) {
  check(fs::exists(args.target), "eval: '", args.target, "' does not exist (expected a run folder or a checkpoint file)");
  Checkpoint ck;
  std::string source = args.target;
  if (fs::is_directory(args.target)) {
    std::string warnings;
    auto latest = CheckpointDir((fs::path(args.target) / "checkpoints").string()).latest_valid(&warnings);
    if (!warnings.empty()) std::fprintf(stderr, "eggroll: warning: %s", warnings.c_str());
    check(latest.has_value(), "eval: run folder '", args.target, "' has no valid checkpoint in checkpoints/");
    ck = std::move(latest->second);
    source = CheckpointDir((fs::path(args.target) / "checkpoints").string()).path_for(latest->first);
  } else {
    ck = read_safetensors(args.target);
  }
  auto it = ck.metadata.find("config");
  check(it != ck.metadata.end(), "checkpoint '", source, "' has no 'config' metadata: it was not written by eggroll");
  Config cfg = load_run_config_text(it->second, source + " (metadata config)");
  auto backend = make_backend(BackendKind::cpu);
  Trainer trainer(cfg, *backend);
  trainer.restore(ck);
  auto figures = trainer.evaluate();
  nlohmann::json j = {{"checkpoint", source}, {"epoch", trainer.epoch()}};
  std::printf("epoch: %lld\n", static_cast<long long>(trainer.epoch()));
  for (auto& [k, v] : figures) {
    std::printf("%s: %.6g\n", k.c_str(), v);
    j[k] = v;
  }
  if (!args.json.empty()) write_json(args.json, j);
  return 0;
}

}  // namespace eggroll::cli
