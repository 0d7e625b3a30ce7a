// Tests of the run-folder files: safetensors round trips and every kind of corrupt file,
// atomic writes, the rotating checkpoint folder, and metrics.jsonl.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "eggroll/core/error.hpp"
#include "eggroll/core/tensor.hpp"
#include "eggroll/io/checkpoint_dir.hpp"
#include "eggroll/io/metrics.hpp"
#include "eggroll/io/safetensors.hpp"

namespace eggroll {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = fs::temp_directory_path() /
            ("eggroll_test_io_" + std::to_string(::getpid()) + "_" + std::to_string(stamp) + "_" +
             std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an eggroll::Error";
  return "";
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Random, never-zero contents so a round trip that drops data cannot pass.
Tensor random_tensor(DType dtype, Shape shape, std::uint32_t seed) {
  Tensor t(dtype, std::move(shape));
  std::mt19937 rng(seed);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    switch (dtype) {
      case DType::f32: t.data<float>()[i] = std::uniform_real_distribution<float>(-3, 3)(rng) + 1e-3f; break;
      case DType::i8: t.data<std::int8_t>()[i] = static_cast<std::int8_t>(rng() % 255 - 127); break;
      case DType::i32: t.data<std::int32_t>()[i] = static_cast<std::int32_t>(rng()); break;
      case DType::f64: t.data<double>()[i] = std::uniform_real_distribution<double>(-3, 3)(rng) + 1e-3; break;
      case DType::i64: t.data<std::int64_t>()[i] = static_cast<std::int64_t>(rng()) * 4096 + 1; break;
    }
  }
  return t;
}

void expect_same(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.dtype(), b.dtype());
  EXPECT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.nbytes(), b.nbytes());
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
}

Checkpoint sample_checkpoint(std::uint32_t seed) {
  Checkpoint c;
  c.tensors["layer0/weight"] = random_tensor(DType::f32, {3, 5}, seed);
  c.tensors["opt/step"] = random_tensor(DType::i32, {2, 2, 2}, seed + 1);
  c.tensors["q"] = random_tensor(DType::i8, {7}, seed + 2);
  c.tensors["scalar"] = random_tensor(DType::f32, {}, seed + 3);
  c.tensors["empty"] = Tensor(DType::f32, {0, 4});
  c.metadata["epoch"] = std::to_string(seed);
  c.metadata["config"] = "[run]\nseed = 1\n\"quoted\" \\ text";
  return c;
}

// A file with the given header text (its size field computed unless given) and data bytes.
std::string raw_file(const std::string& header, const std::string& data, std::optional<std::uint64_t> size = {}) {
  std::uint64_t n = size.value_or(header.size());
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

TEST(Safetensors, RoundTripsEveryDtypeAndMetadata) {
  TempDir dir;
  Checkpoint c = sample_checkpoint(11);
  c.tensors["state/f64"] = random_tensor(DType::f64, {3, 5}, 18);
  c.tensors["state/i64"] = random_tensor(DType::i64, {4}, 19);
  write_safetensors(dir.file("a.safetensors"), c);
  Checkpoint r = read_safetensors(dir.file("a.safetensors"));
  ASSERT_EQ(r.tensors.size(), c.tensors.size());
  for (const auto& [name, t] : c.tensors) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(r.tensors.count(name));
    expect_same(t, r.tensors.at(name));
  }
  EXPECT_EQ(r.metadata, c.metadata);
  EXPECT_FALSE(fs::exists(dir.file("a.safetensors.tmp")));
}

TEST(Safetensors, FileFollowsTheFormat) {
  TempDir dir;
  Checkpoint c = sample_checkpoint(5);
  write_safetensors(dir.file("a.safetensors"), c);
  std::string bytes = read_bytes(dir.file("a.safetensors"));
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  const auto& w = header.at("layer0/weight");
  EXPECT_EQ(w.at("dtype"), "F32");
  EXPECT_EQ(w.at("shape"), nlohmann::json::array({3, 5}));
  EXPECT_EQ(header.at("q").at("dtype"), "I8");
  EXPECT_EQ(header.at("opt/step").at("dtype"), "I32");
  EXPECT_EQ(header.at("scalar").at("shape"), nlohmann::json::array());
  EXPECT_EQ(header.at("__metadata__").at("epoch"), "5");
  // Tensor bytes sit at 8 + n + begin.
  std::uint64_t begin = w.at("data_offsets")[0], end = w.at("data_offsets")[1];
  EXPECT_EQ(end - begin, 60u);
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + n + begin, c.tensors.at("layer0/weight").raw(), 60), 0);
  EXPECT_EQ(bytes.size(), 8 + n + 60 + 32 + 7 + 4 + 0);
}

TEST(Safetensors, EmptyCheckpointAndOverwrite) {
  TempDir dir;
  std::string path = dir.file("c.safetensors");
  write_safetensors(path, Checkpoint{});
  Checkpoint r = read_safetensors(path);
  EXPECT_TRUE(r.tensors.empty());
  EXPECT_TRUE(r.metadata.empty());
  Checkpoint c = sample_checkpoint(3);
  write_safetensors(path, c);
  expect_same(read_safetensors(path).tensors.at("q"), c.tensors.at("q"));
}

TEST(Safetensors, WriterRejectsWhatItCannotStore) {
  TempDir dir;
  Checkpoint c;
  c.tensors["w"] = Tensor();
  EXPECT_THAT(error_of([&] { write_safetensors(dir.file("x"), c); }), HasSubstr("tensor 'w' has no storage"));
  Checkpoint m;
  m.tensors["__metadata__"] = Tensor(DType::f32, {1});
  EXPECT_THAT(error_of([&] { write_safetensors(dir.file("x"), m); }), HasSubstr("'__metadata__' is reserved"));
  EXPECT_FALSE(fs::exists(dir.file("x")));
}

TEST(AtomicWrite, FailuresLeaveNoFiles) {
  TempDir dir;
  std::string missing = dir.file("no/such/folder/a.safetensors");
  std::string msg = error_of([&] { write_safetensors(missing, sample_checkpoint(1)); });
  EXPECT_THAT(msg, HasSubstr("cannot write '" + missing + "'"));
  EXPECT_THAT(msg, HasSubstr("No such file or directory"));
  // A rename that fails (the target is a non-empty folder) removes the temporary file.
  std::string target = dir.file("occupied");
  fs::create_directories(target + "/inside");
  msg = error_of([&] { atomic_write_file(target, std::string("hello")); });
  EXPECT_THAT(msg, HasSubstr("renaming '" + target + ".tmp' to '" + target + "' failed"));
  EXPECT_FALSE(fs::exists(target + ".tmp"));
  EXPECT_TRUE(fs::is_directory(target + "/inside"));
}

TEST(AtomicWrite, ReplacesContentWhole) {
  TempDir dir;
  std::string path = dir.file("config.toml");
  atomic_write_file(path, std::string("first version, longer than the second\n"));
  atomic_write_file(path, std::string("second\n"));
  EXPECT_EQ(read_bytes(path), "second\n");
  atomic_write_file(path, std::vector<std::string_view>{"a", "", "bc"});
  EXPECT_EQ(read_bytes(path), "abc");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(Safetensors, CorruptFilesAreReported) {
  TempDir dir;
  std::string path = dir.file("bad.safetensors");
  const std::string f32_2 = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  struct Case { std::string bytes, expected; };
  const std::vector<Case> cases = {
      {"abc", "is truncated: it has 3 bytes, fewer than the 8-byte header size"},
      {raw_file("{}", "", 1000), "is truncated: header size 1000 but only 2 bytes follow"},
      {raw_file("{}", "", std::uint64_t{1} << 40), "is corrupt: header size 1099511627776 is absurd"},
      {raw_file("{not json", ""), "is corrupt: the header is not valid JSON"},
      {raw_file("[1, 2]", ""), "is corrupt: the header is array, not a JSON object"},
      {raw_file(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", "abcd"), "is corrupt: tensor 'w' has no dtype string"},
      {raw_file(R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", "abcd"),
       "is corrupt: tensor 'w' has dtype \"F16\"; eggroll reads F32, F64, I8, I32 and I64"},
      {raw_file(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", "abcd"), "is corrupt: tensor 'w' has no shape array"},
      {raw_file(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"),
       "is corrupt: tensor 'w' has shape [-1] with a dimension that is not an integer"},
      {raw_file(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", std::string(20, 'x')),
       "is corrupt: tensor 'w' has shape (2, 3) of dtype F32 (24 bytes) but data_offsets [0,20]"},
      {raw_file(R"({"w":{"dtype":"I8","shape":[2],"data_offsets":[2,0]}})", "ab"), "is corrupt: tensor 'w' has shape (2)"},
      {raw_file(R"({"w":{"dtype":"I8","shape":[2],"data_offsets":[0]}})", "ab"), "is corrupt: tensor 'w' has no data_offsets"},
      {raw_file(R"({"w":{"dtype":"I8","shape":[2],"data_offsets":[0,2],"x":1}})", "ab"),
       "is corrupt: tensor 'w' has an unknown field 'x'"},
      {raw_file(R"({"w":3})", ""), "is corrupt: tensor 'w' is 3, not an object"},
      {raw_file(f32_2, "abcd"), "is truncated: tensor 'w' needs bytes [0, 8) of the data buffer, which has 4 bytes"},
      {raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                std::string(12, 'x')),
       "is corrupt: tensors 'a' and 'b' overlap"},
      {raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                std::string(12, 'x')),
       "is corrupt: bytes [4, 8) of the data buffer belong to no tensor"},
      {raw_file(f32_2, std::string(11, 'x')), "is corrupt: 3 bytes of trailing data after the last tensor"},
      {raw_file(R"({"__metadata__":{"epoch":3}})", ""), "is corrupt: metadata value 'epoch' is 3, not a string"},
      {raw_file(R"({"__metadata__":["a"]})", ""), "is corrupt: __metadata__ is [\"a\"], not an object of strings"},
  };
  for (const Case& c : cases) {
    write_bytes(path, c.bytes);
    EXPECT_THAT(error_of([&] { read_safetensors(path); }), HasSubstr("checkpoint '" + path + "' " + c.expected))
        << "case: " << c.expected;
  }
  EXPECT_THAT(error_of([&] { read_safetensors(dir.file("missing.safetensors")); }),
              HasSubstr("checkpoint '" + dir.file("missing.safetensors") + "' not found"));
  // A well-formed hand-written file (unpadded header) reads.
  float values[2] = {1.5f, -2.25f};
  write_bytes(path, raw_file(f32_2, std::string(reinterpret_cast<const char*>(values), 8)));
  Checkpoint r = read_safetensors(path);
  EXPECT_EQ(r.tensors.at("w").data<float>()[1], -2.25f);
}

TEST(Safetensors, EveryTruncationOfAValidFileIsAnError) {
  TempDir dir;
  write_safetensors(dir.file("good"), sample_checkpoint(9));
  std::string bytes = read_bytes(dir.file("good"));
  for (std::size_t n = 0; n < bytes.size(); n += 7) {
    write_bytes(dir.file("cut"), bytes.substr(0, n));
    EXPECT_THAT(error_of([&] { read_safetensors(dir.file("cut")); }), HasSubstr("checkpoint '" + dir.file("cut") + "' is"))
        << "cut at " << n;
  }
}

TEST(CheckpointDir, SavesRotatesAndLists) {
  TempDir dir;
  CheckpointDir ckpts((dir.path() / "run" / "checkpoints").string(), 3);
  EXPECT_TRUE(ckpts.list().empty());  // the folder does not exist yet
  EXPECT_THAT(ckpts.path_for(123), ::testing::EndsWith("/checkpoints/epoch-00000123.safetensors"));
  for (std::int64_t epoch = 1; epoch <= 5; ++epoch) ckpts.save(epoch * 10, sample_checkpoint(epoch));
  EXPECT_EQ(ckpts.list(), (std::vector<std::int64_t>{30, 40, 50}));
  EXPECT_TRUE(fs::exists(ckpts.path_for(30)));
  EXPECT_FALSE(fs::exists(ckpts.path_for(20)));
  // Other files in the folder are not checkpoints.
  for (std::string other : {"notes.txt", "epoch-00000070.safetensors.tmp", "epoch-abc.safetensors", "epoch-.safetensors"})
    write_bytes((dir.path() / "run" / "checkpoints" / other).string(), "x");
  EXPECT_EQ(ckpts.list(), (std::vector<std::int64_t>{30, 40, 50}));
  // keep given to save; the file just written stays even when it is not the newest.
  std::string path = ckpts.save(45, sample_checkpoint(45), 1);
  EXPECT_EQ(path, ckpts.path_for(45));
  EXPECT_EQ(ckpts.list(), (std::vector<std::int64_t>{45}));
  expect_same(read_safetensors(path).tensors.at("q"), sample_checkpoint(45).tensors.at("q"));
  EXPECT_THAT(error_of([&] { ckpts.save(50, sample_checkpoint(1), 0); }), HasSubstr("keep = 0: expected >= 1"));
  EXPECT_THAT(error_of([&] { CheckpointDir(dir.file("x"), 0); }), HasSubstr("keep = 0: expected >= 1"));
}

TEST(CheckpointDir, LatestValidSkipsCorruptOnesWithoutDeletingThem) {
  TempDir dir;
  CheckpointDir ckpts(dir.file("ck"), 5);
  std::string warnings;
  EXPECT_FALSE(ckpts.latest_valid(&warnings).has_value());
  EXPECT_EQ(warnings, "");
  for (std::int64_t epoch : {10, 20, 30}) ckpts.save(epoch, sample_checkpoint(static_cast<std::uint32_t>(epoch)));
  std::string newest = read_bytes(ckpts.path_for(30));
  write_bytes(ckpts.path_for(30), newest.substr(0, newest.size() - 3));
  auto found = ckpts.latest_valid(&warnings);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->first, 20);
  expect_same(found->second.tensors.at("layer0/weight"), sample_checkpoint(20).tensors.at("layer0/weight"));
  EXPECT_EQ(found->second.metadata.at("epoch"), "20");
  EXPECT_THAT(warnings, HasSubstr("skipping the checkpoint of epoch 30: checkpoint '" + ckpts.path_for(30) + "' is"));
  EXPECT_TRUE(fs::exists(ckpts.path_for(30)));
  EXPECT_EQ(ckpts.latest_valid()->first, 20);  // warnings are optional
  write_bytes(ckpts.path_for(20), "junk");
  write_bytes(ckpts.path_for(10), "");
  warnings.clear();
  EXPECT_FALSE(ckpts.latest_valid(&warnings).has_value());
  EXPECT_EQ(std::count(warnings.begin(), warnings.end(), '\n'), 3);
  EXPECT_EQ(ckpts.list(), (std::vector<std::int64_t>{10, 20, 30}));
}

TEST(Metrics, WritesAndReadsLines) {
  TempDir dir;
  std::string path = dir.file("metrics.jsonl");
  {
    MetricsWriter w(path);
    w.write({{"epoch", 1}, {"loss", 0.5}});
    w.write({{"epoch", 2}, {"loss", 0.25}, {"lr", NAN}});
  }
  MetricsWriter again(path);  // appends
  again.write({{"epoch", 3}, {"loss", 0.125}});
  EXPECT_EQ(read_bytes(path), "{\"epoch\":1,\"loss\":0.5}\n{\"epoch\":2,\"loss\":0.25,\"lr\":null}\n"
                              "{\"epoch\":3,\"loss\":0.125}\n");
  auto records = read_metrics(path);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[2]["loss"], 0.125);
  EXPECT_TRUE(records[1]["lr"].is_null());
  EXPECT_THAT(error_of([&] { again.write(nlohmann::json::array({1, 2})); }), HasSubstr("must be a JSON object"));
  EXPECT_THAT(error_of([&] { MetricsWriter(dir.file("no/such/m.jsonl")); }),
              HasSubstr("cannot open metrics file '" + dir.file("no/such/m.jsonl") + "'"));
}

TEST(Metrics, ReadSkipsBlankLinesAndNamesBadOnes) {
  TempDir dir;
  std::string path = dir.file("m.jsonl");
  write_bytes(path, "{\"epoch\":1}\n\n   \n{\"epoch\":2}\n");
  EXPECT_EQ(read_metrics(path).size(), 2u);
  write_bytes(path, "{\"epoch\":1}\n{\"epoch\":\n{\"epoch\":3}\n");
  EXPECT_THAT(error_of([&] { read_metrics(path); }),
              HasSubstr("metrics file '" + path + "' line 2 is not valid JSON"));
  EXPECT_THAT(error_of([&] { read_metrics(dir.file("none.jsonl")); }), HasSubstr("' not found"));
}

TEST(Metrics, TruncateKeepsEpochsUpToTheCheckpoint) {
  TempDir dir;
  std::string path = dir.file("m.jsonl");
  write_bytes(path, "{\"epoch\":1,\"a\":1}\n{\"epoch\":2}\n\n{broken\n{\"note\":\"no epoch\"}\n{\"epoch\":3}\n"
                    "{\"epoch\":4}\n{\"epoch\":-1}\n{\"epoch\":5,\"x\":[1,2]}\n{\"epoch\":6");
  truncate_metrics(path, 3);
  EXPECT_EQ(read_bytes(path), "{\"epoch\":1,\"a\":1}\n{\"epoch\":2}\n{\"epoch\":3}\n{\"epoch\":-1}\n");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  truncate_metrics(path, 0);
  EXPECT_EQ(read_bytes(path), "{\"epoch\":-1}\n");
  truncate_metrics(dir.file("absent.jsonl"), 3);  // no file: nothing to do
  EXPECT_FALSE(fs::exists(dir.file("absent.jsonl")));
}

}  // namespace
}  // namespace eggroll
