// UnsetVector: a std::vector for buffers that kernels read with wide loads. Its memory is 64-byte
// aligned, so that a 64-byte load at a multiple of 64 from the start never spans two cache lines
// (malloc aligns to 16 only, so where a buffer's lines begin changed from process to process), and
// resize leaves new values unset, for buffers whose every value is written before it is read
// (clearing them would cost one more pass over them).
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace eggroll {

template <typename T>
struct UnsetAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  UnsetAllocator() = default;
  template <typename U>
  UnsetAllocator(const UnsetAllocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, std::size_t n) { ::operator delete(p, n * sizeof(T), kAlign); }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0)
      ::new (static_cast<void*>(p)) U;  // default-initialised: left unset
    else
      ::new (static_cast<void*>(p)) U(static_cast<Args&&>(args)...);
  }
  template <typename U>
  bool operator==(const UnsetAllocator<U>&) const { return true; }
};

template <typename T>
using UnsetVector = std::vector<T, UnsetAllocator<T>>;

}  // namespace eggroll
