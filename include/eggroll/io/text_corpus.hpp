// A byte-level text corpus: files, folders and glob patterns (plain, .gz, .zst or .xz) split into
// documents by a separator line, then into train / validation splits by document.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace eggroll {

struct CorpusSpec {
  // Files, folders (read recursively, in byte-wise sorted path order) or glob(3) patterns
  // ("data/*.txt"), read in the order given. A file reached twice (a symlink to a file already
  // read, overlapping patterns) is read once: files are deduplicated by canonical path.
  std::vector<std::string> paths;
  // fnmatch(3) patterns; a file found in a folder or by a glob is skipped when a pattern matches
  // its file name or its full path ("*.dat", "*.u8"). Files named directly are always read.
  std::vector<std::string> exclude;
  // A line equal to this string (a trailing '\r' ignored) ends a document and is dropped
  // ("%" for fortune files). "" = each file is one document. The end of a file always ends a
  // document. The newline that ends a document's last line is not part of the document.
  std::string separator = "";
  double val_fraction = 0.05;  // share of documents in validation, in [0, 1)
  std::uint64_t seed = 0;      // of the train / validation permutation
  // > 0: stop adding documents once this many bytes are kept (the document that reaches the
  // cap is the last one, kept whole; later files are not read). 0 = no cap.
  std::int64_t max_bytes = 0;
};

struct TextCorpus {
  // Non-empty documents (never only whitespace, never holding a NUL byte), each split in the
  // order the documents were read.
  std::vector<std::string> train_docs, val_docs;
  std::int64_t n_files = 0;  // files read (after exclusions and deduplication)

  std::int64_t train_bytes() const;  // sum of the train documents' sizes
  std::int64_t val_bytes() const;
};

// Reads the corpus and splits it: document indices are permuted by a seeded Fisher-Yates shuffle
// driven by splitmix64 (identical on every standard library); the first
// round(val_fraction * n) of them (at least 1 when val_fraction > 0, at most n - 1) go to
// validation. Throws Error for a missing path, a glob or folder without (non-excluded) files, a
// binary file (a NUL byte, or > 30% of bytes neither printable ASCII, whitespace nor valid UTF-8),
// a corrupt compressed file, an empty corpus, or a single document when val_fraction > 0.
TextCorpus load_text_corpus(const CorpusSpec& spec);

// The byte tokens a language model reads: 0, doc0 bytes, 0, doc1 bytes, ... Token 0 is a
// document boundary (documents never hold a NUL byte), so every document starts after one.
std::vector<std::uint8_t> token_stream(const std::vector<std::string>& docs);

}  // namespace eggroll
