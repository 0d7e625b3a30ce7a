// Tensor storage: aligned allocation, copies, shapes.
#include "eggroll/core/tensor.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace eggroll {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::i8: return 1;
    case DType::i32: return 4;
    case DType::f64: return 8;
    case DType::i64: return 8;
  }
  return 0;
}

std::string dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::i8: return "i8";
    case DType::i32: return "i32";
    case DType::f64: return "f64";
    case DType::i64: return "i64";
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  if (name == "f32") return DType::f32;
  if (name == "i8") return DType::i8;
  if (name == "i32") return DType::i32;
  if (name == "f64") return DType::f64;
  if (name == "i64") return DType::i64;
  throw_error("unknown dtype '", name, "': expected f32, i8, i32, f64 or i64");
}

std::string shape_string(const Shape& shape) {
  std::ostringstream os;
  os << "(";
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ")";
  return os.str();
}

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) {
    // (the messages are made only on failure: every tensor's construction passes here)
    if (d < 0) throw_error("negative dimension in shape ", shape_string(shape));
    if (d != 0 && n > (std::int64_t{1} << 40) / d) throw_error("shape ", shape_string(shape), " is too large");
    n *= d;
  }
  return n;
}

// A tensor's block starts 64 bytes into its malloc block at most, and the malloc block's address is
// kept in the 8 bytes before it (aligned_buffer).
void Tensor::Free::operator()(void* p) const {
  if (p != nullptr) std::free(static_cast<void**>(p)[-1]);
}

// Padded to a whole number of 64-byte lines (plus one) so SIMD loops may read a full vector at
// the end; the padding is always zero, the values are zero when `zero` is set.
// From malloc, aligned by hand: glibc's aligned_alloc often leaves a freed large block unused and
// grows the heap instead, so a forward's activations kept landing on fresh pages (a page fault
// and a kernel clear per 4 KiB: plain inference 15-42% slower in such benchmark processes), where
// malloc reuses its freed blocks (with retain_freed_memory's thresholds, system.cpp).
static void* aligned_buffer(std::size_t bytes, bool zero) {
  std::size_t padded = (bytes + 63) / 64 * 64 + 64;
  void* raw = std::malloc(padded + 64);
  if (!raw) throw_error("out of memory allocating ", bytes, " bytes");
  void* p = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(raw) + 64) / 64 * 64);
  static_cast<void**>(p)[-1] = raw;
  if (zero)
    std::memset(p, 0, padded);
  else
    std::memset(static_cast<char*>(p) + bytes, 0, padded - bytes);
  return p;
}

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), numel_(shape_numel(shape_)),
      data_(aligned_buffer(nbytes(), true)) {}

Tensor Tensor::uninitialized(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.data_.reset(aligned_buffer(t.nbytes(), false));
  return t;
}

Tensor::Tensor(const Tensor& other)
    : dtype_(other.dtype_), shape_(other.shape_), numel_(other.numel_),
      data_(aligned_buffer(other.nbytes(), !other.data_)) {
  if (other.data_) std::memcpy(data_.get(), other.data_.get(), nbytes());
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

void Tensor::reshape(Shape shape) {
  auto n = shape_numel(shape);
  if (n != numel_) throw_error("cannot reshape ", shape_string(shape_), " to ", shape_string(shape));
  shape_ = std::move(shape);
}

void Tensor::fill_zero() {
  if (data_) std::memset(data_.get(), 0, nbytes());
}

}  // namespace eggroll
