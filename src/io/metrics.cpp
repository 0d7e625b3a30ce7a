// metrics.jsonl (append one JSON object per line, truncate on resume, read back) and
// atomic_write_file, the tmp + fsync + rename writer shared by every run-folder file.
#include "eggroll/io/metrics.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "eggroll/core/error.hpp"

namespace eggroll {
namespace {

// Writes all of `data`, retrying after interrupts and short writes; false with errno set on error.
bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Makes a rename in the folder holding `path` durable.
void sync_parent_dir(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_error("wrote '", path, "' but cannot open its folder '", dir, "' to sync it: ", std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL && err != ENOTSUP)  // some filesystems cannot sync folders
    throw_error("wrote '", path, "' but syncing its folder '", dir, "' failed: ", std::strerror(err));
}

}  // namespace

void atomic_write_file(const std::string& path, const std::vector<std::string_view>& pieces) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw_error("cannot write '", path, "': creating '", tmp, "' failed: ", std::strerror(errno),
                " (check that the folder exists and is writable)");
  auto fail = [&](const std::string& step) {
    int err = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw_error("cannot write '", path, "': ", step, " failed: ", std::strerror(err));
  };
  for (std::string_view piece : pieces)
    if (!write_all(fd, piece)) fail("writing '" + tmp + "'");
  if (::fsync(fd) != 0) fail("fsync of '" + tmp + "'");
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0) fail("closing '" + tmp + "'");
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("renaming '" + tmp + "' to '" + path + "'");
  sync_parent_dir(path);
}

void atomic_write_file(const std::string& path, const std::string& bytes) {
  atomic_write_file(path, std::vector<std::string_view>{bytes});
}

MetricsWriter::MetricsWriter(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_error("cannot open metrics file '", path_, "' for appending: ", std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

MetricsWriter::MetricsWriter(MetricsWriter&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

MetricsWriter& MetricsWriter::operator=(MetricsWriter&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void MetricsWriter::write(const nlohmann::json& record) {
  check(fd_ >= 0, "metrics file '", path_, "' is not open (the writer was moved from)");
  check(record.is_object(), "metrics record for '", path_, "' must be a JSON object, got ", record.type_name());
  // Invalid UTF-8 in strings is replaced rather than failing the run; NaN and inf become null.
  std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (!write_all(fd_, line)) throw_error("cannot append to metrics file '", path_, "': ", std::strerror(errno));
}

void truncate_metrics(const std::string& path, std::int64_t last_epoch) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("cannot read metrics file '", path, "': ", std::strerror(errno));
  std::string line, kept;
  while (std::getline(in, line)) {
    nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded() || !record.is_object()) continue;
    auto it = record.find("epoch");
    if (it == record.end() || !it->is_number_integer()) continue;
    bool keep = it->is_number_unsigned()
                    ? last_epoch >= 0 && it->get<std::uint64_t>() <= static_cast<std::uint64_t>(last_epoch)
                    : it->get<std::int64_t>() <= last_epoch;
    if (keep) kept += line + "\n";
  }
  if (in.bad()) throw_error("cannot read metrics file '", path, "': ", std::strerror(errno));
  atomic_write_file(path, kept);
}

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw_error("metrics file '", path, "' not found");
    throw_error("cannot read metrics file '", path, "': ", std::strerror(errno));
  }
  std::vector<nlohmann::json> records;
  std::string line;
  for (std::int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      records.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::parse_error& e) {
      throw_error("metrics file '", path, "' line ", line_no, " is not valid JSON: ", e.what());
    }
  }
  if (in.bad()) throw_error("cannot read metrics file '", path, "': ", std::strerror(errno));
  return records;
}

}  // namespace eggroll
