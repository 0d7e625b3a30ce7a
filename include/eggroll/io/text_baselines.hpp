// Reference figures a byte-level language model must beat on the validation split: add-one
// unigram / bigram models fit on the train split, and gzip -9 / xz -9 compressed sizes.
#pragma once
#include "eggroll/io/text_corpus.hpp"

namespace eggroll {

// Bits per byte on the validation documents (lower is better).
struct TextBaselines {
  // -log2 p(b) per validation byte, p fit on the train documents' bytes with add-one (Laplace)
  // smoothing over the 256 byte values: p(b) = (count(b) + 1) / (n_train_bytes + 256).
  double unigram_bpb = 0;
  // -log2 p(b | a) per validation byte, a = the previous byte of the same document, or 0 for a
  // document's first byte (in training as in evaluation):
  // p(b | a) = (count(a, b) + 1) / (count(a, *) + 256).
  double bigram_bpb = 0;
  // 8 * compressed size / size of the validation documents joined by "\n": zlib deflate level 9
  // with the gzip wrapper (18 bytes of header and trailer, no file name), as `gzip -9 -n`.
  double gzip_bpb = 0;
  // The same for xz: lzma_easy_buffer_encode(preset 9, LZMA_CHECK_CRC64), as `xz -9`.
  double xz_bpb = 0;
};

// The unigram and bigram figures count the document bytes only (not the "\n" joins); the
// compressors see the joined text. Throws Error when the train or validation split is empty.
TextBaselines text_baselines(const TextCorpus& corpus);

}  // namespace eggroll
