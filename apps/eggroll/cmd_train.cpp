// eggroll train: run folders, the --resume rules of DESIGN.md, and the training loop's callbacks.
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <set>

#include "commands.hpp"
#include "default_config.hpp"
#include "eggroll/backend/backend.hpp"
#include "eggroll/io/checkpoint_dir.hpp"
#include "eggroll/io/metrics.hpp"
#include "eggroll/model/model.hpp"
#include "eggroll/task/task.hpp"
#include "eggroll/train/callbacks.hpp"

namespace fs = std::filesystem;

namespace eggroll::cli {
namespace {

// The only keys that may change when a run is resumed.
const std::set<std::string> kResumableKeys = {"run.epochs", "run.threads", "run.checkpoint_every",
                                              "run.keep_checkpoints", "run.eval_every", "run.max_bad_epochs"};

volatile std::sig_atomic_t g_interrupted = 0;
void on_signal(int) { g_interrupted = 1; }

// Stops the trainer after the epoch in which Ctrl-C (or SIGTERM) arrived; the checkpoint
// callback then saves the state.
class InterruptCallback final : public Callback {
 public:
  void on_epoch(Trainer& trainer, const EpochRecord&) override {
    if (g_interrupted) trainer.stop();
  }
};

std::string utc_stamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

bool holds_run(const fs::path& dir) {
  return fs::exists(dir / "config.toml") || fs::exists(dir / "metrics.jsonl") || fs::exists(dir / "checkpoints");
}

void check_resumable_changes(const std::vector<std::string>& changed, const std::string& what) {
  std::string bad;
  for (auto& k : changed)
    if (!kResumableKeys.count(k)) bad += (bad.empty() ? "" : ", ") + k;
  if (!bad.empty())
    throw_error(what, " changes ", bad, ", which a resumed run cannot change (only run.epochs, run.threads, ",
                "run.checkpoint_every, run.keep_checkpoints, run.eval_every and run.max_bad_epochs may change); ",
                "start a new run with another --run-dir instead");
}

// The config of a resumed run: its own config.toml, with the changes the rules allow.
Config resumed_config(const TrainArgs& args, const fs::path& dir) {
  const fs::path saved_path = dir / "config.toml";
  check(fs::exists(saved_path), "--resume: '", dir.string(), "' holds no run (", saved_path.string(),
        " is missing); train without --resume to start one");
  Config saved = load_run_config(saved_path.string(), {});
  Config cfg = saved;
  if (!args.config.empty()) {
    Config given = load_run_config(args.config, {});
    if (given.optim.schedule_epochs == 0) given.optim.schedule_epochs = saved.optim.schedule_epochs;
    check_resumable_changes(config_diff(saved, given), "config '" + args.config + "'");
    cfg = given;
  }
  for (auto& o : args.overrides) {
    const std::string key = o.substr(0, o.find('='));
    check(kResumableKeys.count(key) > 0, "--set ", o, ": ", key, " cannot change on --resume (only run.epochs, ",
          "run.threads, run.checkpoint_every, run.keep_checkpoints, run.eval_every and run.max_bad_epochs can)");
  }
  return args.overrides.empty() ? cfg : parse_config(config_to_toml(cfg), saved_path.string(), args.overrides);
}

void print_start(const Trainer& t, const std::string& dir, Backend& backend) {
  auto& c = t.config();
  std::int64_t n_params = const_cast<Trainer&>(t).model().params().numel();
  std::fprintf(stderr, "eggroll: run folder %s\n", dir.c_str());
  char update[128];
  if (c.es.noiser == "q_eggroll")
    std::snprintf(update, sizeof update, "sigma 2^-%d, discrete update alpha %d over %lld epochs", c.es.sigma_shift,
                  c.es.alpha, static_cast<long long>(c.es.alpha_decay_epochs));
  else
    std::snprintf(update, sizeof update, "sigma %g, optimizer %s lr %g", c.es.sigma, c.optim.name.c_str(), c.optim.lr);
  std::fprintf(stderr, "eggroll: task %s, model %s (%lld parameters), noiser %s rank %d, population %lld, %s, %s backend\n",
               c.task.kind.c_str(), c.model.kind.c_str(), static_cast<long long>(n_params), c.es.noiser.c_str(),
               c.es.rank, static_cast<long long>(c.es.population), update, backend.name().c_str());
}

}  // namespace

int train(const TrainArgs& args) {
  check(!args.resume || !args.run_dir.empty(), "--resume needs --run-dir DIR (the run to continue)");
  Config cfg;
  fs::path dir;
  if (args.resume) {
    dir = args.run_dir;
    cfg = resumed_config(args, dir);
  } else {
    cfg = load_run_config(args.config, args.overrides);
    if (cfg.optim.schedule_epochs == 0) cfg.optim.schedule_epochs = cfg.run.epochs;  // fixed from the start
    const std::string stem = args.config.empty() ? kDefaultConfigName : fs::path(args.config).stem().string();
    dir = args.run_dir.empty() ? fs::path("runs") / (stem + "-" + utc_stamp()) : fs::path(args.run_dir);
    check(!holds_run(dir), "'", dir.string(), "' already holds a run: add --resume to continue it, or choose ",
          "another --run-dir (nothing was changed)");
  }

  auto backend = make_backend(BackendKind::cpu);
  Trainer trainer(cfg, *backend);  // validates model, task and noiser before anything is written
  const std::string metrics_path = (dir / "metrics.jsonl").string();
  if (args.resume) {
    std::string warnings;
    auto latest = CheckpointDir((dir / "checkpoints").string()).latest_valid(&warnings);
    if (!warnings.empty()) std::fprintf(stderr, "eggroll: warning: %s", warnings.c_str());
    if (latest) {
      trainer.restore(latest->second);
      std::fprintf(stderr, "eggroll: resuming from the checkpoint of epoch %lld\n", static_cast<long long>(latest->first));
    } else {
      std::fprintf(stderr, "eggroll: no valid checkpoint in %s: starting the run from epoch 0\n", dir.c_str());
    }
    truncate_metrics(metrics_path, trainer.epoch() - 1);
  } else {
    fs::create_directories(dir);
  }
  atomic_write_file((dir / "config.toml").string(), config_to_toml(cfg));

  print_start(trainer, dir.string(), *backend);
  if (trainer.epoch() == 0) {  // where training starts from, and the task's baselines
    std::string line;
    char buf[96];
    for (auto& [k, v] : trainer.evaluate()) {
      std::snprintf(buf, sizeof buf, "%s %s %.4g", line.empty() ? "" : ",", k.c_str(), v);
      line += buf;
    }
    std::fprintf(stderr, "eggroll: at epoch 0:%s\n", line.c_str());
  }
  if (trainer.epoch() >= cfg.run.epochs) {
    std::fprintf(stderr, "eggroll: the run is complete at epoch %lld (run.epochs = %lld); raise run.epochs with "
                 "--set run.epochs=N to continue\n", static_cast<long long>(trainer.epoch()),
                 static_cast<long long>(cfg.run.epochs));
    return 0;
  }
  auto checkpoints = std::make_unique<CheckpointCallback>((dir / "checkpoints").string(), cfg.run.checkpoint_every,
                                                          cfg.run.keep_checkpoints);
  CheckpointCallback* ckpt = checkpoints.get();
  trainer.add_callback(std::make_unique<MetricsCallback>(metrics_path));
  trainer.add_callback(std::make_unique<ProgressCallback>(stderr));
  trainer.add_callback(std::make_unique<InterruptCallback>());
  trainer.add_callback(std::move(checkpoints));
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  trainer.run();

  auto figures = trainer.evaluate();
  nlohmann::json summary = {{"run_dir", dir.string()}, {"epoch", trainer.epoch()}, {"checkpoint", ckpt->last_path()},
                            {"interrupted", g_interrupted != 0}};
  std::string line;
  for (auto& [k, v] : figures) {
    summary[k] = v;
    line += " " + k + " " + std::to_string(v);
  }
  if (g_interrupted)
    std::fprintf(stderr, "eggroll: interrupted at epoch %lld; resume with: eggroll train --run-dir %s --resume\n",
                 static_cast<long long>(trainer.epoch()), dir.c_str());
  std::fprintf(stderr, "eggroll: epoch %lld:%s\neggroll: checkpoint %s\n", static_cast<long long>(trainer.epoch()),
               line.c_str(), ckpt->last_path().c_str());
  if (!args.json.empty()) write_json(args.json, summary);
  return g_interrupted ? 130 : 0;
}

}  // namespace eggroll::cli
