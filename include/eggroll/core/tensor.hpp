// Tensor: an owning, 64-byte aligned, row-major buffer with a run-time dtype and shape.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "eggroll/core/error.hpp"

namespace eggroll {

enum class DType { f32, i8, i32, f64, i64 };

std::size_t dtype_size(DType dtype);
std::string dtype_name(DType dtype);          // "f32", "i8", "i32", "f64", "i64"
DType dtype_from_name(const std::string& name);  // throws on an unknown name

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<std::int8_t>() { return DType::i8; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<std::int64_t>() { return DType::i64; }

using Shape = std::vector<std::int64_t>;
std::string shape_string(const Shape& shape);  // "(3, 4)"
std::int64_t shape_numel(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);  // zero-filled
  static Tensor zeros_like(const Tensor& other) { return Tensor(other.dtype(), other.shape()); }
  // Values left unset, for outputs an op overwrites entirely (saves clearing them first).
  static Tensor uninitialized(DType dtype, Shape shape);

  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::int64_t dim(std::size_t i) const { return shape_.at(i); }
  std::size_t ndim() const { return shape_.size(); }
  std::int64_t numel() const { return numel_; }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel_) * dtype_size(dtype_); }
  bool empty() const { return numel_ == 0; }

  void* raw() { return data_.get(); }
  const void* raw() const { return data_.get(); }
  template <typename T> T* data() { check_dtype<T>(); return static_cast<T*>(raw()); }
  template <typename T> const T* data() const { check_dtype<T>(); return static_cast<const T*>(raw()); }

  // Same data, new shape with the same number of elements.
  void reshape(Shape shape);
  void fill_zero();

 private:
  template <typename T> void check_dtype() const {
    if (dtype_of<T>() != dtype_)
      throw_error("tensor of dtype ", dtype_name(dtype_), " accessed as ", dtype_name(dtype_of<T>()));
  }
  struct Free { void operator()(void* p) const; };
  DType dtype_ = DType::f32;
  Shape shape_;
  std::int64_t numel_ = 0;
  std::unique_ptr<void, Free> data_;
};

}  // namespace eggroll
