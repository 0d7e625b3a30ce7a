// Run-folder files written line by line or all at once: metrics.jsonl (one JSON object per
// line) and atomic_write_file, the crash-safe writer that config.toml and checkpoints go through.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace eggroll {

// Writes `path` so that it holds either its old content or all of `bytes`, never a part:
// writes path + ".tmp", fsyncs it, renames it over `path` and fsyncs the directory. On failure
// the temporary file is removed and an Error with the system's reason is thrown.
void atomic_write_file(const std::string& path, const std::string& bytes);
// The same for content in pieces (written one after another), to avoid copying large buffers.
void atomic_write_file(const std::string& path, const std::vector<std::string_view>& pieces);

// Appends one JSON object per line to a metrics file (created if missing), each line handed to
// the operating system as soon as it is written.
class MetricsWriter {
 public:
  explicit MetricsWriter(std::string path);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  MetricsWriter(MetricsWriter&& other) noexcept;
  MetricsWriter& operator=(MetricsWriter&& other) noexcept;

  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// Keeps only the lines whose "epoch" is <= last_epoch (lines that do not parse as a JSON object
// with an integer "epoch" are dropped), rewriting the file atomically. A missing file is left
// missing. Call it before opening a MetricsWriter on the file: the rewrite replaces the file, and
// a writer opened earlier would go on appending to the old one.
void truncate_metrics(const std::string& path, std::int64_t last_epoch);

// Every record of a metrics file, blank lines skipped; an invalid line is an Error naming it.
std::vector<nlohmann::json> read_metrics(const std::string& path);

}  // namespace eggroll
