// Text corpus loading: path / folder / glob expansion with exclusions, decompression, the binary
// check, separator-line document splitting and the seeded train / validation split by document.
#include "eggroll/io/text_corpus.hpp"

#include <fnmatch.h>
#include <glob.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>

#include "eggroll/core/error.hpp"
#include "io/decompress.hpp"

namespace eggroll {
namespace fs = std::filesystem;
namespace {

// splitmix64 (Steele, Lea, Flood 2014): a counter plus a fixed mixing function, so the stream
// is the same on every platform and standard library.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_;
};

std::string quoted_list(const std::vector<std::string>& items) {
  std::string s = "[";
  for (std::size_t i = 0; i < items.size(); ++i) s += (i ? ", \"" : "\"") + items[i] + "\"";
  return s + "]";
}

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

bool is_excluded(const fs::path& path, const std::vector<std::string>& patterns) {
  const std::string name = path.filename().string(), full = path.string();
  for (const std::string& p : patterns) {
    if (fnmatch(p.c_str(), name.c_str(), 0) == 0 || fnmatch(p.c_str(), full.c_str(), 0) == 0) return true;
  }
  return false;
}

// Regular files (symlinks to files included) under `dir`, recursively, byte-wise sorted; the
// number skipped by the exclude patterns goes to `n_excluded`.
std::vector<fs::path> files_in_folder(const fs::path& dir, const CorpusSpec& spec, std::int64_t& n_excluded) {
  std::vector<fs::path> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;  // folders, broken symlinks, devices
    if (is_excluded(it->path(), spec.exclude)) {
      ++n_excluded;
      continue;
    }
    files.push_back(it->path());
  }
  if (ec) throw_error("cannot list folder '", dir.string(), "': ", ec.message(), "; expected a readable folder");
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) { return a.string() < b.string(); });
  return files;
}

// The files one glob pattern names (folders among the matches are read recursively).
std::vector<fs::path> files_from_glob(const std::string& pattern, const CorpusSpec& spec) {
  glob_t g{};
  int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g);
  std::vector<std::string> matches;
  if (rc == 0) matches.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  globfree(&g);
  if (rc == GLOB_NOMATCH) {
    throw_error("corpus path '", pattern, "' does not exist and, read as a glob pattern, matches no file; "
                "expected an existing file, folder or a pattern that matches files; fix the path");
  }
  if (rc != 0) throw_error("glob pattern '", pattern, "' could not be expanded (glob error ", rc, "); check the path");
  std::sort(matches.begin(), matches.end());  // byte-wise, not the locale's collation
  std::vector<fs::path> files;
  std::int64_t n_excluded = 0;
  for (const std::string& m : matches) {
    std::error_code ec;
    if (fs::is_directory(m, ec)) {
      std::vector<fs::path> sub = files_in_folder(m, spec, n_excluded);
      files.insert(files.end(), sub.begin(), sub.end());
    } else if (fs::is_regular_file(m, ec)) {
      if (is_excluded(m, spec.exclude)) ++n_excluded;
      else files.emplace_back(m);
    }
  }
  if (files.empty()) {
    throw_error("glob pattern '", pattern, "' matches ", matches.size(), " path(s) but no readable text file (",
                n_excluded, " excluded by exclude = ", quoted_list(spec.exclude),
                "); expected at least one file; fix the pattern or the exclude list");
  }
  return files;
}

// Every file the spec names, in reading order, each canonical path once.
std::vector<fs::path> collect_files(const CorpusSpec& spec) {
  if (spec.paths.empty()) {
    throw_error("text corpus: no paths given; expected at least one file, folder or glob pattern "
                "(e.g. paths = [\"/usr/share/games/fortunes\"])");
  }
  std::vector<fs::path> files;
  std::set<std::string> seen;
  auto add = [&](const fs::path& p) {
    std::error_code ec;
    fs::path canonical = fs::canonical(p, ec);
    if (!seen.insert(ec ? p.string() : canonical.string()).second) return;  // already read
    files.push_back(p);
  };
  for (const std::string& p : spec.paths) {
    std::error_code ec;
    fs::file_status st = fs::status(p, ec);
    if (fs::is_directory(st)) {
      std::int64_t n_excluded = 0;
      std::vector<fs::path> found = files_in_folder(p, spec, n_excluded);
      if (found.empty()) {
        throw_error("corpus folder '", p, "' holds no readable text files (", n_excluded,
                    " excluded by exclude = ", quoted_list(spec.exclude),
                    "); expected at least one file; fix the path or the exclude list");
      }
      for (const fs::path& f : found) add(f);
    } else if (fs::is_regular_file(st)) {
      add(p);
    } else if (fs::exists(st)) {
      throw_error("corpus path '", p, "' is neither a regular file nor a folder; expected a text file, "
                  "folder or glob pattern; fix the path");
    } else if (has_glob_chars(p)) {
      for (const fs::path& f : files_from_glob(p, spec)) add(f);
    } else {
      throw_error("corpus path '", p, "' does not exist (", ec ? ec.message() : "no such file or folder",
                  "); expected an existing file, folder or glob pattern; fix the path");
    }
  }
  return files;
}

std::string read_whole_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("cannot open corpus file '", path.string(), "': ", std::strerror(errno), "; check its permissions");
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad()) throw_error("cannot read corpus file '", path.string(), "': ", std::strerror(errno));
  return os.str();
}

// Length of the valid UTF-8 sequence (2..4 bytes) starting at t[i], or 0 when there is none.
std::size_t utf8_length(std::string_view t, std::size_t i) {
  auto at = [&](std::size_t k) { return static_cast<unsigned char>(t[k]); };
  const unsigned char c = at(i);
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) len = 2;
  else if (c >= 0xe0 && c <= 0xef) len = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
  else if (c >= 0xf0 && c <= 0xf4) len = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
  else return 0;
  if (i + len > t.size() || at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < len; ++k) {
    if (at(i + k) < 0x80 || at(i + k) > 0xbf) return 0;
  }
  return len;
}

bool is_text_ascii(unsigned char c) { return (c >= 0x20 && c < 0x7f) || (c >= '\t' && c <= '\r'); }

// Rejects a NUL byte anywhere, or more than 30% of bytes that are neither printable ASCII,
// whitespace nor part of a valid UTF-8 sequence.
void check_text(std::string_view t, const fs::path& path) {
  if (std::size_t nul = t.find('\0'); nul != std::string_view::npos) {
    throw_error("corpus file '", path.string(), "' looks binary: it holds a NUL byte at offset ", nul,
                "; expected text (ASCII / UTF-8, optionally .gz/.zst/.xz); add a pattern matching it "
                "to the exclude list (e.g. \"*.dat\") or remove it from the paths");
  }
  std::size_t n_bad = 0;
  for (std::size_t i = 0; i < t.size();) {
    const unsigned char c = static_cast<unsigned char>(t[i]);
    if (c < 0x80) {
      n_bad += is_text_ascii(c) ? 0 : 1;
      ++i;
    } else if (std::size_t len = utf8_length(t, i); len > 0) {
      i += len;
    } else {
      ++n_bad;
      ++i;
    }
  }
  if (n_bad * 10 > t.size() * 3) {
    throw_error("corpus file '", path.string(), "' looks binary: ", n_bad, " of its ", t.size(),
                " bytes are neither printable ASCII, whitespace nor valid UTF-8; expected at most 30%; "
                "add a pattern matching it to the exclude list or remove it from the paths");
  }
}

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); });
}

// Appends the non-blank documents of one file's text; `found_separator` tells whether any line
// equalled the separator.
void split_documents(std::string_view text, const std::string& sep, std::vector<std::string>& docs,
                     bool& found_separator) {
  auto finish = [&](std::string_view doc) {
    if (!doc.empty() && doc.back() == '\n') doc.remove_suffix(1);  // its last line's newline
    if (!doc.empty() && doc.back() == '\r') doc.remove_suffix(1);
    if (!is_blank(doc)) docs.emplace_back(doc);
  };
  if (sep.empty()) return finish(text);
  std::size_t doc_start = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    std::size_t next = eol == std::string_view::npos ? text.size() : eol + 1;
    std::string_view line = text.substr(pos, (eol == std::string_view::npos ? text.size() : eol) - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line == sep) {
      found_separator = true;
      finish(text.substr(doc_start, pos - doc_start));
      doc_start = next;
    }
    pos = next;
  }
  finish(text.substr(doc_start));
}

std::int64_t total_bytes(const std::vector<std::string>& docs) {
  std::int64_t n = 0;
  for (const std::string& d : docs) n += static_cast<std::int64_t>(d.size());
  return n;
}

// Moves round(val_fraction * n) documents (clamped to [1, n - 1] when val_fraction > 0) chosen by
// a seeded Fisher-Yates shuffle driven by splitmix64 into val_docs, the rest into train_docs.
void split_by_document(std::vector<std::string> docs, const CorpusSpec& spec, TextCorpus& corpus) {
  const std::size_t n = docs.size();
  std::size_t n_val = 0;
  if (spec.val_fraction > 0.0 && n >= 2) {
    n_val = static_cast<std::size_t>(std::llround(spec.val_fraction * static_cast<double>(n)));
    n_val = std::clamp<std::size_t>(n_val, 1, n - 1);
  }
  std::vector<std::size_t> perm(n);
  for (std::size_t i = 0; i < n; ++i) perm[i] = i;
  SplitMix64 rng(spec.seed);
  for (std::size_t i = n; i-- > 1;) std::swap(perm[i], perm[rng.next() % (i + 1)]);
  std::vector<char> in_val(n, 0);
  for (std::size_t k = 0; k < n_val; ++k) in_val[perm[k]] = 1;  // the first n_val permuted indices
  for (std::size_t i = 0; i < n; ++i) (in_val[i] ? corpus.val_docs : corpus.train_docs).push_back(std::move(docs[i]));
}

}  // namespace

std::int64_t TextCorpus::train_bytes() const { return total_bytes(train_docs); }
std::int64_t TextCorpus::val_bytes() const { return total_bytes(val_docs); }

TextCorpus load_text_corpus(const CorpusSpec& spec) {
  if (!(spec.val_fraction >= 0.0 && spec.val_fraction < 1.0)) {
    throw_error("text corpus val_fraction = ", spec.val_fraction,
                ": expected a share of documents in [0, 1), e.g. 0.05");
  }
  if (spec.max_bytes < 0) throw_error("text corpus max_bytes = ", spec.max_bytes, ": expected >= 0 (0 = no cap)");
  TextCorpus corpus;
  std::vector<std::string> docs;
  std::int64_t n_kept = 0;
  bool found_separator = false;
  fs::path last_file;
  for (const fs::path& path : collect_files(spec)) {
    if (spec.max_bytes > 0 && n_kept >= spec.max_bytes) break;
    std::string raw = read_whole_file(path);
    detail::Compression c = detail::detect_compression(raw);
    std::string text = c == detail::Compression::none ? std::move(raw) : detail::decompress(raw, c, path.string());
    check_text(text, path);
    std::vector<std::string> file_docs;
    split_documents(text, spec.separator, file_docs, found_separator);
    ++corpus.n_files;
    last_file = path;
    for (std::string& d : file_docs) {
      if (spec.max_bytes > 0 && n_kept >= spec.max_bytes) break;
      n_kept += static_cast<std::int64_t>(d.size());
      docs.push_back(std::move(d));
    }
  }
  if (docs.empty()) {
    throw_error("text corpus from paths ", quoted_list(spec.paths), " (", corpus.n_files,
                " file(s)) holds no non-empty document; expected text; check the paths and the exclude list");
  }
  const std::size_t n = docs.size();
  if (n < 2 && spec.val_fraction > 0.0) {
    if (spec.separator.empty()) {
      throw_error("text corpus from paths ", quoted_list(spec.paths), " has one document (file '", last_file.string(),
                  "'; separator = \"\" makes each file one document), so it cannot be split into train and "
                  "validation; expected >= 2 documents; set the separator (task.separator) to the line "
                  "between documents, add files, or set val_fraction = 0");
    }
    throw_error("text corpus from paths ", quoted_list(spec.paths), " has one document: ",
                found_separator ? "the separator lines leave only one non-empty document"
                                : "no separator line '" + spec.separator + "' was found",
                " (last file '", last_file.string(), "'), so it cannot be split into train and validation; "
                "expected >= 2 documents; set the separator (task.separator) to the line that separates "
                "documents, or to \"\" with several files, or set val_fraction = 0");
  }
  split_by_document(std::move(docs), spec, corpus);
  return corpus;
}

std::vector<std::uint8_t> token_stream(const std::vector<std::string>& docs) {
  std::vector<std::uint8_t> tokens;
  tokens.reserve(static_cast<std::size_t>(total_bytes(docs)) + docs.size());
  for (const std::string& d : docs) {
    tokens.push_back(0);
    tokens.insert(tokens.end(), d.begin(), d.end());
  }
  return tokens;
}

}  // namespace eggroll
