// The epoch loop and checkpoint assembly.
#include "eggroll/train/trainer.hpp"

#include <algorithm>
#include <cmath>

namespace eggroll {

static std::unique_ptr<Task> build_task(const Config& c) {
  register_task_kinds();
  return make_task(c.task, c.run.seed);
}

Trainer::Trainer(const Config& config, Backend& backend)
    : Trainer(config, nullptr, build_task(config), backend) {}

Trainer::Trainer(const Config& config, std::unique_ptr<Model> model, std::unique_ptr<Task> task, Backend& backend)
    : config_(config), backend_(&backend), model_(std::move(model)), task_(std::move(task)) {
  check(task_ != nullptr, "Trainer needs a task");
  if (!model_) {
    register_model_kinds();
    const std::string need = task_->required_model();
    check(need.empty() || need == config.model.kind, "task.kind = \"", task_->kind(), "\" needs model.kind = \"",
          need, "\", got \"", config.model.kind, "\"");
    model_ = make_model(config.model, task_->input_dim(), task_->output_dim(), config.run.seed);
  }
  check(model_->input_dim() == task_->input_dim() && model_->output_dim() == task_->output_dim(), "model ",
        model_->kind(), " maps ", model_->input_dim(), " -> ", model_->output_dim(), " features but task ",
        task_->kind(), " needs ", task_->input_dim(), " -> ", task_->output_dim());
  backend.set_threads(config.run.threads);
  backend.set_simd(config.run.simd);
  task_->set_population(config.es.population, config.es.group_size);
  strategy_ = std::make_unique<Strategy>(model_->params(), config.es, config.optim, config.run.seed,
                                         config.run.epochs, backend);
  start_ = std::chrono::steady_clock::now();
}

EpochRecord Trainer::train_epoch() {
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t n = strategy_->population();
  task_->begin_epoch(strategy_->epoch());
  std::vector<double> scores(static_cast<std::size_t>(n));
  const std::int64_t chunk = strategy_->chunk_members();
  std::unique_ptr<PopulationView> full;
  for (std::int64_t b = 0; b < n; b += chunk) {
    auto view = strategy_->ask(b, std::min(b + chunk, n));
    ForwardContext ctx{*backend_, view.get()};
    std::vector<double> s = task_->evaluate(*model_, ctx);
    check(static_cast<std::int64_t>(s.size()) == view->size(), "task ", task_->kind(), " returned ", s.size(),
          " scores for ", view->size(), " members");
    std::copy(s.begin(), s.end(), scores.begin() + b);
    if (chunk >= n) full = std::move(view);  // the update reuses its cached factors
  }
  EpochRecord r;
  r.update = strategy_->tell(scores, full.get());
  r.epoch = r.update.epoch;
  const auto t1 = std::chrono::steady_clock::now();
  r.epoch_s = std::chrono::duration<double>(t1 - t0).count();
  r.wall_s = std::chrono::duration<double>(t1 - start_).count();
  r.members_per_s = r.epoch_s > 0 ? static_cast<double>(n) / r.epoch_s : 0.0;
  r.main_figure = task_->main_figure();
  r.extra = task_->epoch_figures();
  r.main_value = task_->figure_from_score(r.update.score_mean);
  if (r.update.n_nonfinite == n) {
    bad_epochs_ += 1;
    check(bad_epochs_ < config_.run.max_bad_epochs, "stopping at epoch ", r.epoch, ": ", bad_epochs_,
          " consecutive epochs had no finite score (run.max_bad_epochs = ", config_.run.max_bad_epochs,
          "); the last checkpoint holds the parameters from before them");
  } else {
    bad_epochs_ = 0;
  }
  return r;
}

std::map<std::string, double> Trainer::evaluate() { return task_->evaluate_unperturbed(*model_, *backend_); }

void Trainer::run() {
  stop_ = false;
  for (auto& c : callbacks_) c->on_start(*this);
  const std::int64_t every = config_.run.eval_every;
  while (!stop_ && strategy_->epoch() < config_.run.epochs) {
    EpochRecord r = train_epoch();
    const bool last = strategy_->epoch() == config_.run.epochs;
    if (last || (every > 0 && (r.epoch + 1) % every == 0)) r.eval = evaluate();
    for (auto& c : callbacks_) c->on_epoch(*this, r);
  }
  for (auto& c : callbacks_) c->on_end(*this);
}

Checkpoint Trainer::checkpoint() const {
  Checkpoint ck;
  for (const Param& p : model_->params().all()) ck.tensors.emplace(p.name, p.value);
  for (auto& [k, v] : strategy_->state()) ck.tensors.emplace(k, v);
  for (auto& [k, v] : task_->state()) ck.tensors.emplace("state/" + k, v);
  ck.metadata["format_version"] = kCheckpointFormatVersion;
  ck.metadata["epoch"] = std::to_string(strategy_->epoch());
  ck.metadata["seed"] = std::to_string(config_.run.seed);
  ck.metadata["config"] = config_to_toml(config_);
  ck.metadata["backend"] = backend_->name();
  ck.metadata["model"] = model_->kind();
  ck.metadata["task"] = task_->kind();
  return ck;
}

void Trainer::restore(const Checkpoint& ck) {
  auto meta = [&](const std::string& k) -> std::string {
    auto it = ck.metadata.find(k);
    check(it != ck.metadata.end(), "checkpoint metadata lacks '", k, "'");
    return it->second;
  };
  check(meta("format_version") == kCheckpointFormatVersion, "checkpoint format version ", meta("format_version"),
        " is not supported (expected ", kCheckpointFormatVersion, ")");
  for (Param& p : model_->params().all()) {
    auto it = ck.tensors.find(p.name);
    check(it != ck.tensors.end(), "checkpoint has no tensor '", p.name, "': it belongs to another model (",
          meta("model"), ")");
    check(it->second.dtype() == p.value.dtype() && it->second.shape() == p.value.shape(), "checkpoint tensor '",
          p.name, "' has shape ", shape_string(it->second.shape()), " ", dtype_name(it->second.dtype()),
          ", the model expects ", shape_string(p.value.shape()), " ", dtype_name(p.value.dtype()),
          ": the checkpoint belongs to another model");
  }
  std::map<std::string, Tensor> strategy_state, task_state;
  for (auto& [k, v] : ck.tensors) {
    if (k.rfind("opt/", 0) == 0 || k.rfind("strategy/", 0) == 0) strategy_state.emplace(k, v);
    if (k.rfind("state/", 0) == 0) task_state.emplace(k.substr(6), v);
  }
  strategy_->load_state(strategy_state);
  task_->load_state(task_state);
  for (Param& p : model_->params().all()) p.value = ck.tensors.at(p.name);
}

}  // namespace eggroll
