// safetensors reader and writer: u64 LE header size, JSON header, packed data buffer.
// Only F32, F64, I8, I32 and I64 are read; every header field is checked before any data is trusted.
#include "eggroll/io/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "eggroll/io/metrics.hpp"

namespace eggroll {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

const char* format_dtype(DType d) {
  switch (d) {
    case DType::f32: return "F32";
    case DType::i8: return "I8";
    case DType::i32: return "I32";
    case DType::f64: return "F64";
    case DType::i64: return "I64";
  }
  return "?";
}

std::optional<DType> parse_dtype(const std::string& s) {
  if (s == "F32") return DType::f32;
  if (s == "I8") return DType::i8;
  if (s == "I32") return DType::i32;
  if (s == "F64") return DType::f64;
  if (s == "I64") return DType::i64;
  return std::nullopt;
}

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw_error("checkpoint '", path, "' is corrupt: ", what);
}
[[noreturn]] void truncated(const std::string& path, const std::string& what) {
  throw_error("checkpoint '", path, "' is truncated: ", what);
}

// One header entry, checked against itself (the layout of all entries is checked separately).
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin, end;
};

std::uint64_t read_offset(const nlohmann::json& v, const std::function<void(const std::string&)>& bad) {
  if (!v.is_number_unsigned()) bad("has a data offset " + v.dump() + " that is not a non-negative integer");
  return v.get<std::uint64_t>();
}

Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& e) {
  std::function<void(const std::string&)> bad = [&](const std::string& what) {
    corrupt(path, "tensor '" + name + "' " + what);
  };
  if (!e.is_object()) bad("is " + e.dump() + ", not an object with dtype, shape and data_offsets");
  for (const auto& item : e.items())
    if (item.key() != "dtype" && item.key() != "shape" && item.key() != "data_offsets")
      bad("has an unknown field '" + item.key() + "'");
  Entry out{name, DType::f32, {}, 0, 0};
  auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) bad("has no dtype string");
  auto dtype = parse_dtype(dt->get<std::string>());
  if (!dtype) bad("has dtype " + dt->dump() + "; eggroll reads F32, F64, I8, I32 and I64");
  out.dtype = *dtype;
  auto shape = e.find("shape");
  if (shape == e.end() || !shape->is_array()) bad("has no shape array");
  for (const auto& d : *shape) {
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() > (std::uint64_t{1} << 40))
      bad("has shape " + shape->dump() + " with a dimension that is not an integer in [0, 2^40]");
    out.shape.push_back(d.get<std::int64_t>());
  }
  std::int64_t numel = 0;
  try {
    numel = shape_numel(out.shape);
  } catch (const Error& err) {
    bad(std::string("has an impossible shape: ") + err.what());
  }
  auto offsets = e.find("data_offsets");
  if (offsets == e.end() || !offsets->is_array() || offsets->size() != 2) bad("has no data_offsets [begin, end]");
  out.begin = read_offset((*offsets)[0], bad);
  out.end = read_offset((*offsets)[1], bad);
  std::uint64_t nbytes = static_cast<std::uint64_t>(numel) * dtype_size(out.dtype);
  if (out.end < out.begin || out.end - out.begin != nbytes)
    bad("has shape " + shape_string(out.shape) + " of dtype " + format_dtype(out.dtype) + " (" +
        std::to_string(nbytes) + " bytes) but data_offsets " + offsets->dump());
  return out;
}

// The data buffer must be covered exactly: tensors back to back from byte 0 to its end.
void check_layout(const std::string& path, std::vector<Entry>& entries, std::uint64_t data_size) {
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  std::uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    auto range = "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + ")";
    if (e.end > data_size)
      truncated(path, "tensor '" + e.name + "' needs bytes " + range + " of the data buffer, which has " +
                          std::to_string(data_size) + " bytes");
    if (e.begin < pos)
      corrupt(path, "tensors '" + prev->name + "' and '" + e.name + "' overlap (the second starts at byte " +
                        std::to_string(e.begin) + ", the first ends at " + std::to_string(pos) + ")");
    if (e.begin > pos)
      corrupt(path, "bytes [" + std::to_string(pos) + ", " + std::to_string(e.begin) +
                        ") of the data buffer belong to no tensor");
    pos = e.end;
    prev = &e;
  }
  if (pos != data_size)
    corrupt(path, std::to_string(data_size - pos) + " bytes of trailing data after the last tensor (the data " +
                      "buffer has " + std::to_string(data_size) + " bytes, the tensors cover " + std::to_string(pos) + ")");
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const nlohmann::json& m) {
  if (!m.is_object()) corrupt(path, "__metadata__ is " + m.dump() + ", not an object of strings");
  std::map<std::string, std::string> out;
  for (const auto& item : m.items()) {
    if (!item.value().is_string())
      corrupt(path, "metadata value '" + item.key() + "' is " + item.value().dump() + ", not a string");
    out[item.key()] = item.value().get<std::string>();
  }
  return out;
}

nlohmann::json read_header(const std::string& path, std::ifstream& in, std::uint64_t file_size) {
  if (file_size < 8)
    truncated(path, "it has " + std::to_string(file_size) + " bytes, fewer than the 8-byte header size");
  unsigned char size_bytes[8];
  in.read(reinterpret_cast<char*>(size_bytes), 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | size_bytes[i];
  if (n > kMaxHeaderBytes)
    corrupt(path, "header size " + std::to_string(n) + " is absurd (the limit is " + std::to_string(kMaxHeaderBytes) + ")");
  if (n > file_size - 8)
    truncated(path, "header size " + std::to_string(n) + " but only " + std::to_string(file_size - 8) +
                        " bytes follow the size field");
  std::string text(n, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(n))) truncated(path, "the header could not be read whole");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    corrupt(path, std::string("the header is not valid JSON: ") + e.what());
  }
}

}  // namespace

void write_safetensors(const std::string& path, const Checkpoint& ckpt) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<std::string_view> data;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : ckpt.tensors) {
    check(!name.empty() && name != "__metadata__", "cannot write checkpoint '", path, "': tensor name '", name,
          "' is reserved or empty");
    check(t.raw() != nullptr, "cannot write checkpoint '", path, "': tensor '", name,
          "' has no storage (default-constructed); give it a dtype and shape");
    header[name] = {{"dtype", format_dtype(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", nlohmann::json::array({offset, offset + t.nbytes()})}};
    if (t.nbytes() > 0) data.emplace_back(static_cast<const char*>(t.raw()), t.nbytes());
    offset += t.nbytes();
  }
  if (!ckpt.metadata.empty()) header["__metadata__"] = ckpt.metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw_error("cannot write checkpoint '", path, "': a tensor name or metadata entry is not valid UTF-8 (",
                e.what(), ")");
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  char size_bytes[8];
  for (int i = 0; i < 8; ++i) size_bytes[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  std::vector<std::string_view> pieces = {std::string_view(size_bytes, 8), text};
  pieces.insert(pieces.end(), data.begin(), data.end());
  atomic_write_file(path, pieces);
}

Checkpoint read_safetensors(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw_error("checkpoint '", path, "' not found");
  std::uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) throw_error("cannot read checkpoint '", path, "': ", ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("cannot open checkpoint '", path, "': ", std::strerror(errno));
  nlohmann::json header = read_header(path, in, file_size);
  if (!header.is_object()) corrupt(path, "the header is " + std::string(header.type_name()) + ", not a JSON object");
  Checkpoint ckpt;
  std::vector<Entry> entries;
  for (const auto& item : header.items()) {
    if (item.key() == "__metadata__") ckpt.metadata = parse_metadata(path, item.value());
    else entries.push_back(parse_entry(path, item.key(), item.value()));
  }
  std::uint64_t header_end = static_cast<std::uint64_t>(in.tellg());  // 8 + header size
  check_layout(path, entries, file_size - header_end);
  for (const Entry& e : entries) {  // in file order, back to back
    Tensor t(e.dtype, e.shape);
    if (!in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes())))
      truncated(path, "the data of tensor '" + e.name + "' could not be read whole");
    ckpt.tensors.emplace(e.name, std::move(t));
  }
  return ckpt;
}

}  // namespace eggroll
