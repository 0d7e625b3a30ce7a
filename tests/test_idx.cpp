// The IDX reader and the MNIST split loader on small generated files, raw and gzip, well-formed
// and malformed: every malformed file gives an Error that names the file and what was wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "eggroll/core/error.hpp"
#include "eggroll/io/idx.hpp"
#include "io/decompress.hpp"
#include "support/test_support.hpp"

namespace eggroll {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// IDX bytes with any magic and dimension sizes, then `data_bytes` bytes 0, 1, 2, ...
std::string idx_bytes(std::uint32_t magic, const std::vector<std::uint32_t>& dims, std::size_t data_bytes) {
  std::string out;
  auto put = [&](std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xff);
  };
  put(magic);
  for (std::uint32_t d : dims) put(d);
  for (std::size_t k = 0; k < data_bytes; ++k) out += static_cast<char>(k % 251);
  return out;
}

std::string write_file(const testing::TempDir& dir, const std::string& name, const std::string& bytes) {
  const std::string path = (dir.path() / name).string();
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// The message of the Error that read_idx(path) throws ("" when it does not throw).
std::string read_error(const std::string& path) {
  try {
    read_idx(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

IdxArray sample_array(std::vector<std::int64_t> dims, std::uint64_t seed) {
  IdxArray a{std::move(dims), {}};
  std::int64_t n = 1;
  for (std::int64_t d : a.dims) n *= d;
  for (float v : testing::random_values(n, seed)) a.data.push_back(static_cast<std::uint8_t>((v + 1.0f) * 127.9f));
  return a;
}

TEST(Idx, RoundTripsRawAndGzipFiles) {
  testing::TempDir dir;
  const IdxArray images = sample_array({5, 3, 4}, 1), labels = sample_array({5}, 2);
  for (const char* name : {"images.idx", "images.idx.gz"}) {
    const std::string path = (dir.path() / name).string();
    write_idx(path, images);
    const IdxArray back = read_idx(path);
    EXPECT_EQ(back.dims, images.dims) << name;
    EXPECT_EQ(back.data, images.data) << name;
  }
  // The gzip file really is compressed (read back through decompression, not as raw bytes).
  std::ifstream gz((dir.path() / "images.idx.gz").string(), std::ios::binary);
  EXPECT_EQ(gz.get(), 0x1f);
  write_idx((dir.path() / "labels").string(), labels);
  EXPECT_EQ(read_idx((dir.path() / "labels").string()).data, labels.data);
}

TEST(Idx, EncodesTheStandardHeader) {
  const std::string bytes = encode_idx(IdxArray{{2, 3, 1}, {9, 8, 7, 6, 5, 4}});
  EXPECT_EQ(bytes, std::string("\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x01\x09\x08\x07\x06\x05\x04", 22));
  EXPECT_EQ(parse_idx(bytes, "mem").dims, (std::vector<std::int64_t>{2, 3, 1}));
  EXPECT_THROW(encode_idx(IdxArray{{2, 2}, {1, 2, 3}}), Error);
  EXPECT_THROW(encode_idx(IdxArray{{}, {}}), Error);
}

TEST(Idx, ReadsAnEmptyArray) {
  testing::TempDir dir;
  const IdxArray a = read_idx(write_file(dir, "empty", idx_bytes(0x00000803, {0, 28, 28}, 0)));
  EXPECT_EQ(a.dims, (std::vector<std::int64_t>{0, 28, 28}));
  EXPECT_TRUE(a.data.empty());
}

TEST(Idx, RejectsMalformedHeadersWithTheFileName) {
  testing::TempDir dir;
  struct Case {
    const char* name;
    std::string bytes;
    std::vector<const char*> says;
  };
  const std::vector<Case> cases = {
      {"wrong_magic", idx_bytes(0x12340803, {2}, 2), {"not an IDX file", "0x12340803", "0x00000801"}},
      {"png", std::string("\x89PNG\r\n\x1a\n", 8), {"not an IDX file", "0x89504e47"}},
      {"float_type", idx_bytes(0x00000D03, {1, 2, 2}, 16), {"element type 0x0d", "float32", "not supported", "0x08"}},
      {"int32_type", idx_bytes(0x00000C01, {3}, 12), {"element type 0x0c", "int32"}},
      {"no_dims", idx_bytes(0x00000800, {}, 0), {"declares 0 dimensions", "expected 1 to 8"}},
      {"too_short", std::string("\x00\x00", 2), {"shorter than the 4-byte magic"}},
      {"empty_file", std::string(), {"0 bytes"}},
      {"short_header", idx_bytes(0x00000803, {10, 28}, 0), {"is truncated", "header needs 16 bytes", "found 12"}},
  };
  for (const Case& c : cases) {
    const std::string path = write_file(dir, c.name, c.bytes);
    const std::string msg = read_error(path);
    EXPECT_THAT(msg, HasSubstr("'" + path + "'")) << c.name;
    for (const char* s : c.says) EXPECT_THAT(msg, HasSubstr(s)) << c.name;
  }
}

TEST(Idx, RejectsTruncatedAndTrailingData) {
  testing::TempDir dir;
  const std::string truncated = write_file(dir, "truncated", idx_bytes(0x00000803, {3, 4, 5}, 59));
  EXPECT_THAT(read_error(truncated),
              HasSubstr("'" + truncated + "' is truncated: expected 60 bytes of data for dimensions (3, 4, 5), found 59"));
  const std::string trailing = write_file(dir, "trailing", idx_bytes(0x00000801, {7}, 9));
  EXPECT_THAT(read_error(trailing), HasSubstr("'" + trailing + "' has trailing bytes: expected 7 bytes of data"));
  EXPECT_THAT(read_error(trailing), HasSubstr("found 9"));
  // The same checks apply after decompression.
  const std::string gz = write_file(dir, "truncated.gz", detail::gzip_compress(idx_bytes(0x00000801, {100}, 40), 6));
  EXPECT_THAT(read_error(gz), HasSubstr("'" + gz + "' is truncated: expected 100 bytes of data for dimensions (100), found 40"));
}

TEST(Idx, RejectsACutGzipStreamAndAMissingFile) {
  testing::TempDir dir;
  const std::string full = detail::gzip_compress(idx_bytes(0x00000803, {20, 28, 28}, 20 * 28 * 28), 6);
  const std::string cut = write_file(dir, "cut.gz", full.substr(0, full.size() / 2));
  EXPECT_THAT(read_error(cut), AllOf(HasSubstr(cut), HasSubstr("corrupt or truncated")));
  const std::string missing = (dir.path() / "nope-idx1-ubyte").string();
  EXPECT_THAT(read_error(missing), AllOf(HasSubstr("cannot open IDX file '" + missing + "'"), HasSubstr("No such file")));
}

// A small MNIST-format folder: n images of 4x3 pixels and n labels, per split.
void write_split(const testing::TempDir& dir, const std::string& prefix, std::int64_t n, bool gz) {
  const std::string ext = gz ? ".gz" : "";
  IdxArray images = sample_array({n, 4, 3}, static_cast<std::uint64_t>(n));
  IdxArray labels{{n}, {}};
  for (std::int64_t i = 0; i < n; ++i) labels.data.push_back(static_cast<std::uint8_t>((i * 7) % 10));
  write_idx((dir.path() / (prefix + "-images-idx3-ubyte" + ext)).string(), images);
  write_idx((dir.path() / (prefix + "-labels-idx1-ubyte" + ext)).string(), labels);
}

std::string load_error(const std::string& folder, bool train) {
  try {
    load_mnist_split(folder, train);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MnistSplit, LoadsRawAndGzipSplits) {
  testing::TempDir dir;
  write_split(dir, "train", 12, true);
  write_split(dir, "t10k", 5, false);
  const ImageDataset train = load_mnist_split(dir.str(), true), test = load_mnist_split(dir.str(), false);
  EXPECT_EQ(train.n, 12);
  EXPECT_EQ(test.n, 5);
  EXPECT_EQ(train.rows, 4);
  EXPECT_EQ(train.cols, 3);
  EXPECT_EQ(train.pixels, sample_array({12, 4, 3}, 12).data);
  ASSERT_EQ(test.labels.size(), 5u);
  EXPECT_EQ(test.labels[3], 1);  // 3 * 7 % 10
}

TEST(MnistSplit, PrefersTheRawFileOverTheGzipOne) {
  testing::TempDir dir;
  write_split(dir, "train", 6, true);
  write_split(dir, "train", 8, false);
  EXPECT_EQ(load_mnist_split(dir.str(), true).n, 8);
}

TEST(MnistSplit, RejectsMismatchedCountsAndBadLabels) {
  testing::TempDir dir;
  write_split(dir, "train", 10, false);
  write_idx((dir.path() / "train-labels-idx1-ubyte").string(), IdxArray{{9}, std::vector<std::uint8_t>(9, 1)});
  EXPECT_THAT(load_error(dir.str(), true), AllOf(HasSubstr("train-images-idx3-ubyte' holds 10 images"),
                                                HasSubstr("train-labels-idx1-ubyte' holds 9 labels")));
  std::vector<std::uint8_t> labels(10, 3);
  labels[6] = 10;
  write_idx((dir.path() / "train-labels-idx1-ubyte").string(), IdxArray{{10}, labels});
  EXPECT_THAT(load_error(dir.str(), true),
              AllOf(HasSubstr("train-labels-idx1-ubyte' has label 10 at index 6"), HasSubstr("expected 0 to 9")));
}

TEST(MnistSplit, RejectsSwappedFilesByTheirDimensions) {
  testing::TempDir dir;
  write_split(dir, "t10k", 4, false);
  write_idx((dir.path() / "t10k-images-idx3-ubyte").string(), IdxArray{{4}, {1, 2, 3, 4}});
  EXPECT_THAT(load_error(dir.str(), false),
              AllOf(HasSubstr("t10k-images-idx3-ubyte' holds a 1-D array (4)"), HasSubstr("expected images: a 3-D array")));
}

TEST(MnistSplit, MissingFolderOrFileSaysWhatWasLookedFor) {
  testing::TempDir dir;
  const std::string nowhere = (dir.path() / "nowhere").string();
  EXPECT_THAT(load_error(nowhere, true), AllOf(HasSubstr("'" + nowhere + "' does not exist"), HasSubstr("task.path")));
  write_split(dir, "train", 3, false);
  EXPECT_THAT(load_error(dir.str(), false),
              AllOf(HasSubstr("'t10k-images-idx3-ubyte' (or 't10k-images-idx3-ubyte.gz') is missing"),
                    HasSubstr("dataset-fashion-mnist")));
  std::filesystem::remove(dir.path() / "train-labels-idx1-ubyte");
  EXPECT_THAT(load_error(dir.str(), true), HasSubstr("'train-labels-idx1-ubyte' (or 'train-labels-idx1-ubyte.gz') is missing"));
}

}  // namespace
}  // namespace eggroll
