// The noise fills' run-time SIMD choice: detects the best level once, lets tests force one, and
// dispatches fill_normal, fill_int8 and fill_bits to it (every level writes the same bits).
#include "noise/noise_simd.hpp"

#include <limits>
#include <string>

#include "core/simd_choice.hpp"
#include "eggroll/core/error.hpp"

namespace eggroll {

const std::int8_t kInt8NormalTablePadded[kNormalTableSize + 4] = {
#include "int8_normal_table.inc"
};

namespace {

// The best level this machine runs; the avx512 file is compiled with exactly these extensions.
SimdChoice::Level detect_level() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return SimdChoice::avx512;
  if (__builtin_cpu_supports("avx2")) return SimdChoice::avx2;
#endif
  return SimdChoice::scalar;
}

SimdChoice& choice() {
  static SimdChoice c("noise", "avx512", detect_level());
  return c;
}

// The counter of the last value must fit the 32-bit counter word (values_per_block values each).
void check_range(std::uint64_t first, std::uint64_t count, std::uint64_t values_per_block, const char* what) {
  if (count == 0) return;
  check(count - 1 <= std::numeric_limits<std::uint64_t>::max() - first &&
            (first + count - 1) / values_per_block <= 0xFFFFFFFFull,
        "noise stream range [", first, ", ", first, " + ", count, ") reaches past ", values_per_block,
        " * 2^32 ", what, ": a stream holds at most that many; split the tensor over more parameter ids");
}

}  // namespace

namespace noise_simd {

const Int8Buckets& int8_buckets() {
  static const Int8Buckets buckets = [] {
    Int8Buckets t{};
    for (int h = 0; h < 128; ++h) {
      const std::int8_t* b = kInt8NormalTable + h * kInt8Bucket;
      if (h * kInt8Bucket >= kInt8TailStart) {
        t.base[h] = 0x80;
        t.step[h] = kInt8Bucket;
        continue;
      }
      int step = kInt8Bucket;
      for (int o = kInt8Bucket - 1; o >= 1; --o)
        if (b[o] != b[o - 1]) step = o;
      if (b[kInt8Bucket - 1] - b[0] > 1)
        throw_error("int8 noise table: entries ", h * kInt8Bucket, " to ", h * kInt8Bucket + kInt8Bucket - 1,
                    " rise by ", b[kInt8Bucket - 1] - b[0], ", more than the AVX-512 lookup's one step per bucket; "
                    "regenerate the table with scripts/gen_normal_table.py or widen the lookup's tail");
      t.base[h] = static_cast<std::uint8_t>(b[0]);
      t.step[h] = static_cast<std::uint8_t>(step);
    }
    for (int i = 0; i < 128; ++i) t.tail[i] = kInt8NormalTable[kInt8TailStart + i];
    return t;
  }();
  return buckets;
}

bool cpu_has_vbmi() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vbmi") != 0;
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace noise_simd

const char* noise_simd_level() { return choice().name(); }

void set_noise_simd(const char* level) { choice().set(level); }

std::vector<std::string> noise_simd_levels() { return choice().levels(); }

void fill_normal(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, float* out) {
  check_range(first, count, 8, "values");
  switch (choice().level()) {
#if defined(__x86_64__)
    case SimdChoice::avx512: return noise_simd::fill_normal_avx512(stream, first, count, out);
    case SimdChoice::avx2: return noise_simd::fill_normal_avx2(stream, first, count, out);
#endif
    default: return fill_normal_scalar(stream, first, count, out);
  }
}

void fill_int8(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::int8_t* out) {
  check_range(first, count, 8, "values");
  switch (choice().level()) {
#if defined(__x86_64__)
    case SimdChoice::avx512: return noise_simd::fill_int8_avx512(stream, first, count, out);
    case SimdChoice::avx2: return noise_simd::fill_int8_avx2(stream, first, count, out);
#endif
    default: return fill_int8_scalar(stream, first, count, out);
  }
}

void fill_bits(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
  check_range(first, count, 4, "words");
  switch (choice().level()) {
#if defined(__x86_64__)
    case SimdChoice::avx512: return noise_simd::fill_bits_avx512(stream, first, count, out);
    case SimdChoice::avx2: return noise_simd::fill_bits_avx2(stream, first, count, out);
#endif
    default: return fill_bits_scalar(stream, first, count, out);
  }
}

}  // namespace eggroll
