// Progress line, metrics records and checkpoint rotation.
#include "eggroll/train/callbacks.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace eggroll {

nlohmann::json epoch_record_json(const EpochRecord& r) {
  nlohmann::json j;
  auto num = [](double v) -> nlohmann::json { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  j["epoch"] = r.epoch;
  j["wall_s"] = r.wall_s;
  j["members_per_s"] = r.members_per_s;
  j["score_mean"] = num(r.update.score_mean);
  j["score_std"] = num(r.update.score_std);
  j["score_max"] = num(r.update.score_max);
  j["n_nonfinite"] = r.update.n_nonfinite;
  j[r.main_figure] = num(r.main_value);
  if (r.update.integer) {
    j["alpha"] = r.update.alpha;
    j["threshold"] = r.update.threshold;
    j["frac_moved"] = r.update.frac_moved;
    j["pairs_decided"] = r.update.n_pairs_decided;
  } else {
    j["lr"] = r.update.lr;
    j["sigma"] = r.update.sigma;
    j["update_norm"] = r.update.update_norm;
    j["grad_norm"] = num(r.update.grad_norm);
  }
  j["updated"] = r.update.updated;
  // An evaluation figure named like the training figure (RL's mean_return) is kept apart.
  for (auto& [k, v] : r.eval) j[k == r.main_figure ? "eval_" + k : k] = num(v);
  for (auto& [k, v] : r.extra) j[k] = num(v);
  return j;
}

static std::string duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  auto t = static_cast<long long>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", t / 60, t % 60);
  return buf;
}

static std::string rate(double v) {
  char buf[32];
  if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  else if (v >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

ProgressCallback::ProgressCallback(std::FILE* out, double interval_s)
    : out_(out), tty_(::isatty(::fileno(out)) == 1), interval_s_(interval_s) {}

std::string ProgressCallback::format_line(const Trainer& trainer, const EpochRecord& r, double members_per_s,
                                          double eta_s) {
  const auto& cfg = trainer.config();
  char buf[256];
  std::string line;
  std::snprintf(buf, sizeof buf, "epoch %lld/%lld", static_cast<long long>(r.epoch + 1),
                static_cast<long long>(cfg.run.epochs));
  line += buf;
  std::snprintf(buf, sizeof buf, " | %s %.5g", r.main_figure.c_str(), r.main_value);
  line += buf;
  if (r.update.n_nonfinite > 0) line += " | nonfinite " + std::to_string(r.update.n_nonfinite);
  line += " | " + rate(members_per_s) + " members/s | ETA " + duration(eta_s);
  return line;
}

void ProgressCallback::on_epoch(Trainer& trainer, const EpochRecord& r) {
  for (auto& [k, v] : r.eval) last_eval_[k] = v;
  if (first_epoch_ < 0) first_epoch_ = r.epoch;
  const auto now = std::chrono::steady_clock::now();
  const bool last = r.epoch + 1 >= trainer.config().run.epochs;
  const double since = std::chrono::duration<double>(now - last_print_).count();
  if (!tty_ && printed_ && since < interval_s_ && r.eval.empty() && !last) return;
  if (tty_ && printed_ && since < 0.1 && !last) return;
  last_print_ = now;
  printed_ = true;
  // Rates and ETA from the average since this session's first epoch (steadier than one epoch).
  const double per_epoch = r.wall_s / static_cast<double>(r.epoch + 1 - first_epoch_);
  const double eta = per_epoch * static_cast<double>(trainer.config().run.epochs - r.epoch - 1);
  const double members_per_s = static_cast<double>(trainer.config().es.population) / per_epoch;
  std::string line = format_line(trainer, r, members_per_s, eta);
  const std::string eval_name = trainer.task().eval_figure();
  if (!eval_name.empty() && last_eval_.count(eval_name)) {
    char buf[64];
    const std::string label = eval_name == r.main_figure ? "eval_" + eval_name : eval_name;
    std::snprintf(buf, sizeof buf, " | %s %.5g", label.c_str(), last_eval_[eval_name]);
    line.insert(line.find(" | ", line.find(r.main_figure)) , buf);
  }
  if (tty_) std::fprintf(out_, "\r\033[K%s", line.c_str());
  else std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void ProgressCallback::on_end(Trainer&) {
  if (tty_ && printed_) std::fprintf(out_, "\n");
  std::fflush(out_);
}

void MetricsCallback::on_epoch(Trainer&, const EpochRecord& r) { writer_.write(epoch_record_json(r)); }

void CheckpointCallback::on_epoch(Trainer& trainer, const EpochRecord& r) {
  const std::int64_t done = r.epoch + 1;
  if (every_ > 0 && done % every_ == 0) {
    last_path_ = dir_.save(done, trainer.checkpoint());
    last_saved_ = done;
  }
}

void CheckpointCallback::on_end(Trainer& trainer) {
  if (trainer.epoch() != last_saved_) {
    last_path_ = dir_.save(trainer.epoch(), trainer.checkpoint());
    last_saved_ = trainer.epoch();
  }
}

}  // namespace eggroll
