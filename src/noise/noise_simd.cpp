// The noise fills' run-time SIMD choice: detects the best level once, lets tests force one, and
// dispatches fill_normal, fill_int8 and fill_bits to it (every level writes the same bits).
#include "noise/noise_simd.hpp"

#include <atomic>
#include <limits>
#include <string>

#include "eggroll/core/error.hpp"

namespace eggroll {

const std::int8_t kInt8NormalTablePadded[kNormalTableSize + 4] = {
#include "int8_normal_table.inc"
};

namespace {

enum class Level { scalar = 0, avx2 = 1, avx512 = 2 };
constexpr const char* kLevelNames[] = {"scalar", "avx2", "avx512"};

// The best level this machine runs; the avx512 file is compiled with exactly these extensions.
Level detect_level() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return Level::avx512;
  if (__builtin_cpu_supports("avx2")) return Level::avx2;
#endif
  return Level::scalar;
}

const Level kBestLevel = detect_level();
std::atomic<int> g_level{static_cast<int>(kBestLevel)};

Level current_level() { return static_cast<Level>(g_level.load(std::memory_order_relaxed)); }

// The counter of the last value must fit the 32-bit counter word (values_per_block values each).
void check_range(std::uint64_t first, std::uint64_t count, std::uint64_t values_per_block, const char* what) {
  if (count == 0) return;
  check(count - 1 <= std::numeric_limits<std::uint64_t>::max() - first &&
            (first + count - 1) / values_per_block <= 0xFFFFFFFFull,
        "noise stream range [", first, ", ", first, " + ", count, ") reaches past ", values_per_block,
        " * 2^32 ", what, ": a stream holds at most that many; split the tensor over more parameter ids");
}

}  // namespace

const char* noise_simd_level() { return kLevelNames[static_cast<int>(current_level())]; }

void set_noise_simd(const char* level) {
  std::string want = level != nullptr ? level : "";
  if (want == "auto") want = kLevelNames[static_cast<int>(kBestLevel)];
  if (want == "avx512_vnni") want = "avx512";
  for (int l = 0; l <= static_cast<int>(kBestLevel); ++l)
    if (want == kLevelNames[l]) {
      g_level.store(l, std::memory_order_relaxed);
      return;
    }
  throw_error("noise SIMD level '", want, "' is not available: this machine runs up to '",
              kLevelNames[static_cast<int>(kBestLevel)], "'; choose one of auto, scalar, avx2, avx512 up to that");
}

void fill_normal(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, float* out) {
  check_range(first, count, 8, "values");
  switch (current_level()) {
#if defined(__x86_64__)
    case Level::avx512: return noise_simd::fill_normal_avx512(stream, first, count, out);
    case Level::avx2: return noise_simd::fill_normal_avx2(stream, first, count, out);
#endif
    default: return fill_normal_scalar(stream, first, count, out);
  }
}

void fill_int8(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::int8_t* out) {
  check_range(first, count, 8, "values");
  switch (current_level()) {
#if defined(__x86_64__)
    case Level::avx512: return noise_simd::fill_int8_avx512(stream, first, count, out);
    case Level::avx2: return noise_simd::fill_int8_avx2(stream, first, count, out);
#endif
    default: return fill_int8_scalar(stream, first, count, out);
  }
}

void fill_bits(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
  check_range(first, count, 4, "words");
  switch (current_level()) {
#if defined(__x86_64__)
    case Level::avx512: return noise_simd::fill_bits_avx512(stream, first, count, out);
    case Level::avx2: return noise_simd::fill_bits_avx2(stream, first, count, out);
#endif
    default: return fill_bits_scalar(stream, first, count, out);
  }
}

}  // namespace eggroll
