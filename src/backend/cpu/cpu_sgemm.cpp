// The cpu backend's fp32 GEMM (cpu_sgemm.hpp): the SIMD level chosen once at run time, the
// per-thread packing buffer, and the scalar level (the reference order, std::fma per k).
#include "backend/cpu/cpu_sgemm.hpp"

#include <omp.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/simd_choice.hpp"
#include "eggroll/core/error.hpp"

namespace eggroll::cpu_sgemm {
namespace {

// The best level this machine runs (and this build compiled).
SimdChoice::Level detect_level() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return SimdChoice::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return SimdChoice::avx2;
#endif
  return SimdChoice::scalar;
}

SimdChoice& choice() {
  static SimdChoice c("cpu sgemm", "avx512", detect_level());
  return c;
}

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

const char* level() { return choice().name(); }

namespace {

std::atomic<FusedBlockRows>& block_rows_rule() {
  static std::atomic<FusedBlockRows> rule{FusedBlockRows::automatic};
  return rule;
}

}  // namespace

namespace detail {

std::int64_t l2_bytes() {
  static const std::int64_t bytes = [] {
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? static_cast<std::int64_t>(v) : std::int64_t{0};
  }();
  return bytes;
}

}  // namespace detail

void set_fused_block_rows(FusedBlockRows rule) { block_rows_rule().store(rule, std::memory_order_relaxed); }

bool fused_block_rows_limited() {
  switch (block_rows_rule().load(std::memory_order_relaxed)) {
    case FusedBlockRows::fetch_budget: return true;
    case FusedBlockRows::whole: return false;
    default: return detail::l2_bytes() < (std::int64_t{2} << 20);
  }
}

void set_level(const char* name) { choice().set(name); }

std::vector<std::string> levels() { return choice().levels(); }

namespace detail {

namespace {

// Freed packs' memory (PackedPanels), up to kKeepBytes, for the next packs to take.
class SparePanels {
 public:
  static SparePanels& instance() {
    static SparePanels* spares = new SparePanels;  // never destroyed: packs may outlive static destructors
    return *spares;
  }
  // A block of at least bytes (64-byte aligned); its size in *got.
  float* take(std::size_t bytes, std::size_t* got) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::size_t best = blocks_.size();
      for (std::size_t i = 0; i < blocks_.size(); ++i)
        if (blocks_[i].second >= bytes && (best == blocks_.size() || blocks_[i].second < blocks_[best].second)) best = i;
      if (best < blocks_.size()) {
        const auto [data, size] = blocks_[best];
        blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(best));
        kept_ -= size;
        *got = size;
        return data;
      }
    }
    auto* data = static_cast<float*>(std::aligned_alloc(64, bytes));
    check(data != nullptr, "cpu sgemm: could not allocate ", bytes, " bytes for packed weights");
    *got = bytes;
    return data;
  }
  void give(float* data, std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (kept_ + bytes <= kKeepBytes) {
        blocks_.emplace_back(data, bytes);
        kept_ += bytes;
        return;
      }
    }
    std::free(data);
  }

 private:
  static constexpr std::size_t kKeepBytes = std::size_t{256} << 20;
  std::mutex mutex_;
  std::vector<std::pair<float*, std::size_t>> blocks_;
  std::size_t kept_ = 0;
};

}  // namespace

PackedPanels::PackedPanels(int nr, std::int64_t m, std::int64_t n)
    : nr_(nr), m_(m), n_(n), panels_((m + nr - 1) / nr), bytes_(0), data_(nullptr) {
  const std::int64_t floats = panels_ * n * nr;
  data_ = SparePanels::instance().take((static_cast<std::size_t>(floats) * sizeof(float) + 63) / 64 * 64, &bytes_);
}

PackedPanels::~PackedPanels() { SparePanels::instance().give(data_, bytes_); }

void PackedPanels::wait_filled() const {
  // A panel takes microseconds: spin briefly, then let the packing threads have the core.
  for (int spins = 0; !filled(); ++spins)
    if (spins >= 256) std::this_thread::yield();
}

const PackedPanels* PackedPanels::of(const PackedWeights* packed, int nr, std::int64_t m, std::int64_t n) {
  const auto* p = dynamic_cast<const PackedPanels*>(packed);
  return p != nullptr && p->nr_ == nr && p->m_ == m && p->n_ == n ? p : nullptr;
}

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

void finish_rows(std::int64_t rows, std::int64_t m, const RowFinish& finish, float* y) {
  for (std::int64_t i = 0; i < rows; ++i) {
    float* yi = y + i * m;
    if (finish.bias != nullptr) {
      const float* b = finish.bias_of_row(i);
      for (std::int64_t a = 0; a < m; ++a) yi[a] += b[a];
    }
    if (finish.relu)
      for (std::int64_t a = 0; a < m; ++a) yi[a] = yi[a] > 0.0f ? yi[a] : 0.0f;
    if (finish.kernel != nullptr) finish.kernel(finish.activation, m, yi, yi);
  }
}

std::shared_ptr<const PackedWeights> pack(std::int64_t m, std::int64_t n) {
  if (m <= 0 || n <= 0) return nullptr;
  switch (choice().level()) {
#if defined(__x86_64__)
    case SimdChoice::avx512: return detail::pack_avx512(m, n);
    case SimdChoice::avx2: return detail::pack_avx2(m, n);
#endif
    default: return nullptr;
  }
}

void gemm_nt(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y,
             const RowFinish* finish, const PackedWeights* packed) {
  check(rows >= 0 && m >= 0 && n >= 0, "cpu sgemm: shape (rows ", rows, ", m ", m, ", n ", n,
        ") has a negative size, expected sizes >= 0");
  if (rows == 0 || m == 0) return;
  if (n == 0) {
    for (std::int64_t i = 0; i < rows * m; ++i) y[i] = 0.0f;
    if (finish != nullptr) finish_rows(rows, m, *finish, y);
    return;
  }
  switch (choice().level()) {
#if defined(__x86_64__)
    case SimdChoice::avx512: return detail::gemm_nt_avx512(rows, m, n, x, w, y, finish, packed);
    case SimdChoice::avx2: return detail::gemm_nt_avx2(rows, m, n, x, w, y, finish, packed);
#endif
    default:
      gemm_nt_scalar(rows, m, n, x, w, y);
      if (finish != nullptr) finish_rows(rows, m, *finish, y);
  }
}

}  // namespace eggroll::cpu_sgemm
