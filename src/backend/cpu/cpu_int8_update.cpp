// The cpu backend's discrete-update accumulator (ALGORITHM.md 2.6): the pairs' factors packed
// into int16 term pairs, then the level's kernel; plus the scalar-level kernel.
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include "backend/int8_ops.hpp"

namespace eggroll::cpu_int8 {
namespace {

// One rank-1 term of the sum: pair k's column c, weighted by d[k].
struct Term {
  std::int64_t k = 0, c = 0;
};

// The most term pairs whose int32 partial sum cannot overflow: each term is at most
// (128 max|d|) * 128 in magnitude.
std::int64_t chunk_pairs(std::int64_t max_d) {
  const std::int64_t per_pair = 2 * 128 * 128 * std::max<std::int64_t>(max_d, 1);
  return std::max<std::int64_t>(1, std::int64_t{2147483647} / per_pair);
}

// bp (UpdateArgs): term 2 jp + e's B column, zero past n and for a missing last term.
void pack_b(const std::vector<Term>& terms, std::int64_t n, std::int64_t r, const std::int8_t* const* blocks,
            const detail::UpdateArgs& g, std::int16_t* bp) {
  const std::int64_t n_terms = static_cast<std::int64_t>(terms.size());
  if (detail::pack_b_pairs_available(r)) {  // even ranks: a pair's r / 2 term pairs at once
    const std::int64_t pairs = n_terms / r;
#pragma omp parallel for schedule(static) if (g.n_jp * g.n_pad > detail::kParallelMinWork)
    for (std::int64_t q = 0; q < pairs; ++q)
      detail::pack_b_pair_avx2(r, blocks[terms[static_cast<std::size_t>(r * q)].k], q * r / 2, g, bp);
    return;
  }
#pragma omp parallel for schedule(static) if (g.n_jp * g.n_pad > detail::kParallelMinWork)
  for (std::int64_t jp = 0; jp < g.n_jp; ++jp) {
    // the two terms' B columns (stride r), a missing last term's as zeros
    const Term& t0 = terms[static_cast<std::size_t>(2 * jp)];
    const bool second = 2 * jp + 1 < n_terms;
    const Term& t1 = terms[static_cast<std::size_t>(second ? 2 * jp + 1 : 2 * jp)];
    const std::int8_t* b0col = blocks[t0.k] + t0.c;
    const std::int8_t* b1col = blocks[t1.k] + t1.c;
    // Rank 1: the whole blocks of rows by the level's vector kernel where it has one.
    const std::int64_t from = r == 1 ? detail::pack_b_rank1_dispatch(b0col, second ? b1col : nullptr, jp, g, bp) : 0;
    for (std::int64_t b0 = from; b0 < g.n_pad; b0 += g.kBpCols) {
      std::int16_t* out = bp + g.bp_offset(jp, b0);
      const std::int64_t rows = std::clamp<std::int64_t>(n - b0, 0, g.kBpCols);
      for (std::int64_t b = 0; b < rows; ++b) {
        out[2 * b] = b0col[(b0 + b) * r];
        out[2 * b + 1] = second ? b1col[(b0 + b) * r] : std::int16_t{0};
      }
      std::fill(out + 2 * rows, out + 2 * g.kBpCols, std::int16_t{0});
    }
  }
}

// coef (m, 2 n_jp): d_k A_k[a][c] for each term, zero for a missing last term. In blocks of 64
// rows x 64 terms, row by row: a block reads 64 rows of its few factor blocks (in L1) and
// writes 128 contiguous bytes of each row. (Row by row over every term, each row reads a line
// of every factor block; column by column, the rows' stride maps every write to one L1 set.)
void pack_coef(const std::vector<Term>& terms, std::int64_t n, std::int64_t r, const std::int8_t* const* blocks,
               const std::int8_t* d, const detail::UpdateArgs& g, std::int16_t* coef) {
  constexpr std::int64_t kBlock = 64;
  const std::int64_t n_terms = static_cast<std::int64_t>(terms.size()), width = 2 * g.n_jp;
  const std::int64_t row_blocks = (g.m + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (g.m * g.n_jp > detail::kParallelMinWork)
  for (std::int64_t rb = 0; rb < row_blocks; ++rb) {
    const std::int64_t a0 = rb * kBlock, a1 = std::min(g.m, a0 + kBlock);
    const std::int8_t* col[kBlock];  // the block's terms: A_k[:, c] (stride r) and d_k
    std::int16_t dk[kBlock];
    for (std::int64_t j0 = 0; j0 < width; j0 += kBlock) {
      const std::int64_t j1 = std::min(width, j0 + kBlock);
      for (std::int64_t j = j0; j < j1; ++j) {
        const bool present = j < n_terms;
        const Term& t = terms[static_cast<std::size_t>(present ? j : 0)];
        col[j - j0] = blocks[t.k] + n * r + t.c;
        dk[j - j0] = present ? d[t.k] : 0;
      }
      // Ranks 1, 4, 8, 16: the block's whole pairs by the level's vector kernel where it has one (a
      // pair's r terms are consecutive, and blocks start at a pair's first).
      std::int64_t done = 0;
      if (r == 1 || r == 4 || r == 8 || r == 16) {
        const std::int8_t* a_of[kBlock];
        std::int16_t d_of[kBlock];
        const std::int64_t pairs = (std::min(j1, n_terms) - j0) / r;
        for (std::int64_t q = 0; q < pairs; ++q) {
          a_of[q] = col[r * q];
          d_of[q] = dk[r * q];
        }
        if (detail::pack_coef_pairs_dispatch(r, a_of, d_of, pairs, a0, a1, width, coef + j0)) done = r * pairs;
      }
      for (std::int64_t a = a0; a < a1; ++a) {
        std::int16_t* out = coef + a * width;
        for (std::int64_t j = j0 + done; j < j1; ++j)
          out[j] = static_cast<std::int16_t>(dk[j - j0] * col[j - j0][a * r]);
      }
    }
  }
}

}  // namespace

namespace detail {

// z[a][b] += sum over term pairs of coef . Bp[jp][b], int32 within each chunk of term pairs.
void update_scalar(const UpdateArgs& g) {
#pragma omp parallel if (g.m * g.n * g.n_jp > kParallelMinWork)
  {
    std::vector<std::int32_t> part(static_cast<std::size_t>(g.n_pad));
#pragma omp for schedule(static)
    for (std::int64_t a = 0; a < g.m; ++a) {
      const std::int16_t* ca = g.coef + a * 2 * g.n_jp;
      for (std::int64_t j0 = 0; j0 < g.n_jp; j0 += g.chunk_jp) {
        const std::int64_t j1 = std::min(g.n_jp, j0 + g.chunk_jp);
        std::fill(part.begin(), part.end(), 0);
        for (std::int64_t jp = j0; jp < j1; ++jp) {
          const std::int32_t c0 = ca[2 * jp], c1 = ca[2 * jp + 1];
          for (std::int64_t b0 = 0; b0 < g.n_pad; b0 += g.kBpCols) {
            const std::int16_t* bj = g.bp_at(jp, b0);
            for (std::int64_t b = 0; b < g.kBpCols; ++b) part[b0 + b] += c0 * bj[2 * b] + c1 * bj[2 * b + 1];
          }
        }
        for (std::int64_t b = 0; b < g.n; ++b) g.z[a * g.n + b] += part[b];
      }
    }
  }
}

void run_update_tiles(const UpdateArgs& g, int tile_rows, std::int64_t tile_cols, const UpdateTileFn* tiles) {
  const std::int64_t n_col_blocks = (g.n + tile_cols - 1) / tile_cols, n_row_blocks = (g.m + tile_rows - 1) / tile_rows;
#pragma omp parallel for collapse(2) schedule(static) if (g.m * g.n * g.n_jp > kParallelMinWork)
  for (std::int64_t cb = 0; cb < n_col_blocks; ++cb)
    for (std::int64_t rb = 0; rb < n_row_blocks; ++rb) {
      const std::int64_t a0 = rb * tile_rows;
      const UpdateTileFn tile = tiles[std::min<std::int64_t>(tile_rows, g.m - a0) - 1];
      for (std::int64_t j0 = 0; j0 < g.n_jp; j0 += g.chunk_jp)
        tile(g, a0, cb * tile_cols, j0, std::min(g.n_jp, j0 + g.chunk_jp));
    }
}

}  // namespace detail

void qupdate_accumulate(std::int64_t m, std::int64_t n, std::int64_t rank, std::int64_t n_pairs,
                        const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z) {
  if (detail::update_signs_dispatch(m, n, rank, n_pairs, blocks, d, z)) return;  // quads of int8 terms
  std::vector<Term> terms;
  std::int64_t max_d = 0;
  for (std::int64_t k = 0; k < n_pairs; ++k) {
    if (d[k] == 0 || blocks[k] == nullptr) continue;
    max_d = std::max<std::int64_t>(max_d, std::abs(std::int64_t{d[k]}));
    for (std::int64_t c = 0; c < rank; ++c) terms.push_back({k, c});
  }
  if (terms.empty() || m == 0 || n == 0) return;
  detail::UpdateArgs g;
  g.m = m;
  g.n = n;
  g.n_pad = (n + 63) / 64 * 64;
  g.n_jp = (static_cast<std::int64_t>(terms.size()) + 1) / 2;
  g.chunk_jp = chunk_pairs(max_d);
  // Both packed in parallel, every value written (a zero-filled vector would first clear tens of
  // MB on one thread).
  const auto bp = std::make_unique_for_overwrite<std::int16_t[]>(static_cast<std::size_t>(g.n_jp * g.n_pad * 2));
  const auto coef = std::make_unique_for_overwrite<std::int16_t[]>(static_cast<std::size_t>(m * 2 * g.n_jp));
  pack_b(terms, n, rank, blocks, g, bp.get());
  pack_coef(terms, n, rank, blocks, d, g, coef.get());
  g.bp = bp.get();
  g.coef = coef.get();
  g.z = z;
  detail::update_dispatch(g);
}

}  // namespace eggroll::cpu_int8
