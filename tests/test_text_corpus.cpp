// Tests of the text corpus (paths, exclusions, compression, document splitting, the train /
// validation split, token stream, errors) and of the unigram / bigram / gzip / xz baselines.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "eggroll/core/error.hpp"
#include "eggroll/io/text_baselines.hpp"
#include "eggroll/io/text_corpus.hpp"
#include "io/decompress.hpp"

namespace eggroll {
namespace {
namespace fs = std::filesystem;

// A fresh folder under the system temp folder, removed at the end of the test.
class Folder {
 public:
  Folder() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("eggroll_text_corpus_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~Folder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  // Writes `bytes` to path()/name (creating subfolders) and returns the full path.
  std::string write(const std::string& name, const std::string& bytes) const {
    fs::path p = path_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

CorpusSpec spec_of(std::vector<std::string> paths, std::string separator = "%", double val_fraction = 0.0) {
  CorpusSpec spec;
  spec.paths = std::move(paths);
  spec.separator = std::move(separator);
  spec.val_fraction = val_fraction;
  return spec;
}

// The Error message `f` throws; a test failure when it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an eggroll::Error";
  return "";
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

std::string bytes_of(const std::vector<unsigned char>& v) { return std::string(v.begin(), v.end()); }

TEST(TextCorpus, SeparatorLinesSplitDocumentsWithAndWithoutFinalSeparator) {
  Folder dir;
  std::string a = dir.write("a", "one\n%\ntwo\n  lines\n%\n");           // ends with "%"
  std::string b = dir.write("b", "%\n \t\n%\nthree\n%\nfour\nmore");      // blank docs, no final "%"
  std::string c = dir.write("c", "five\r\n%\r\n\r\nsix\r\n");             // CRLF lines
  TextCorpus corpus = load_text_corpus(spec_of({a, b, c}));
  std::vector<std::string> expected = {"one", "two\n  lines", "three", "four\nmore", "five", "\r\nsix"};
  EXPECT_EQ(corpus.train_docs, expected);
  EXPECT_TRUE(corpus.val_docs.empty());
  EXPECT_EQ(corpus.n_files, 3);
  EXPECT_EQ(corpus.train_bytes(), 3 + 11 + 5 + 9 + 4 + 5);
  // A "%" inside a line, or with other text on the line, is not a separator.
  std::string d = dir.write("d", "100% sure\n%%\n x%\n");
  EXPECT_EQ(load_text_corpus(spec_of({d})).train_docs, std::vector<std::string>{"100% sure\n%%\n x%"});
  // separator "" keeps each file whole (without its final newline).
  EXPECT_EQ(load_text_corpus(spec_of({a, b}, "")).train_docs,
            (std::vector<std::string>{"one\n%\ntwo\n  lines\n%", "%\n \t\n%\nthree\n%\nfour\nmore"}));
}

TEST(TextCorpus, FolderIsReadRecursivelyWithExclusionsAndSymlinkDeduplication) {
  Folder dir;
  dir.write("fortunes", "a1\n%\na2\n%\n");
  dir.write("fortunes.dat", std::string("\0\0\0\2binary index", 16));
  fs::create_symlink("fortunes", dir / "fortunes.u8");
  dir.write("sub/more", "b1\n%\nb2");
  dir.write("sub/more.dat", std::string("\0\1", 2));
  CorpusSpec spec = spec_of({dir.str()});
  spec.exclude = {"*.dat", "*.u8"};
  TextCorpus corpus = load_text_corpus(spec);
  EXPECT_EQ(corpus.train_docs, (std::vector<std::string>{"a1", "a2", "b1", "b2"}));  // sorted path order
  EXPECT_EQ(corpus.n_files, 2);
  // Without the *.u8 pattern the symlink names a file already read: it is read once.
  spec.exclude = {"*.dat"};
  corpus = load_text_corpus(spec);
  EXPECT_EQ(corpus.train_docs, (std::vector<std::string>{"a1", "a2", "b1", "b2"}));
  EXPECT_EQ(corpus.n_files, 2);
  // A full-path pattern excludes a whole subfolder.
  spec.exclude = {"*.dat", "*/sub/*"};
  EXPECT_EQ(load_text_corpus(spec).train_docs, (std::vector<std::string>{"a1", "a2"}));
  // Without exclusions the .dat index files are binary: the error names one and suggests excluding.
  spec.exclude = {};
  std::string msg = error_of([&] { load_text_corpus(spec); });
  EXPECT_CONTAINS(msg, dir / "fortunes.dat");
  EXPECT_CONTAINS(msg, "NUL");
  EXPECT_CONTAINS(msg, "exclude");
}

TEST(TextCorpus, GlobPatternsExpandInSortedOrder) {
  Folder dir;
  dir.write("x2.txt", "two");
  dir.write("x1.txt", "one");
  dir.write("x3.md", "three");
  dir.write("x9.txt.bak", "nine");
  TextCorpus corpus = load_text_corpus(spec_of({dir / "x*.txt", dir / "x?.md"}, ""));
  EXPECT_EQ(corpus.train_docs, (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_EQ(corpus.n_files, 3);
  // Overlapping patterns read a file once; exclusions apply to glob matches.
  CorpusSpec spec = spec_of({dir / "x*", dir / "*.txt"}, "");
  spec.exclude = {"*.bak"};
  EXPECT_EQ(load_text_corpus(spec).train_docs, (std::vector<std::string>{"one", "two", "three"}));
  std::string msg = error_of([&] { load_text_corpus(spec_of({dir / "y*.txt"}, "")); });
  EXPECT_CONTAINS(msg, dir / "y*.txt");
  EXPECT_CONTAINS(msg, "matches no file");
  spec = spec_of({dir / "*.md"}, "");
  spec.exclude = {"*.md"};
  msg = error_of([&] { load_text_corpus(spec); });
  EXPECT_CONTAINS(msg, dir / "*.md");
  EXPECT_CONTAINS(msg, "1 excluded");
}

TEST(TextCorpus, CompressedFilesReadBackEqualToPlainText) {
  Folder dir;
  std::string text;
  for (int i = 0; i < 500; ++i) text += "fortune number " + std::to_string(i) + "\nsays hello\n%\n";
  std::string plain = dir.write("plain", text);
  const TextCorpus expected = load_text_corpus(spec_of({plain}, "%", 0.1));
  ASSERT_EQ(expected.train_docs.size() + expected.val_docs.size(), 500u);
  const std::string gz = detail::gzip_compress(text, 9), zst = detail::zstd_compress(text, 3),
                    xz = detail::xz_compress(text, 6);
  EXPECT_EQ(detail::detect_compression(gz), detail::Compression::gzip);
  EXPECT_EQ(detail::detect_compression(zst), detail::Compression::zstd);
  EXPECT_EQ(detail::detect_compression(xz), detail::Compression::xz);
  // Right extensions, misleading extensions and no extension: the magic bytes decide.
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"t.gz", gz}, {"t.zst", zst}, {"t.xz", xz}, {"gz_as.txt", gz}, {"xz_as.gz", xz}, {"zst_noext", zst},
           {"gz_twice.gz", detail::gzip_compress(text.substr(0, 1000), 1) + detail::gzip_compress(text.substr(1000), 9)}}) {
    TextCorpus corpus = load_text_corpus(spec_of({dir.write(name, bytes)}, "%", 0.1));
    EXPECT_EQ(corpus.train_docs, expected.train_docs) << name;
    EXPECT_EQ(corpus.val_docs, expected.val_docs) << name;
  }
  // Files made by the gzip -9n, xz -9 and zstd -19 tools from "hello\n%\nworld\n".
  const std::string gz_tool = bytes_of({0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xcb, 0x48,
                                        0xcd, 0xc9, 0xc9, 0xe7, 0x52, 0xe5, 0x2a, 0xcf, 0x2f, 0xca, 0x49, 0xe1,
                                        0x02, 0x00, 0xf7, 0x82, 0xab, 0xc6, 0x0e, 0x00, 0x00, 0x00});
  const std::string xz_tool = bytes_of(
      {0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 0x00, 0x04, 0xe6, 0xd6, 0xb4, 0x46, 0x02, 0x00, 0x21, 0x01, 0x1c, 0x00,
       0x00, 0x00, 0x10, 0xcf, 0x58, 0xcc, 0x01, 0x00, 0x0d, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x0a, 0x25, 0x0a, 0x77,
       0x6f, 0x72, 0x6c, 0x64, 0x0a, 0x00, 0x00, 0x00, 0x43, 0x0d, 0x64, 0x23, 0x1b, 0xc6, 0xa1, 0xcc, 0x00, 0x01,
       0x26, 0x0e, 0x08, 0x1b, 0xe0, 0x04, 0x1f, 0xb6, 0xf3, 0x7d, 0x01, 0x00, 0x00, 0x00, 0x00, 0x04, 0x59, 0x5a});
  const std::string zst_tool = bytes_of({0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x68, 0x71, 0x00, 0x00, 0x68, 0x65, 0x6c,
                                         0x6c, 0x6f, 0x0a, 0x25, 0x0a, 0x77, 0x6f, 0x72, 0x6c, 0x64, 0x0a, 0xda,
                                         0xbd, 0x52, 0x0e});
  for (const std::string& bytes : {gz_tool, xz_tool, zst_tool}) {
    TextCorpus corpus = load_text_corpus(spec_of({dir.write("tool", bytes)}));
    EXPECT_EQ(corpus.train_docs, (std::vector<std::string>{"hello", "world"}));
  }
}

TEST(TextCorpus, CorruptCompressedFileIsAnErrorNamingIt) {
  Folder dir;
  std::string text;
  for (int i = 0; i < 300; ++i) text += "line " + std::to_string(i * 7919 % 1000) + "\n%\n";
  for (const std::string& bytes : {detail::gzip_compress(text, 9), detail::zstd_compress(text, 3),
                                   detail::xz_compress(text, 6)}) {
    std::string truncated = dir.write("truncated.bin", bytes.substr(0, bytes.size() / 2));
    std::string msg = error_of([&] { load_text_corpus(spec_of({truncated})); });
    EXPECT_CONTAINS(msg, truncated);
    EXPECT_CONTAINS(msg, "corrupt");
    std::string flipped_bytes = bytes;
    for (std::size_t i = 20; i < flipped_bytes.size() - 10; i += 7) flipped_bytes[i] = static_cast<char>(~flipped_bytes[i]);
    std::string flipped = dir.write("flipped.bin", flipped_bytes);
    msg = error_of([&] { load_text_corpus(spec_of({flipped})); });
    EXPECT_CONTAINS(msg, flipped);
  }
}

std::string numbered_docs(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text += "document " + std::to_string(i) + "\n%\n";
  return text;
}

int doc_number(const std::string& doc) { return std::stoi(doc.substr(9)); }

TEST(TextCorpus, SplitIsSeededDeterministicAndByDocument) {
  Folder dir;
  std::string file = dir.write("docs", numbered_docs(200));
  CorpusSpec spec = spec_of({file}, "%", 0.1);
  spec.seed = 7;
  const TextCorpus a = load_text_corpus(spec), b = load_text_corpus(spec);
  EXPECT_EQ(a.train_docs, b.train_docs);
  EXPECT_EQ(a.val_docs, b.val_docs);
  ASSERT_EQ(a.val_docs.size(), 20u);
  ASSERT_EQ(a.train_docs.size(), 180u);
  std::set<int> seen;
  for (const auto* split : {&a.train_docs, &a.val_docs}) {
    int previous = -1;
    for (const std::string& d : *split) {
      const int k = doc_number(d);
      EXPECT_GT(k, previous) << "each split keeps the original order";
      previous = k;
      EXPECT_TRUE(seen.insert(k).second) << "document " << k << " is in both splits";
    }
  }
  EXPECT_EQ(seen.size(), 200u);
  // The validation documents are spread over the corpus, not one block at its end.
  EXPECT_LT(doc_number(a.val_docs.front()), 100);
  EXPECT_GE(doc_number(a.val_docs.back()), 100);
  spec.seed = 8;
  EXPECT_NE(load_text_corpus(spec).val_docs, a.val_docs);
}

TEST(TextCorpus, ValidationFractionIsRoundedAndClamped) {
  Folder dir;
  std::string file = dir.write("docs", numbered_docs(10));
  auto n_val = [&](double fraction) { return load_text_corpus(spec_of({file}, "%", fraction)).val_docs.size(); };
  EXPECT_EQ(n_val(0.0), 0u);
  EXPECT_EQ(n_val(0.01), 1u);   // at least one
  EXPECT_EQ(n_val(0.25), 3u);   // round(2.5) away from zero
  EXPECT_EQ(n_val(0.5), 5u);
  EXPECT_EQ(n_val(0.99), 9u);   // at most n - 1: the train split is never empty
  std::string two = dir.write("two", "a\n%\nb\n");
  EXPECT_EQ(load_text_corpus(spec_of({two}, "%", 0.05)).val_docs.size(), 1u);
  std::string msg = error_of([&] { load_text_corpus(spec_of({file}, "%", 1.0)); });
  EXPECT_CONTAINS(msg, "val_fraction = 1");
}

TEST(TextCorpus, MaxBytesStopsAfterTheDocumentThatReachesTheCap) {
  Folder dir;
  std::string a = dir.write("a", "12345\n%\n67890\n%\nabcde\n");
  std::string b = dir.write("b", "never read\n");
  CorpusSpec spec = spec_of({a, b});
  spec.max_bytes = 7;
  TextCorpus corpus = load_text_corpus(spec);
  EXPECT_EQ(corpus.train_docs, (std::vector<std::string>{"12345", "67890"}));
  EXPECT_EQ(corpus.n_files, 1);
}

TEST(TextCorpus, TokenStreamPutsABoundaryBeforeEveryDocument) {
  EXPECT_EQ(token_stream({"ab", "c", "\xc3\xa9"}),
            (std::vector<std::uint8_t>{0, 'a', 'b', 0, 'c', 0, 0xc3, 0xa9}));
  EXPECT_TRUE(token_stream({}).empty());
}

TEST(TextCorpus, Utf8AndAFewStrayBytesAreText) {
  Folder dir;
  std::string utf8 = dir.write("utf8", "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80\n%\nna\xefve latin-1 \x0c\n");
  EXPECT_EQ(load_text_corpus(spec_of({utf8})).train_docs.size(), 2u);
}

TEST(TextCorpus, BadInputsAreErrorsNamingThePath) {
  Folder dir;
  std::string missing = dir / "no_such_file";
  EXPECT_CONTAINS(error_of([&] { load_text_corpus(spec_of({missing})); }), missing);
  std::string empty_folder = dir / "empty";
  fs::create_directories(empty_folder);
  std::string msg = error_of([&] { load_text_corpus(spec_of({empty_folder})); });
  EXPECT_CONTAINS(msg, empty_folder);
  EXPECT_CONTAINS(msg, "no readable text files");
  dir.write("only_dat/x.dat", "index");
  CorpusSpec spec = spec_of({dir / "only_dat"});
  spec.exclude = {"*.dat"};
  msg = error_of([&] { load_text_corpus(spec); });
  EXPECT_CONTAINS(msg, dir / "only_dat");
  EXPECT_CONTAINS(msg, "1 excluded");
  std::string blank = dir.write("blank", "%\n   \n%\n\n");
  msg = error_of([&] { load_text_corpus(spec_of({blank})); });
  EXPECT_CONTAINS(msg, blank);
  EXPECT_CONTAINS(msg, "no non-empty document");
  std::string nul = dir.write("nul.txt", std::string("text\0more", 9));
  EXPECT_CONTAINS(error_of([&] { load_text_corpus(spec_of({nul})); }), nul);
  std::string garbage_bytes;
  for (int i = 0; i < 100; ++i) garbage_bytes += i % 3 == 0 ? 'a' : static_cast<char>(0x80 + i);  // 66% bad
  std::string garbage = dir.write("garbage.txt", garbage_bytes);
  msg = error_of([&] { load_text_corpus(spec_of({garbage})); });
  EXPECT_CONTAINS(msg, garbage);
  EXPECT_CONTAINS(msg, "66 of its 100 bytes");
  std::string one = dir.write("one_doc", "a single fortune\nwithout separator\n");
  msg = error_of([&] { load_text_corpus(spec_of({one}, "%", 0.05)); });
  EXPECT_CONTAINS(msg, one);
  EXPECT_CONTAINS(msg, "no separator line '%'");
  EXPECT_CONTAINS(msg, "task.separator");
  msg = error_of([&] { load_text_corpus(spec_of({one}, "", 0.05)); });
  EXPECT_CONTAINS(msg, one);
  EXPECT_CONTAINS(msg, "one document");
  // One document is fine when nothing is split off.
  EXPECT_EQ(load_text_corpus(spec_of({one}, "%", 0.0)).train_docs.size(), 1u);
}

// -log2 of the add-one probabilities, written out by hand.
TEST(TextBaselines, UnigramOfOneRepeatedByteMatchesTheAddOneFormula) {
  TextCorpus corpus;
  corpus.train_docs = {std::string(3000, 'a'), std::string(840, 'a')};  // 3840 bytes: p(a) = 3841 / 4096
  corpus.val_docs = {std::string(100, 'a'), std::string(28, 'a')};
  TextBaselines b = text_baselines(corpus);
  EXPECT_NEAR(b.unigram_bpb, std::log2(4096.0 / 3841.0), 1e-12);
  // Bigram: after 'a' the train counts hold 3838 'a's (out of 3838); after the boundary 0 two 'a's.
  // Per validation document: one byte at p = 3/258, the rest at p = 3839/4094.
  const double expected = (2 * std::log2(258.0 / 3.0) + 126 * std::log2(4094.0 / 3839.0)) / 128.0;
  EXPECT_NEAR(b.bigram_bpb, expected, 1e-12);
  EXPECT_LT(b.unigram_bpb, 0.1);
}

TEST(TextBaselines, BigramBeatsUnigramOnPatternedText) {
  TextCorpus corpus;
  std::string pattern;
  for (int i = 0; i < 20000; ++i) pattern += "abcd"[i % 4];
  corpus.train_docs = {pattern, pattern.substr(0, 1000)};  // about 5000 of each byte
  corpus.val_docs = {pattern.substr(0, 400)};
  TextBaselines b = text_baselines(corpus);
  EXPECT_NEAR(b.unigram_bpb, 2.0, 0.3);  // four equally frequent bytes
  EXPECT_LT(b.bigram_bpb, 0.2);          // each byte determines the next
  EXPECT_LT(b.bigram_bpb, b.unigram_bpb);
}

TEST(TextBaselines, CompressorsGiveAboutEightBitsOnRandomBytesAndFewOnRepetitiveText) {
  TextCorpus corpus;
  std::uint64_t state = 12345;
  std::string random_bytes(50000, '\0');
  for (char& c : random_bytes) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    c = static_cast<char>(state >> 56);
  }
  corpus.train_docs = {"some training text"};
  corpus.val_docs = {random_bytes};
  TextBaselines b = text_baselines(corpus);
  EXPECT_GT(b.gzip_bpb, 7.95);
  EXPECT_LT(b.gzip_bpb, 8.2);
  EXPECT_GT(b.xz_bpb, 7.95);
  EXPECT_LT(b.xz_bpb, 8.2);
  EXPECT_GT(b.unigram_bpb, 7.9);  // train text says nothing about random bytes
  std::string repetitive;
  for (int i = 0; i < 2000; ++i) repetitive += "the quick brown fox jumps over the lazy dog. ";
  corpus.val_docs = {repetitive, repetitive};
  b = text_baselines(corpus);
  EXPECT_LT(b.gzip_bpb, 0.2);
  EXPECT_LT(b.xz_bpb, 0.2);
  EXPECT_GT(b.xz_bpb, 0.0);
}

TEST(TextBaselines, EmptyValidationSplitIsAnError) {
  TextCorpus corpus;
  corpus.train_docs = {"text"};
  EXPECT_CONTAINS(error_of([&] { text_baselines(corpus); }), "0 validation bytes");
}

TEST(TextCorpus, DebianFortunesLoadWhenInstalled) {
  const std::string folder = "/usr/share/games/fortunes";
  if (!fs::is_directory(folder)) GTEST_SKIP() << folder << " is absent (Debian package fortunes not installed)";
  CorpusSpec spec = spec_of({folder}, "%", 0.05);
  spec.exclude = {"*.dat", "*.u8"};
  TextCorpus corpus = load_text_corpus(spec);
  EXPECT_GT(corpus.train_docs.size() + corpus.val_docs.size(), 1000u);
  TextBaselines b = text_baselines(corpus);
  std::printf("fortunes: %lld files, %zu train docs (%lld bytes), %zu val docs (%lld bytes); bits/byte: "
              "unigram %.4f bigram %.4f gzip -9 %.4f xz -9 %.4f\n",
              static_cast<long long>(corpus.n_files), corpus.train_docs.size(),
              static_cast<long long>(corpus.train_bytes()), corpus.val_docs.size(),
              static_cast<long long>(corpus.val_bytes()), b.unigram_bpb, b.bigram_bpb, b.gzip_bpb, b.xz_bpb);
  EXPECT_LT(b.bigram_bpb, b.unigram_bpb);
  EXPECT_LT(b.xz_bpb, b.bigram_bpb);
}

}  // namespace
}  // namespace eggroll
