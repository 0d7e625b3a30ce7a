// Unigram / bigram (add-one) and gzip / xz bits per byte on a corpus's validation split.
#include "eggroll/io/text_baselines.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "eggroll/core/error.hpp"
#include "io/decompress.hpp"

namespace eggroll {
namespace {

// Sums of -log2 p over the validation bytes, in document order then byte order.
double unigram_bits(const TextCorpus& corpus) {
  std::array<std::int64_t, 256> count{};
  std::int64_t n = 0;
  for (const std::string& d : corpus.train_docs) {
    for (char c : d) ++count[static_cast<unsigned char>(c)];
    n += static_cast<std::int64_t>(d.size());
  }
  std::array<double, 256> bits{};  // -log2 p(b), with p(b) = (count(b) + 1) / (n + 256)
  for (int b = 0; b < 256; ++b) {
    bits[b] = -std::log2(static_cast<double>(count[b] + 1) / static_cast<double>(n + 256));
  }
  double total = 0;
  for (const std::string& d : corpus.val_docs) {
    for (char c : d) total += bits[static_cast<unsigned char>(c)];
  }
  return total;
}

double bigram_bits(const TextCorpus& corpus) {
  std::vector<std::int64_t> count(256 * 256, 0);  // (previous byte, byte)
  std::array<std::int64_t, 256> row{};             // count(a, *)
  for (const std::string& d : corpus.train_docs) {
    unsigned prev = 0;  // a document starts after the boundary token 0
    for (char c : d) {
      const unsigned b = static_cast<unsigned char>(c);
      ++count[prev * 256 + b];
      ++row[prev];
      prev = b;
    }
  }
  double total = 0;
  for (const std::string& d : corpus.val_docs) {
    unsigned prev = 0;
    for (char c : d) {
      const unsigned b = static_cast<unsigned char>(c);
      total -= std::log2(static_cast<double>(count[prev * 256 + b] + 1) / static_cast<double>(row[prev] + 256));
      prev = b;
    }
  }
  return total;
}

}  // namespace

TextBaselines text_baselines(const TextCorpus& corpus) {
  const std::int64_t n_train = corpus.train_bytes(), n_val = corpus.val_bytes();
  if (n_train == 0 || n_val == 0) {
    throw_error("text baselines need train and validation text; the corpus has ", n_train, " train bytes and ",
                n_val, " validation bytes; expected both > 0; set val_fraction in (0, 1) and use >= 2 documents");
  }
  std::string joined;
  joined.reserve(static_cast<std::size_t>(n_val) + corpus.val_docs.size());
  for (std::size_t i = 0; i < corpus.val_docs.size(); ++i) {
    if (i) joined += '\n';
    joined += corpus.val_docs[i];
  }
  TextBaselines out;
  out.unigram_bpb = unigram_bits(corpus) / static_cast<double>(n_val);
  out.bigram_bpb = bigram_bits(corpus) / static_cast<double>(n_val);
  const double n_joined = static_cast<double>(joined.size());
  out.gzip_bpb = 8.0 * static_cast<double>(detail::gzip_compress(joined, 9).size()) / n_joined;
  out.xz_bpb = 8.0 * static_cast<double>(detail::xz_compress(joined, 9).size()) / n_joined;
  return out;
}

}  // namespace eggroll
