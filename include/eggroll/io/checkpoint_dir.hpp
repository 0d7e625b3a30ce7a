// A folder of numbered checkpoints (epoch-00000123.safetensors): saving with rotation, listing,
// and finding the newest one that reads back intact.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "eggroll/io/safetensors.hpp"

namespace eggroll {

class CheckpointDir {
 public:
  // keep: how many checkpoint files save() leaves in the folder (>= 1).
  explicit CheckpointDir(std::string dir, int keep = 3);

  const std::string& dir() const { return dir_; }
  int keep() const { return keep_; }
  std::string path_for(std::int64_t epoch) const;  // dir/epoch-00000123.safetensors

  // Writes the checkpoint of `epoch` (creating the folder if needed), then deletes the oldest
  // others until at most `keep` remain; the file just written is never deleted. Returns its path.
  std::string save(std::int64_t epoch, const Checkpoint& ckpt);
  std::string save(std::int64_t epoch, const Checkpoint& ckpt, int keep);

  // Epochs with a checkpoint file, ascending (an absent folder has none).
  std::vector<std::int64_t> list() const;

  // The newest checkpoint that reads without error. Each newer one that fails to read is left in
  // place and reported as one line appended to *warnings (when given).
  std::optional<std::pair<std::int64_t, Checkpoint>> latest_valid(std::string* warnings = nullptr) const;

 private:
  std::string dir_;
  int keep_;
};

}  // namespace eggroll
