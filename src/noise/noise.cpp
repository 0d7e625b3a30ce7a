// Key derivation, the normal quantile table and the scalar stream fills, which define the streams
// (see noise.hpp for the layout); noise_simd.cpp dispatches fill_* to them or a SIMD level.
#include "eggroll/noise/noise.hpp"

#include <algorithm>

#include "eggroll/core/error.hpp"
#include "noise/noise_simd.hpp"

namespace eggroll {

const float kNormalTable[kNormalTableSize] = {
#include "normal_table.inc"
};

std::uint64_t param_id(std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

NoiseStream noise_stream(std::uint64_t seed, std::uint64_t param, std::uint64_t epoch,
                         std::uint64_t pair, NoiseTag tag) {
  check(epoch <= 0xFFFFFFFFull && pair <= 0xFFFFFFFFull,
        "noise stream index out of range: epoch ", epoch, ", pair ", pair, " (both must be < 2^32)");
  std::uint64_t k = mix64(seed ^ mix64(param));
  return {{static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(k >> 32)},
          static_cast<std::uint32_t>(tag), static_cast<std::uint32_t>(pair),
          static_cast<std::uint32_t>(epoch)};
}

static PhiloxCounter block(const NoiseStream& s, std::uint64_t index) {
  check(index <= 0xFFFFFFFFull, "noise stream longer than 2^35 values");
  return philox4x32_10({static_cast<std::uint32_t>(index), s.tag, s.pair, s.epoch}, s.key);
}

void fill_normal_scalar(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, float* out) {
  std::uint64_t e = first, end = first + count;
  while (e < end) {
    PhiloxCounter w = block(stream, e / 8);
    for (std::uint64_t j = e % 8; j < 8 && e < end; ++j, ++e) {
      std::uint32_t word = w[j / 2];
      *out++ = normal_from_bits((j & 1) ? (word >> 16) : (word & 0xFFFFu));
    }
  }
}

void fill_bits_scalar(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
  std::uint64_t e = first, end = first + count;
  while (e < end) {
    PhiloxCounter w = block(stream, e / 4);
    for (std::uint64_t j = e % 4; j < 4 && e < end; ++j, ++e) *out++ = w[j];
  }
}

std::uint64_t table_offset(std::uint64_t seed, std::uint64_t param, std::uint64_t epoch,
                           std::uint64_t pair, std::uint64_t table_size, std::uint64_t slice_len) {
  check(slice_len <= table_size, "a factor slice of ", slice_len, " values does not fit in a noise table of ",
        table_size, " values: raise es.table_log2_size or use es.noise_source = \"generator\"");
  std::uint64_t h = mix64(mix64(mix64(mix64(seed) ^ param) ^ epoch) ^ pair);
  return h % (table_size - slice_len + 1);
}

}  // namespace eggroll

namespace eggroll {

// Fills a table of 2^log2_size values of the stream (seed, "noise_table") in parallel chunks.
template <typename T, typename Fill>
static HugePageArray<T> fill_table(std::uint64_t seed, int log2_size, Fill fill) {
  check(log2_size >= 10 && log2_size <= 30, "es.table_log2_size = ", log2_size, ": expected 10..30");
  const std::int64_t size = std::int64_t{1} << log2_size;
  HugePageArray<T> values;
  try {
    values = make_huge_page_array<T>(static_cast<std::size_t>(size));
  } catch (const Error& e) {
    throw_error("the noise table (es.table_log2_size = ", log2_size, ": ", (size * sizeof(T)) >> 20, " MiB): ",
                e.what(), "; lower es.table_log2_size or use es.noise_source = \"generator\"");
  }
  const NoiseStream stream = noise_stream(seed, param_id("noise_table"), 0, 0, NoiseTag::table);
  // Chunks of 2^16 values (the whole table when it is smaller; sizes are powers of two).
  const std::int64_t chunk = std::min<std::int64_t>(size, std::int64_t{1} << 16);
  const std::int64_t n_chunks = size / chunk;
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < n_chunks; ++c)
    fill(stream, static_cast<std::uint64_t>(c * chunk), static_cast<std::uint64_t>(chunk), values.get() + c * chunk);
  return values;
}

NoiseTable::NoiseTable(std::uint64_t seed, int log2_size)
    : seed_(seed), values_(fill_table<float>(seed, log2_size, fill_normal)), size_(std::uint64_t{1} << log2_size) {}

Int8NoiseTable::Int8NoiseTable(std::uint64_t seed, int log2_size)
    : seed_(seed), values_(fill_table<std::int8_t>(seed, log2_size, fill_int8)), size_(std::uint64_t{1} << log2_size) {}

const std::int8_t kInt8NormalTable[kNormalTableSize] = {
#include "int8_normal_table.inc"
};

void fill_int8_scalar(const NoiseStream& stream, std::uint64_t first, std::uint64_t count, std::int8_t* out) {
  std::uint64_t e = first, end = first + count;
  while (e < end) {
    PhiloxCounter w = block(stream, e / 8);
    for (std::uint64_t j = e % 8; j < 8 && e < end; ++j, ++e) {
      std::uint32_t word = w[j / 2];
      *out++ = int8_from_bits((j & 1) ? (word >> 16) : (word & 0xFFFFu));
    }
  }
}

double int8_noise_variance() {
  std::int64_t sum = 0;
  for (std::int8_t q : kInt8NormalTable) sum += std::int64_t{q} * q;
  return static_cast<double>(sum) / kNormalTableSize;
}

}  // namespace eggroll
