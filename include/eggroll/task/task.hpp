// Task: scores every member of a population view (higher is better), evaluates the unperturbed
// model, and keeps whatever state the next epoch reads (saved under "state/" in checkpoints).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "eggroll/io/config.hpp"
#include "eggroll/model/model.hpp"

namespace eggroll {

class Task {
 public:
  virtual ~Task() = default;
  virtual std::string kind() const = 0;
  virtual std::int64_t input_dim() const = 0;
  virtual std::int64_t output_dim() const = 0;
  // The model kind this task needs, or "" for any model with the right input and output sizes.
  virtual std::string required_model() const { return ""; }

  // The main figure's name (e.g. "loss") and its value for a member's score.
  virtual std::string main_figure() const = 0;
  virtual double figure_from_score(double score) const { return -score; }

  // Called once before training with the population size and es.group_size.
  virtual void set_population(std::int64_t population, std::int64_t group_size) {}
  // Called once at the start of each epoch, before any member is evaluated.
  virtual void begin_epoch(std::int64_t epoch) {}
  // Extra per-epoch figures for metrics.jsonl (e.g. diagnostics), read after the epoch.
  virtual std::map<std::string, double> epoch_figures() { return {}; }
  // One score per member of ctx.view, in member order (ctx.rows_per_member is set by the task).
  virtual std::vector<double> evaluate(Model& model, ForwardContext& ctx) = 0;
  // Figures of the unperturbed model (e.g. {"eval_loss": ...}), printed by `eggroll eval`.
  virtual std::map<std::string, double> evaluate_unperturbed(Model& model, Backend& backend) = 0;
  // The evaluation figure shown next to the main figure ("" if none).
  virtual std::string eval_figure() const { return ""; }

  virtual std::map<std::string, Tensor> state() const { return {}; }
  virtual void load_state(const std::map<std::string, Tensor>& state) {}
};

// Registers the config schemas of the task kinds (idempotent).
void register_task_kinds();
std::unique_ptr<Task> make_task(const KindTable& task, std::uint64_t seed);

}  // namespace eggroll
