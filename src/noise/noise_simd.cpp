// The noise fills' run-time SIMD choice: detects the best level once, lets tests force one, and
// dispatches fill_normal, fill_int8 and fill_bits to it (every level writes the same bits).
#include "noise/noise_simd.hpp"

#include <limits>
#include <string>

#include "core/simd_choice.hpp"
#include "eggroll/core/error.hpp"

namespace eggroll {

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

namespace {

// base + 1 and the offset of the rise of kInt8NormalTable's bucket [first, first + size) (size
// where it does not rise); throws where it rises by more than one.
void level_bucket(int first, int size, std::uint8_t& base1, std::uint8_t& step) {
  const std::int8_t* b = kInt8NormalTable + first;
  if (b[size - 1] - b[0] > 1)
    throw_error("int8 noise table: entries ", first, " to ", first + size - 1, " rise by ", b[size - 1] - b[0],
                ", more than the AVX2 lookup's one step per bucket; regenerate the table with "
                "scripts/gen_normal_table.py or move the lookup's level bounds");
  step = static_cast<std::uint8_t>(size);
  for (int o = size - 1; o >= 1; --o)
    if (b[o] != b[o - 1]) step = static_cast<std::uint8_t>(o);
  base1 = static_cast<std::uint8_t>(b[0] + 1);
}

}  // namespace

// The levels' entries as the AVX2 lookup computes them (noise_simd.hpp): the mid range is 16 buckets of
// 16, the fine one 12 of 8 whose entries do not meet those of the indices past it, the last 32.
static_assert(kInt8MidStart % 64 == 0 && kInt8FineStart == kInt8MidStart + 256 && kInt8FineStart % 128 == 0 &&
              kInt8LastStart == kInt8FineStart + 96 && kInt8LastStart + 32 == kNormalTableSize);

const Int8Levels& int8_levels() {
  static const Int8Levels levels = [] {
    for (int j = 1; j < kNormalTableSize; ++j)
      if (kInt8NormalTable[j] < kInt8NormalTable[j - 1] || kInt8NormalTable[j] > 126)
        throw_error("int8 noise table: entry ", j, " (", int{kInt8NormalTable[j]},
                    ") breaks the AVX2 lookup's order (non-decreasing, below 127); regenerate the table with "
                    "scripts/gen_normal_table.py");
    Int8Levels t{};
    const auto top = [](int end) { return static_cast<std::uint8_t>(kInt8NormalTable[end - 1] + 1); };
    for (int h = 0; h < 64; ++h) {
      if (64 * h < kInt8MidStart) {
        level_bucket(64 * h, 64, t.coarse_base1[h], t.coarse_step[h]);
      } else {  // past the range: its top value, no rise
        t.coarse_base1[h] = top(kInt8MidStart);
        t.coarse_step[h] = 64;
      }
    }
    for (int j = kInt8MidStart; j < kInt8FineStart; j += 16) {
      const int e = (j >> 4) & 15;
      level_bucket(j, 16, t.mid_base1[e], t.mid_step[e]);
    }
    for (int e = 0; e < 16; ++e) {
      t.fine_base1[e] = top(kInt8LastStart);
      t.fine_step[e] = 8;
    }
    for (int j = kInt8FineStart; j < kInt8LastStart; j += 8) {
      const int e = (j >> 3) & 15;
      level_bucket(j, 8, t.fine_base1[e], t.fine_step[e]);
    }
    for (int i = 0; i < 32; ++i) t.last[i] = kInt8NormalTable[kInt8LastStart + i];
    return t;
  }();
  return levels;
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
