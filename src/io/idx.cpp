// IDX reading and writing (header checks, transparent decompression) and the MNIST-format
// split loader; see idx.hpp.
#include "eggroll/io/idx.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "eggroll/core/error.hpp"
#include "io/decompress.hpp"

namespace eggroll {
namespace {

constexpr int kMaxDims = 8;

std::string hex32(std::uint32_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) s += digits[(v >> shift) & 0xf];
  return s;
}

std::string hex8(unsigned v) { return "0x" + hex32(v).substr(8); }

std::uint32_t big_endian32(const std::string& bytes, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t k = 0; k < 4; ++k) v = (v << 8) | static_cast<unsigned char>(bytes[at + k]);
  return v;
}

void append_big_endian32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xff);
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("cannot open IDX file '", path, "': ", std::strerror(errno), "; check the path and its permissions");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  check(!in.bad(), "reading IDX file '", path, "' failed: ", std::strerror(errno));
  return bytes;
}

const char* type_name(unsigned type) {
  switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "unknown";
  }
}

// The dims of the header at the start of bytes (throws when the header is not a valid
// unsigned-byte IDX header); payload_bytes = their product.
std::vector<std::int64_t> parse_header(const std::string& bytes, const std::string& source,
                                       std::int64_t& payload_bytes) {
  check(bytes.size() >= 4, "'", source, "' is not an IDX file: ", bytes.size(),
        " bytes, shorter than the 4-byte magic number; expected an MNIST-format file (e.g. train-images-idx3-ubyte)");
  const std::uint32_t magic = big_endian32(bytes, 0);
  const unsigned type = (magic >> 8) & 0xff, ndim = magic & 0xff;
  check((magic >> 16) == 0, "'", source, "' is not an IDX file: magic number ", hex32(magic),
        ", expected 0x000008NN (0x00000801 for labels, 0x00000803 for images); is it the right file, "
        "or a compressed format that was not recognised?");
  check(type == 0x08, "'", source, "': IDX element type ", hex8(type), " (", type_name(type),
        ", magic ", hex32(magic), ") is not supported; only 0x08 (unsigned byte, as in MNIST) is");
  check(ndim >= 1 && ndim <= kMaxDims, "'", source, "': IDX magic ", hex32(magic), " declares ", ndim,
        " dimensions, expected 1 to ", kMaxDims);
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(ndim);
  check(bytes.size() >= header, "'", source, "' is truncated: its header needs ", header, " bytes (", ndim,
        " dimension sizes), found ", bytes.size());
  std::vector<std::int64_t> dims(ndim);
  payload_bytes = 1;
  for (unsigned d = 0; d < ndim; ++d) {
    dims[d] = big_endian32(bytes, 4 + 4 * d);
    check(dims[d] == 0 || payload_bytes <= std::numeric_limits<std::int64_t>::max() / dims[d], "'", source,
          "': IDX dimension sizes overflow (dimension ", d, " = ", dims[d], ")");
    payload_bytes *= dims[d];
  }
  return dims;
}

std::string dims_string(const std::vector<std::int64_t>& dims) {
  std::string s = "(";
  for (std::size_t d = 0; d < dims.size(); ++d) s += (d ? ", " : "") + std::to_string(dims[d]);
  return s + ")";
}

// path/<name>, or path/<name>.gz when only that exists; "" when neither does.
std::string find_split_file(const std::filesystem::path& folder, const std::string& name) {
  std::error_code ec;
  for (const std::string& candidate : {name, name + ".gz"}) {
    const auto p = folder / candidate;
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

std::string install_hint(const std::string& folder) {
  const auto normal = [](const std::string& f) { return (std::filesystem::path(f) / "").lexically_normal(); };
  if (normal(folder) == normal(kFashionMnistPath))
    return "install Fashion-MNIST with `apt-get install dataset-fashion-mnist` (scripts/install_deps.sh does), "
           "or set task.path to a folder holding the MNIST-format files";
  return std::string("set task.path to a folder holding the MNIST-format files (Fashion-MNIST is installed in ") +
         kFashionMnistPath + " by `apt-get install dataset-fashion-mnist`)";
}

IdxArray read_split_file(const std::string& folder, const std::string& name, std::size_t ndim, const char* what,
                         std::string& path) {
  path = find_split_file(folder, name);
  check(!path.empty(), "the ", what, " file '", name, "' (or '", name, ".gz') is missing from '", folder, "'; ",
        install_hint(folder));
  IdxArray a = read_idx(path);
  check(a.dims.size() == ndim, "'", path, "' holds a ", a.dims.size(), "-D array ", dims_string(a.dims),
        ", expected ", what, ": a ", ndim, "-D array (magic ", hex32(0x800u + static_cast<std::uint32_t>(ndim)), ")");
  return a;
}

}  // namespace

IdxArray parse_idx(const std::string& bytes, const std::string& source) {
  std::int64_t payload = 0;
  IdxArray a;
  a.dims = parse_header(bytes, source, payload);
  const auto header = static_cast<std::int64_t>(4 + 4 * a.dims.size());
  const auto found = static_cast<std::int64_t>(bytes.size()) - header;
  check(found >= payload, "'", source, "' is truncated: expected ", payload, " bytes of data for dimensions ",
        dims_string(a.dims), ", found ", found, "; re-download or re-create the file");
  check(found == payload, "'", source, "' has trailing bytes: expected ", payload, " bytes of data for dimensions ",
        dims_string(a.dims), ", found ", found, "; the header does not match the payload");
  a.data.assign(bytes.begin() + header, bytes.end());
  return a;
}

IdxArray read_idx(const std::string& path) {
  std::string bytes = read_whole_file(path);
  const detail::Compression c = detail::detect_compression(bytes);
  if (c != detail::Compression::none) bytes = detail::decompress(bytes, c, path);
  return parse_idx(bytes, path);
}

std::string encode_idx(const IdxArray& array) {
  check(!array.dims.empty() && array.dims.size() <= kMaxDims, "encode_idx: ", array.dims.size(),
        " dimensions, expected 1 to ", kMaxDims);
  std::int64_t n = 1;
  for (std::int64_t d : array.dims) {
    check(d >= 0 && d <= std::numeric_limits<std::uint32_t>::max(), "encode_idx: dimension size ", d,
          " does not fit the IDX header's 32 bits");
    n *= d;
  }
  check(n == static_cast<std::int64_t>(array.data.size()), "encode_idx: dimensions ", dims_string(array.dims),
        " hold ", n, " bytes but data has ", array.data.size());
  std::string out;
  out.reserve(4 + 4 * array.dims.size() + array.data.size());
  append_big_endian32(out, 0x800u + static_cast<std::uint32_t>(array.dims.size()));
  for (std::int64_t d : array.dims) append_big_endian32(out, static_cast<std::uint32_t>(d));
  out.append(array.data.begin(), array.data.end());
  return out;
}

void write_idx(const std::string& path, const IdxArray& array) {
  std::string bytes = encode_idx(array);
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0) bytes = detail::gzip_compress(bytes, 6);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  check(out.good(), "cannot write IDX file '", path, "': ", std::strerror(errno));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  check(out.good(), "writing IDX file '", path, "' failed: ", std::strerror(errno));
}

ImageDataset load_mnist_split(const std::string& folder, bool train) {
  std::error_code ec;
  check(std::filesystem::is_directory(folder, ec), "dataset folder '", folder, "' does not exist; ",
        install_hint(folder));
  const std::string prefix = train ? "train" : "t10k";
  std::string images_path, labels_path;
  IdxArray images = read_split_file(folder, prefix + "-images-idx3-ubyte", 3, "images", images_path);
  IdxArray labels = read_split_file(folder, prefix + "-labels-idx1-ubyte", 1, "labels", labels_path);
  check(images.dims[0] == labels.dims[0], "'", images_path, "' holds ", images.dims[0], " images but '", labels_path,
        "' holds ", labels.dims[0], " labels; expected one label per image (are the files from the same split?)");
  for (std::size_t i = 0; i < labels.data.size(); ++i)
    check(labels.data[i] < 10, "'", labels_path, "' has label ", static_cast<int>(labels.data[i]), " at index ", i,
          ", expected 0 to 9");
  ImageDataset d;
  d.n = images.dims[0];
  d.rows = images.dims[1];
  d.cols = images.dims[2];
  d.pixels = std::move(images.data);
  d.labels = std::move(labels.data);
  return d;
}

}  // namespace eggroll
