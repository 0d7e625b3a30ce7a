// Trainer: the epoch loop (evaluate members in chunks -> shape -> update -> callbacks), and
// checkpoints that hold everything the next epoch reads (DESIGN.md contract 4).
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "eggroll/backend/backend.hpp"
#include "eggroll/es/strategy.hpp"
#include "eggroll/io/config.hpp"
#include "eggroll/io/safetensors.hpp"
#include "eggroll/model/model.hpp"
#include "eggroll/task/task.hpp"

namespace eggroll {

struct EpochRecord {
  std::int64_t epoch = 0;            // the epoch just trained (0-based)
  double wall_s = 0;                 // seconds since the run (or resume) started
  double epoch_s = 0;
  double members_per_s = 0;
  EpochUpdate update;
  std::string main_figure;           // e.g. "loss"
  double main_value = 0;             // the task's figure for the members' mean score
  std::map<std::string, double> eval;  // unperturbed evaluation figures (eval epochs only)
  std::map<std::string, double> extra; // the task's epoch_figures (diagnostics)
};

class Trainer;

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_start(Trainer& trainer) {}
  virtual void on_epoch(Trainer& trainer, const EpochRecord& record) {}
  virtual void on_end(Trainer& trainer) {}
};

class Trainer {
 public:
  // Builds the model and task that the config names.
  Trainer(const Config& config, Backend& backend);
  Trainer(const Config& config, std::unique_ptr<Model> model, std::unique_ptr<Task> task, Backend& backend);

  const Config& config() const { return config_; }
  Model& model() { return *model_; }
  Task& task() { return *task_; }
  Strategy& strategy() { return *strategy_; }
  std::int64_t epoch() const { return strategy_->epoch(); }

  void add_callback(std::unique_ptr<Callback> callback) { callbacks_.push_back(std::move(callback)); }
  // Trains until run.epochs (or stop()), calling the callbacks.
  void run();
  // One epoch without callbacks.
  EpochRecord train_epoch();
  // Figures of the unperturbed model.
  std::map<std::string, double> evaluate();
  void stop() { stop_ = true; }

  // Parameters by name, "opt/..." and "strategy/epoch", "state/..." (task), and metadata.
  Checkpoint checkpoint() const;
  void restore(const Checkpoint& checkpoint);

 private:
  Config config_;
  Backend* backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Task> task_;
  std::unique_ptr<Strategy> strategy_;
  std::vector<std::unique_ptr<Callback>> callbacks_;
  std::chrono::steady_clock::time_point start_;
  int bad_epochs_ = 0;
  bool stop_ = false;
};

inline constexpr const char* kCheckpointFormatVersion = "1";

}  // namespace eggroll
