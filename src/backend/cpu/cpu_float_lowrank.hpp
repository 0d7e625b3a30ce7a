// The level-generic part of the cpu backend's fused low-rank forward (cpu_float.hpp), included by
// each float level file (cpu_float_avx512.cpp, cpu_float_avx2.cpp) with its own level type L,
// defined with internal linkage there so that every instantiation stays in the file compiled for
// its instruction set. L provides the constant kQueueNextRowsOfX (below) and, as static functions:
//   xb_row(x, b, n, r, out): out[c] = x . B[:, c] for c < r, B (n, r) row-major;
//   xb_rows_shared<T>(x, ldx, b, n, r, out): the same for T rows x + t ldx, each row's bits as
//     xb_row's (T = 2 and 4);
//   transpose_factor(in, rows, r, out): out (r, rows) = in (rows, r)^T;
//   xb_transposed(x, rows, bt, n, r, out): out[t r + c] = x_t . bt_c for rows x_t = x + t n, from
//     B^T (r, n), in an order fixed by (n, r) (whatever `rows` is);
//   add_rank(from, at, s, m, r, y): y[a] = fma(s[c], at[c m + a], ..) over c in order, starting from
//     from[a] (from may equal y), a < m;
//   gemm_lowrank(rows, m, n, x, w, e, y, finish, packed): the level's GEMM with the fused
//     correction e, the layer's epilogue finish and W's pack (both may be null) (cpu_sgemm.hpp);
//   serves_rank(r): whether the level's shuffles take rank r's columns from a factor block;
//   padded_rank(r): the rank whose shuffles serve rank r with one row per member: r itself, or the
//     next power of two the level's shuffles serve (padded_factors);
//   pad_columns(in, rows, r, rp, out): out (rows, rp) = in (rows, r) with zero columns r .. rp - 1.
// Each row's products depend on (n, r) and the rows per member alone, never on the batch or the
// threads, so contracts 2 and 3 hold at each level.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_float.hpp"
#include "backend/cpu/cpu_sgemm.hpp"
#include "backend/cpu/line_queue.hpp"
#include "eggroll/core/unset_vector.hpp"

namespace eggroll::cpu_float_lowrank {

// The rank the factors are used at: with one row per member, a rank the level's shuffles do not
// serve (3, 5, 6, 7, and 9 .. 15 where 16 is served) runs as the next power of two that they do,
// each factor block copied with zero columns (L::pad_columns): x . B, the A columns and the tile's
// correction then take that rank's shuffles, where the other ranks took a fused chain over k per
// value (x . B) and a gather per rank and vector of outputs (the correction): rank 6 ran at under
// half the rows per second of rank 8. The padded columns add fma(0, 0, y) to each output (which
// turns a -0 into +0), in the fused forward and in the separate correction alike. With several
// rows per member every rank has its paths (the transposes).
template <class L>
std::int64_t padded_factors(std::int64_t r, std::int64_t rows_per_member) {
  return rows_per_member == 1 ? L::padded_rank(r) : r;
}

// Whether a member's factor blocks are used transposed, B^T (r, n) for x . B and A^T (r, m) for the
// correction, made once per block: with several rows per member at every rank above 1; with one
// row per member at the (padded) ranks the level's shuffles do not serve (above 16, above 8 at
// AVX2), an antithetic pair's two rows sharing the transposes. The choice depends on the rank and
// the rows per member (properties of the task), never on the batch or the threads.
template <class L>
bool uses_transposes(std::int64_t r, std::int64_t rows_per_member) {
  return r > 1 && (rows_per_member > 1 || !L::serves_rank(r));
}

// xb[t][c] = x[t] . B[:, c] for a member's rows t < rows (x rows of n, B (n, r)). Without the
// transposes (uses_transposes): xb_row a row. With them: B is transposed into bt_scratch (r n
// floats) and the rows' products are xb_transposed's, with no shuffles per row.
template <class L>
void member_xb(const float* x, std::int64_t rows, const float* b, std::int64_t n, std::int64_t r, float* bt_scratch,
               float* xb) {
  if (!uses_transposes<L>(r, rows)) {
    for (std::int64_t t = 0; t < rows; ++t) L::xb_row(x + t * n, b, n, r, xb + t * r);
    return;
  }
  L::transpose_factor(b, n, r, bt_scratch);
  L::xb_transposed(x, rows, bt_scratch, n, r, xb);
}

// cpu_float.hpp's lowrank_correction at level L.
template <class L>
void lowrank_correction(const MemberRows& batch, const LowRankFactors& f, const float* x, float* y,
                        std::int64_t member_first, std::int64_t count, const float* base) {
  const std::int64_t m = f.m, n = f.n, rows = batch.rows_per_member, r = padded_factors<L>(f.rank, rows);
  // Rank > 1: each member's A (m, r) transposed to (r, m), so the product below reads contiguous
  // values (the same values, in the same order, as the fused store's).
  UnsetVector<float> scratch(r > 1 ? static_cast<std::size_t>(r * m) : 0);
  UnsetVector<float> bt_scratch(r > 1 ? static_cast<std::size_t>(r * n) : 0);
  UnsetVector<float> padded(r != f.rank ? static_cast<std::size_t>(r * (n + m)) : 0);
  std::vector<float> xb(static_cast<std::size_t>(rows * r)), scale(static_cast<std::size_t>(r));
  for (std::int64_t j = member_first; j < member_first + count; ++j) {
    const float coef = f.coef[j];
    if (coef == 0.0f || f.blocks[j] == nullptr) {
      if (base != nullptr) std::copy_n(base, rows * m, y + j * rows * m);
      continue;
    }
    const float* b = f.blocks[j];
    if (r != f.rank) {
      L::pad_columns(b, n + m, f.rank, r, padded.data());
      b = padded.data();
    }
    const float* at = b + n * r;
    if (r > 1) {
      L::transpose_factor(at, m, r, scratch.data());
      at = scratch.data();
    }
    member_xb<L>(x + j * rows * n, rows, b, n, r, bt_scratch.data(), xb.data());
    for (std::int64_t t = 0; t < rows; ++t) {
      float* yr = y + (j * rows + t) * m;
      const float* from = base != nullptr ? base + t * m : yr;  // the row's value before the correction
      for (std::int64_t c = 0; c < r; ++c) scale[c] = coef * xb[t * r + c];
      // y = fma(s[c], A[:, c], y) for c in order: the fused store's operations (cpu_sgemm.hpp).
      L::add_rank(from, at, scale.data(), m, r, yr);
    }
  }
}

// cpu_float.hpp's perturbed_matmul at level L.
template <class L>
void perturbed_matmul(const MemberRows& batch, const LowRankFactors& f, const float* x, const float* w, float* y,
                      const cpu_sgemm::RowFinish* finish, const PackedWeights* packed) {
  const std::int64_t m = f.m, n = f.n, rows_per_member = batch.rows_per_member, members = batch.n_members;
  const std::int64_t r = padded_factors<L>(f.rank, rows_per_member);  // the rank the kernels run at
  const bool padded = r != f.rank;  // each block copied with zero columns by prepare
  // Per row: the member's A and s = coef_j x B_j (xb as the separate correction computes it, so
  // both give the same bits). The products x B_j need x, so the GEMM driver asks for them a block
  // of rows at a time (prepare), while those rows are in cache. Where the blocks are used
  // transposed (uses_transposes), prepare also transposes each factor block met in its rows, once:
  // B_j^T (r, n) for the products and A_j^T (r, m), read contiguously by the store, into the
  // calling thread's scratch, where they stay in cache while the block's rows are computed.
  // Otherwise (one row per member) the store takes A_j's columns from the factor block itself.
  const bool transposed = uses_transposes<L>(r, rows_per_member);
  // Scratch every value of which is written before it is read (no clearing).
  const auto row_scale = std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(batch.rows() * r));
  const auto row_a = std::make_unique_for_overwrite<const float*[]>(static_cast<std::size_t>(batch.rows()));
  for (std::int64_t j = 0; j < members; ++j) {
    // (padded: A as stored until prepare points the row at its copy)
    const float* a = f.coef[j] != 0.0f && f.blocks[j] != nullptr ? f.blocks[j] + n * f.rank : nullptr;
    for (std::int64_t t = 0; t < rows_per_member; ++t) row_a[j * rows_per_member + t] = a;
  }
  // Rank 1: the driver's tiles may sum x . B_j themselves (LowRankEpilogue::xb_in_tiles), from B_j
  // here (null: an unperturbed row), in the order of L's products.
  const auto row_b = r == 1 ? std::make_unique<const float*[]>(static_cast<std::size_t>(batch.rows())) : nullptr;
  const std::int64_t block_floats = f.rank * (n + m);  // a factor block as stored
  constexpr std::int64_t kBlockFetchBytes = 256 << 10;  // a quarter of L2
  // No factor queue at one row per member where W takes more than a quarter of L2: there the tiles
  // fetch W's panels ahead themselves, and the queue's lines competed with them for the miss
  // buffers (the large model at rank 1 1.03-1.07 times as fast without it on a Zen 3 at the AVX2
  // level, docs/results.md, "The float line queue by shape"; at rank 4 with the table 1.04-1.06
  // on a Zen 5 at the AVX-512 level, the fiftieth pass).
  const bool w_streamed = rows_per_member == 1 && m * n * 4 > cpu_sgemm::detail::l2_bytes() / 4;
  const std::function<void(std::int64_t, std::int64_t, std::int64_t, cpu::LineQueue*)> prepare =
      [&](std::int64_t first, std::int64_t last, std::int64_t tiles_last, cpu::LineQueue* next) {
    // This block's factors generated where they are not yet (LowRankFactors::ready): now, by the
    // thread that reads them next, so they are in its cache.
    f.ready(first / rows_per_member, (last - 1) / rows_per_member - first / rows_per_member + 1);
    // The factor blocks of the next block of rows, queued for the driver to bring into L2 during
    // this block's tiles, when they fit in a quarter of it: several rows per member (a few
    // members, for the transposes), or small blocks. (From the factors, not row_a: those rows may
    // be another thread's, being prepared.) Otherwise (one row per member, large blocks: a tile's
    // members' blocks would not fit) the next block's B parts alone when they fit in half of L2,
    // the tiles fetch the A values a tile ahead (Blocked::prefetch_a) and the products below the
    // next member's B.
    const std::int64_t next_members = (last - first) / rows_per_member + 1;
    const bool whole_blocks = transposed || next_members * block_floats * 4 <= kBlockFetchBytes;
    // otherwise the next block's B parts alone (read by the products below), when they fit in half of L2
    const bool b_parts = !whole_blocks && next_members * n * f.rank * 4 <= 2 * kBlockFetchBytes;
    // Not where the factors are made on demand (f.fill): the next block's are written by its own
    // prepare, and fetching their lines before that only held the core on memory
    // (docs/results/cpu_speed/history.md, nineteenth pass).
    const float* queued = nullptr;
    // Nor beside a streamed W (w_streamed below).
    const bool queue_next = next != nullptr && f.fill == nullptr && !w_streamed && (whole_blocks || b_parts);
    const std::int64_t next_block_end = std::min(batch.rows(), 2 * last - first);  // the next block's rows end
    const std::int64_t next_end = queue_next ? next_block_end : last;
    for (std::int64_t i = last; i < next_end; i += rows_per_member) {
      const std::int64_t j = i / rows_per_member;
      const float* block = f.coef[j] != 0.0f ? f.blocks[j] : nullptr;
      if (block == nullptr || block == queued) continue;
      next->add(block, (whole_blocks ? block_floats : n * f.rank) * 4);
      queued = block;
    }
    // With several rows per member and rank > 1, the next block's rows of x as well, at levels that
    // say so (L::kQueueNextRowsOfX): its prepare reads them first (x . B), and where they come from
    // memory (a layer's input written for all of the call's rows) the products waited on them with
    // nothing to hide behind (docs/results.md, "Masked loads and stores on a Zen 3"). Queued
    // whether or not the factors are.
    if (L::kQueueNextRowsOfX && transposed && next != nullptr && last < next_block_end)
      next->add(x + last * n, (next_block_end - last) * n * 4);
    UnsetVector<float> bt(transposed ? static_cast<std::size_t>(r * n) : 0);
    float* at = nullptr;  // A^T of the factor block met last, in this thread's scratch
    UnsetVector<float>* at_next = nullptr;
    std::size_t at_used = 0;
    if (transposed) {  // room for the A^T of every member met in [first, last)
      // this thread's own (the kernel may run inside a parallel region on its calling thread)
      static thread_local UnsetVector<float> at_scratch;
      at_next = &at_scratch;
      at_next->resize(static_cast<std::size_t>(((last - first + rows_per_member - 1) / rows_per_member + 1) * r * m));
    }
    // padded: the copies of the blocks met in [first, last) (this thread's own, as at_scratch)
    float* pad_at = nullptr;
    if (padded) {
      static thread_local UnsetVector<float> pad_scratch;
      pad_scratch.resize(static_cast<std::size_t>((last - first) * r * (n + m)));
      pad_at = pad_scratch.data();
    }
    const float* block_of = nullptr;  // the factor block bt and at hold
    // the B part of the factor block the next products read, into L1 while this one's are formed
    const auto fetch_b = [&](const float* block) {
      for (std::int64_t e = 0; e < n * f.rank; e += 16) __builtin_prefetch(block + e, 0, 3);
    };
    // rows [i, i + count) of x, into L1 likewise: a layer's input written for all of the call's rows
    // (its rows of n floats are past L1 by then, often past L2), which the products would wait on
    const auto fetch_x = [&](std::int64_t i, std::int64_t count) {
      for (std::int64_t e = 0; e < count * n; e += 16) __builtin_prefetch(x + i * n + e, 0, 3);
    };
    for (std::int64_t i = first; i < last;) {
      const std::int64_t j = i / rows_per_member;
      // this member's rows in [first, last)
      const std::int64_t run = std::min(last, (j + 1) * rows_per_member) - i;
      if (row_a[i] == nullptr) {
        i += run;
        continue;
      }
      float* s = row_scale.get() + i * r;
      if (i < tiles_last) {  // rank 1, x . B summed by the tiles, which scale coef_j by it
        const std::int64_t by_tiles = std::min(run, tiles_last - i);
        for (std::int64_t t = 0; t < by_tiles; ++t) {
          row_b[i + t] = f.blocks[j];
          s[t] = f.coef[j];
        }
        i += by_tiles;
        continue;
      }
      if (transposed) {
        if (block_of != f.blocks[j]) {
          block_of = f.blocks[j];
          L::transpose_factor(block_of, n, r, bt.data());
          at = at_next->data() + at_used;
          at_used += static_cast<std::size_t>(r * m);
          L::transpose_factor(block_of + n * r, m, r, at);
        }
        for (std::int64_t t = 0; t < run; ++t) row_a[i + t] = at;
        L::xb_transposed(x + i * n, run, bt.data(), n, r, s);
      } else if (rows_per_member == 1) {
        // An antithetic pair's two members (next to each other) share B: both products in one pass.
        const bool pair = i + 1 < last && row_a[i + 1] != nullptr && f.blocks[j + 1] == f.blocks[j];
        const std::int64_t next = i + (pair ? 2 : 1);
        if (next < last && row_a[next] != nullptr) {
          fetch_b(f.blocks[next]);
          fetch_x(next, std::min<std::int64_t>(2, last - next));  // the next pair's rows
        }
        const float* b = f.blocks[j];
        if (padded) {  // the pair's block with zero columns, and its rows' A there
          L::pad_columns(b, n + m, f.rank, r, pad_at);
          for (std::int64_t t = i; t < next; ++t) row_a[t] = pad_at + n * r;
          b = pad_at;
          pad_at += r * (n + m);
        }
        if (pair)
          L::template xb_rows_shared<2>(x + i * n, n, b, n, r, s);
        else
          L::xb_row(x + i * n, b, n, r, s);
        for (std::int64_t t = 0; t < next - i; ++t)
          for (std::int64_t c = 0; c < r; ++c) s[t * r + c] *= f.coef[j + t];
        i = next;
        continue;
      } else {  // rank 1, several rows per member: four rows at a time share B's loads
        if (i + run < last && row_a[i + run] != nullptr) fetch_b(f.blocks[j + 1]);
        std::int64_t t = 0;
        for (; t + 4 <= run; t += 4) L::template xb_rows_shared<4>(x + (i + t) * n, n, f.blocks[j], n, r, s + t * r);
        for (; t < run; ++t) L::xb_row(x + (i + t) * n, f.blocks[j], n, r, s + t * r);
      }
      for (std::int64_t c = 0; c < run * r; ++c) s[c] *= f.coef[j];
      i += run;
    }
  };
  cpu_sgemm::LowRankEpilogue e;
  e.rank = r;
  e.m = m;
  e.rows = batch.rows();
  e.row_a = row_a.get();
  e.row_scale = row_scale.get();
  e.a_by_rank = r == 1 || transposed;
  e.xb_in_tiles = r == 1;
  e.row_b = row_b.get();
  e.fetch_a_ahead = rows_per_member == 1;
  e.prepare = &prepare;
  // One row per member, where the blocks are limited (cpu_sgemm::fused_block_rows_limited: an L2
  // below 2 MiB): blocks of rows whose factor blocks fit in the fetch budget, so that the next
  // block's are fetched during this block's tiles (the factors, read once, are most of what such a
  // forward reads from memory); one tile's rows where even those do not fit (the large model at
  // rank 4 on a Zen 4: still faster than 96 rows, docs/results/cpu_speed/history.md, eleventh
  // pass). With a 2 MiB L2, whole blocks: each block sweeps all of W, and sweeping it for every
  // 6 rows cost the large model's rank-4 forward 0.24 of its ratio there (thirty-fourth pass).
  if (rows_per_member == 1 && cpu_sgemm::fused_block_rows_limited())
    e.block_rows = std::max<std::int64_t>(1, kBlockFetchBytes / (block_floats * 4) - 1);
  L::gemm_lowrank(batch.rows(), m, n, x, w, e, y, finish, packed);
}

}  // namespace eggroll::cpu_float_lowrank
