// Internal to the AVX-512 VNNI level of the int8 update (ALGORITHM.md 2.6), and only for files
// compiled with its flags: the tile and its epilogue shared by the two sign kernels, and their
// entry points, for cpu_int8_update_avx512.cpp (which picks one) and the two files that hold them.
// Every d must be -1, 0 or 1 (the caller checks); the sums are exact, so the result equals the
// scalar level's bit for bit whatever the threads.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/avx512_columns.hpp"

// GCC 12's AVX-512 headers trip false (maybe-)uninitialized warnings on their own _mm512_undefined
// operands (GCC bug 105593), as in cpu_int8_avx512.cpp.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace eggroll::cpu_int8::detail::update_signs {

constexpr int kRows = 6;            // z rows per tile: 6 x 4 accumulators
constexpr std::int64_t kCols = 64;  // z columns per tile

// Line `line` of a tile's z (RT rows of 64 int64 from zt, row stride ldz: 8 lines a row), fetched
// for writing; none past them. A tile asks for one a quad, so its epilogue finds them in cache.
template <int RT>
inline void fetch_z_line(const std::int64_t* zt, std::int64_t ldz, std::int64_t line) {
  if (line < RT * 8) _mm_prefetch(reinterpret_cast<const char*>(zt + (line / 8) * ldz + (line % 8) * 8), _MM_HINT_ET0);
}

// z rows [0, RT) x columns [0, min(cols, 64)) (row stride ldz) += c[i] - the share: the end of a
// quad tile. The share is the row's, rowsum[i * rowsum_stride], or, with a null rowsum, the
// column's, colsum[col]. The accumulators are stored first, then widened from
// memory: with this epilogue on the registers, GCC 12 keeps a stack copy of every accumulator,
// stored on each step of the tile's loop (2-3x the time).
template <int RT>
inline void add_tile_to_z(const __m512i (&c)[RT][4], const std::int32_t* rowsum, std::int64_t rowsum_stride,
                          const std::int32_t* colsum, std::int64_t cols, std::int64_t* z, std::int64_t ldz) {
  alignas(64) std::int32_t part[RT][kCols];
#pragma GCC unroll 8
  for (int i = 0; i < RT; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) _mm512_store_si512(part[i] + 16 * v, c[i][v]);
  cols = std::min(kCols, cols);
  for (int i = 0; i < RT; ++i) {
    const __m512i row_share = _mm512_set1_epi32(rowsum != nullptr ? rowsum[i * rowsum_stride] : 0);
    for (std::int64_t col = 0; col < cols; col += 16) {
      const __m512i share = rowsum != nullptr ? row_share : _mm512_load_si512(colsum + col);
      avx512::add16_to_z(z + i * ldz + col, cols - col, _mm512_sub_epi32(_mm512_load_si512(part[i] + col), share), 1);
    }
  }
}

// z (m, n) += sum_k d_k A_k B_k^T with both factors packed a quad of four terms at a time (any
// rank; cpu_int8_update_quads_avx512.cpp).
void add_packed(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs, const std::int8_t* const* blocks,
                const std::int8_t* d, std::int64_t* z);

// The same at ranks 4, 8 and 16, reading the factor blocks in place
// (cpu_int8_update_in_place_avx512.cpp).
void add_in_place(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                  const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z);

// At ranks 4, 8 and 16: w = clip(w + sign(v)) where |v| >= threshold, v the sums above (z zero),
// in the last pass over the sums; returns how many values changed (qapply_moves's count).
std::int64_t apply_in_place(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                            const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t threshold,
                            std::int8_t* w);

}  // namespace eggroll::cpu_int8::detail::update_signs
