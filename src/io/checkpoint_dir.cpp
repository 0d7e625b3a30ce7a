// Numbered checkpoints in one folder: save with rotation, list, newest valid on resume.
#include "eggroll/io/checkpoint_dir.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "eggroll/core/error.hpp"

namespace eggroll {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kPrefix = "epoch-";
constexpr std::string_view kSuffix = ".safetensors";

// The epoch of a file named epoch-<digits>.safetensors; nullopt for any other name.
std::optional<std::int64_t> epoch_of(const std::string& name) {
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) || !name.ends_with(kSuffix))
    return std::nullopt;
  std::string digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(digits);
}

}  // namespace

CheckpointDir::CheckpointDir(std::string dir, int keep) : dir_(std::move(dir)), keep_(keep) {
  check(keep >= 1, "checkpoint folder '", dir_, "': keep = ", keep, ": expected >= 1 (run.keep_checkpoints)");
}

std::string CheckpointDir::path_for(std::int64_t epoch) const {
  check(epoch >= 0, "checkpoint epoch ", epoch, " is negative");
  char name[64];
  std::snprintf(name, sizeof name, "epoch-%08lld.safetensors", static_cast<long long>(epoch));
  return (fs::path(dir_) / name).string();
}

std::string CheckpointDir::save(std::int64_t epoch, const Checkpoint& ckpt) { return save(epoch, ckpt, keep_); }

std::string CheckpointDir::save(std::int64_t epoch, const Checkpoint& ckpt, int keep) {
  check(keep >= 1, "checkpoint folder '", dir_, "': keep = ", keep, ": expected >= 1 (run.keep_checkpoints)");
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw_error("cannot create checkpoint folder '", dir_, "': ", ec.message());
  std::string path = path_for(epoch);
  write_safetensors(path, ckpt);
  std::vector<std::int64_t> others = list();
  others.erase(std::remove(others.begin(), others.end(), epoch), others.end());
  // Oldest first, until `keep` files (the new one included) remain.
  std::size_t n_delete = others.size() + 1 > static_cast<std::size_t>(keep) ? others.size() + 1 - keep : 0;
  for (std::size_t i = 0; i < n_delete; ++i) {
    fs::remove(path_for(others[i]), ec);
    if (ec) throw_error("cannot delete old checkpoint '", path_for(others[i]), "': ", ec.message());
  }
  return path;
}

std::vector<std::int64_t> CheckpointDir::list() const {
  std::vector<std::int64_t> epochs;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return epochs;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec)) continue;
    if (auto epoch = epoch_of(it->path().filename().string())) epochs.push_back(*epoch);
  }
  if (ec) throw_error("cannot list checkpoint folder '", dir_, "': ", ec.message());
  std::sort(epochs.begin(), epochs.end());
  return epochs;
}

std::optional<std::pair<std::int64_t, Checkpoint>> CheckpointDir::latest_valid(std::string* warnings) const {
  std::vector<std::int64_t> epochs = list();
  for (auto it = epochs.rbegin(); it != epochs.rend(); ++it) {
    try {
      return std::make_pair(*it, read_safetensors(path_for(*it)));
    } catch (const Error& e) {
      if (warnings) *warnings += "skipping the checkpoint of epoch " + std::to_string(*it) + ": " + e.what() + "\n";
    }
  }
  return std::nullopt;
}

}  // namespace eggroll
