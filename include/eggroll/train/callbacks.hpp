// The standard Trainer callbacks: a progress line, metrics.jsonl, and rotating checkpoints.
#pragma once
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "eggroll/io/checkpoint_dir.hpp"
#include "eggroll/io/metrics.hpp"
#include "eggroll/train/trainer.hpp"

namespace eggroll {

// The metrics record of an epoch (DESIGN.md "CLI and files").
nlohmann::json epoch_record_json(const EpochRecord& r);

// One line on `out` (stderr by default): epoch/total, the main figure and its evaluation
// counterpart, members/s and ETA. On a terminal the line is redrawn in place; otherwise a plain
// line is printed at most every `interval_s` seconds, and on evaluation epochs and the last.
class ProgressCallback final : public Callback {
 public:
  explicit ProgressCallback(std::FILE* out = stderr, double interval_s = 2.0);
  void on_epoch(Trainer& trainer, const EpochRecord& record) override;
  void on_end(Trainer& trainer) override;
  static std::string format_line(const Trainer& trainer, const EpochRecord& record, double members_per_s,
                                 double eta_s);

 private:
  std::FILE* out_;
  bool tty_;
  double interval_s_;
  std::chrono::steady_clock::time_point last_print_{};
  bool printed_ = false;
  std::int64_t first_epoch_ = -1;
  std::map<std::string, double> last_eval_;
};

class MetricsCallback final : public Callback {
 public:
  explicit MetricsCallback(const std::string& path) : writer_(path) {}
  void on_epoch(Trainer& trainer, const EpochRecord& record) override;

 private:
  MetricsWriter writer_;
};

// Saves a checkpoint every run.checkpoint_every epochs and at the end (also after stop()).
class CheckpointCallback final : public Callback {
 public:
  CheckpointCallback(const std::string& dir, std::int64_t every, int keep) : dir_(dir, keep), every_(every) {}
  void on_epoch(Trainer& trainer, const EpochRecord& record) override;
  void on_end(Trainer& trainer) override;
  const std::string& last_path() const { return last_path_; }

 private:
  CheckpointDir dir_;
  std::int64_t every_;
  std::int64_t last_saved_ = -1;
  std::string last_path_;
};

}  // namespace eggroll
