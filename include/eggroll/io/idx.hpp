// IDX files (the MNIST family's format: big-endian header, unsigned-byte payload), raw or
// compressed, and the MNIST / Fashion-MNIST train and test splits read from a folder.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace eggroll {

// Where the Debian package dataset-fashion-mnist installs the four .gz files.
inline constexpr const char* kFashionMnistPath = "/usr/share/datasets/fashion-mnist";

// An n-dimensional array of unsigned bytes, row-major: data.size() = product of dims.
struct IdxArray {
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> data;
};

// Reads an IDX file: magic 0x000008NN (two zero bytes, type 0x08 = unsigned byte, NN = number
// of dimensions, 1..8), then NN big-endian 32-bit sizes, then exactly prod(sizes) bytes.
// gzip, zstd and xz files are decompressed first (detected from their first bytes, not the
// name). Other element types, a short header, missing or extra payload bytes, an unreadable
// file or a corrupt compressed stream throw Error naming the file.
IdxArray read_idx(const std::string& path);
// The same from bytes already in memory (source names them in messages).
IdxArray parse_idx(const std::string& bytes, const std::string& source);
// The IDX bytes of an array (header + data), and a file of them: gzip-compressed when the path
// ends in ".gz", raw otherwise.
std::string encode_idx(const IdxArray& array);
void write_idx(const std::string& path, const IdxArray& array);

// One split of an MNIST-format dataset: n images of rows x cols pixels (0 = background .. 255),
// row-major, image after image, and one label in 0..9 per image.
struct ImageDataset {
  std::int64_t n = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;  // (n, rows, cols)
  std::vector<std::uint8_t> labels;  // (n)
};

// Reads <prefix>-images-idx3-ubyte and <prefix>-labels-idx1-ubyte from folder (each raw, or
// with ".gz" appended; the raw file wins when both exist), prefix "train" or "t10k". Checks
// that the images are 3-D, the labels 1-D, their counts equal and every label < 10. A missing
// folder or file throws Error saying which names were looked for (and, for the default
// folder, how to install the dataset).
ImageDataset load_mnist_split(const std::string& folder, bool train);

}  // namespace eggroll
