// The cpu backend's fp32 GEMM (cpu_sgemm.hpp): the SIMD level chosen once at run time, the
// per-thread packing buffer, and the scalar level (the reference order, std::fma per k).
#include "backend/cpu/cpu_sgemm.hpp"

#include <omp.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>

#include "eggroll/core/error.hpp"

namespace eggroll::cpu_sgemm {
namespace {

enum class Level { scalar = 0, avx2 = 1, avx512 = 2 };
constexpr const char* kLevelNames[] = {"scalar", "avx2", "avx512"};

// The best level this machine runs (and this build compiled).
Level detect_level() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return Level::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Level::avx2;
#endif
  return Level::scalar;
}

const Level kBestLevel = detect_level();
std::atomic<int> g_level{static_cast<int>(kBestLevel)};

Level current_level() { return static_cast<Level>(g_level.load(std::memory_order_relaxed)); }

// y[i][a] = the FMA chain over k = 0 .. n-1 (cpu_sgemm.hpp), one row per iteration.
void gemm_nt_scalar(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y) {
#pragma omp parallel for schedule(static) if (rows * m * n >= detail::kParallelMinWork)
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* xi = x + i * n;
    for (std::int64_t a = 0; a < m; ++a) {
      const float* wa = w + a * n;
      float acc = 0.0f;
      for (std::int64_t k = 0; k < n; ++k) acc = std::fma(xi[k], wa[k], acc);
      y[i * m + a] = acc;
    }
  }
}

}  // namespace

const char* level() { return kLevelNames[static_cast<int>(current_level())]; }

void set_level(const char* name) {
  std::string want = name != nullptr ? name : "";
  if (want == "auto") want = kLevelNames[static_cast<int>(kBestLevel)];
  for (int l = 0; l <= static_cast<int>(kBestLevel); ++l)
    if (want == kLevelNames[l]) {
      g_level.store(l, std::memory_order_relaxed);
      return;
    }
  throw_error("cpu sgemm SIMD level '", want, "' is not available: this machine runs up to '",
              kLevelNames[static_cast<int>(kBestLevel)], "'; choose one of scalar, avx2, avx512 up to that, or auto");
}

namespace detail {

// Grow-only, 64-byte aligned, one per calling thread: a fresh allocation per call would pay a
// page fault per 4 KiB of packed W each time.
float* thread_buffer(std::int64_t n_floats) {
  struct Buffer {
    std::unique_ptr<float, decltype(&std::free)> data{nullptr, &std::free};
    std::int64_t capacity = 0;
  };
  thread_local Buffer buffer;
  if (n_floats > buffer.capacity) {
    const std::size_t bytes = (static_cast<std::size_t>(n_floats) * sizeof(float) + 63) / 64 * 64;
    buffer.data.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    check(buffer.data != nullptr, "cpu sgemm: could not allocate ", bytes, " bytes for the packed weights");
    buffer.capacity = n_floats;
  }
  return buffer.data.get();
}

}  // namespace detail

void gemm_nt(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y) {
  check(rows >= 0 && m >= 0 && n >= 0, "cpu sgemm: shape (rows ", rows, ", m ", m, ", n ", n,
        ") has a negative size, expected sizes >= 0");
  if (rows == 0 || m == 0) return;
  if (n == 0) {
    for (std::int64_t i = 0; i < rows * m; ++i) y[i] = 0.0f;
    return;
  }
  switch (current_level()) {
#if defined(__x86_64__)
    case Level::avx512: return detail::gemm_nt_avx512(rows, m, n, x, w, y);
    case Level::avx2: return detail::gemm_nt_avx2(rows, m, n, x, w, y);
#endif
    default: return gemm_nt_scalar(rows, m, n, x, w, y);
  }
}

}  // namespace eggroll::cpu_sgemm
