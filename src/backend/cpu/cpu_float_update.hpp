// The float update as a packed GEMM over members (cpu_float.hpp's lowrank_update), level-generic:
// included by each float level file (cpu_float_avx512.cpp, cpu_float_avx2.cpp) with its own
// vector traits V, defined with internal linkage there (as cpu_sgemm_blocked.hpp's), so that every
// instantiation stays in the file compiled for its instruction set. V provides:
//   Reg, Mask, kLanes, kTileRows (output rows per micro-tile: broadcast values), kVecs (vectors
//   of panel values per micro-tile); mask(count) of the first count lanes (count <= 0: none),
//   load(p), store(p, v), load_masked(m, p) (0 past the mask), store_masked(p, m, v), set1(f), mul(a, b),
//   fma(a, b, c) = a b + c rounded once; transpose(Reg block[kLanes]): block[j][c] := block[c][j];
//   with_columns_rank(r, fn): fn(std::integral_constant<int, R>{}) for the ranks R > 1 that
//   columns<R>(p, count, Reg (&out)[R]) serves (out[c] lane l = p[l R + c], l < count), else false.
// Every output element takes one fused multiply-add per (term, rank) in a fixed order, so the
// result depends on neither the threads nor the blocking (contract 3) at a level.
#pragma once
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_sgemm.hpp"
#include "backend/cpu/line_queue.hpp"
#include "eggroll/core/unset_vector.hpp"

namespace eggroll::cpu_float_update {

template <class V>
struct Update {
  using Reg = typename V::Reg;
  using Mask = typename V::Mask;
  static constexpr int kLanes = V::kLanes;
  static constexpr std::int64_t kTileRows = V::kTileRows;
  static constexpr int kVecs = V::kVecs;
  static constexpr std::int64_t kTileCols = kLanes * kVecs;  // output columns per micro-tile
  static constexpr std::int64_t kDepth = 256;                // (term, rank) products per packed panel
  // column tiles per panel block (256 columns: 256 KiB at depth 256)
  static constexpr std::int64_t kBlockTiles = 256 / kTileCols;

  // A tile's outputs (ROWS x kTileCols at out, row stride ldo, the first cols columns) into acc,
  // with the masks of its columns; and back.
  template <int ROWS>
  [[gnu::always_inline]] static inline void load_tile(const float* out, std::int64_t ldo, std::int64_t cols,
                                                      Mask (&mask)[kVecs], Reg (&acc)[ROWS][kVecs]) {
    for (int v = 0; v < kVecs; ++v) mask[v] = V::mask(cols - kLanes * v);
#pragma GCC unroll 16
    for (int i = 0; i < ROWS; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) acc[i][v] = V::load_masked(mask[v], out + i * ldo + kLanes * v);
  }
  template <int ROWS>
  [[gnu::always_inline]] static inline void store_tile(float* out, std::int64_t ldo, const Mask (&mask)[kVecs],
                                                       const Reg (&acc)[ROWS][kVecs]) {
#pragma GCC unroll 16
    for (int i = 0; i < ROWS; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) V::store_masked(out + i * ldo + kLanes * v, mask[v], acc[i][v]);
  }

  // acc (ROWS x kTileCols outputs at out) += sum_q A[q][i] bp[q][..), q < depth, in q order, with
  // step q's broadcast values from src: aq = src.step(q), A[q][i] = aq[i * src.stride()]. Step q
  // also asks for the line fetch[q] into L2, q < n_fetch.
  template <int ROWS, class Src>
  [[gnu::always_inline]] static inline void tile_loop(std::int64_t depth, Src src, const float* bp, std::int64_t ldb,
                                                      float* out, std::int64_t ldo, std::int64_t cols,
                                                      const char* const* fetch, std::int64_t n_fetch) {
    Mask mask[kVecs];
    Reg acc[ROWS][kVecs];
    load_tile<ROWS>(out, ldo, cols, mask, acc);
    for (std::int64_t q = 0; q < depth; ++q) {
      Reg b[kVecs];
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) b[v] = V::load(bp + q * ldb + kLanes * v);
      const float* aq = src.step(q);
      if (q < n_fetch) __builtin_prefetch(fetch[q], 0, 2);
#pragma GCC unroll 16
      for (int i = 0; i < ROWS; ++i) {
        const Reg av = V::set1(aq[i * src.stride()]);
#pragma GCC unroll 4
        for (int v = 0; v < kVecs; ++v) acc[i][v] = V::fma(av, b[v], acc[i][v]);
      }
    }
    store_tile<ROWS>(out, ldo, mask, acc);
  }

  // The broadcast values in the blocks themselves: a[q] points at the first row, column c of the
  // term's broadcast factor (rows, r); skip: the tile's first row's offset from it; depth: the
  // tile's steps.
  template <int ROWS>
  struct FromBlocks {
    const float* const* a;
    std::int64_t skip, r, depth, c = 0;
    const float* step(std::int64_t q) {
      const float* aq = a[q] + skip;
      // The terms' factor blocks lie apart in memory, where the hardware prefetchers do not follow
      // them: the next row tile's values of this term into L2, a line for each of its r products
      // (ROWS r values from aq - c + ROWS r), and this row tile's of the term four on into L1.
      // (The next row tile's into L1 were mostly evicted before their turn: the tile's panel
      // alone fills L1. Both fetches read 1-6% faster than that one on two threads: builds_ab
      // --part update, docs/results.md, fortieth pass.)
      __builtin_prefetch(aq + ROWS * r + 15 * c, 0, 2);
      if (q + 4 * r < depth) __builtin_prefetch(a[q + 4 * r] + skip + 15 * c, 0, 3);
      c = c + 1 == r ? 0 : c + 1;
      return aq;
    }
    std::int64_t stride() const { return r; }
  };
  // The broadcast values packed (rank 1): ap[q kTileRows + i], at fixed offsets from one run.
  struct FromPacked {
    const float* ap;
    const float* step(std::int64_t q) const { return ap + q * kTileRows; }
    static constexpr std::int64_t stride() { return 1; }
  };

  // tile_loop from the blocks at a rank R known at compile time, a term (R steps) per iteration:
  // one pointer per term, its broadcasts at fixed offsets from it and its fetches once per term,
  // where FromBlocks computes an address, a fetch and the next column at every step (about as many
  // scalar instructions as multiply-adds at rank 4). The same steps in the same order: the same
  // bits.
  template <int ROWS, int R>
  static void tile_ranked(std::int64_t depth, const float* const* a, std::int64_t skip, std::int64_t,
                          const float* bp, std::int64_t ldb, float* out, std::int64_t ldo, std::int64_t cols,
                          const char* const* fetch, std::int64_t n_fetch) {
    Mask mask[kVecs];
    Reg acc[ROWS][kVecs];
    load_tile<ROWS>(out, ldo, cols, mask, acc);
    const std::int64_t terms = depth / R;
    for (std::int64_t k = 0; k < terms; ++k) {
      const float* ak = a[k * R] + skip;
      // As FromBlocks: the next row tile's values of this term into L2, this row tile's of the
      // term four on into L1: the lines of their ROWS R values (a line per 16 values and the
      // last value's, which may start one more).
      constexpr int kSpan = ROWS * R, kLines = (kSpan + 15) / 16;
#pragma GCC unroll 16
      for (int l = 0; l < kLines; ++l) __builtin_prefetch(ak + kSpan + 16 * l, 0, 2);
      __builtin_prefetch(ak + 2 * kSpan - 1, 0, 2);
      if (k + 4 < terms) {
        const float* ahead = a[(k + 4) * R] + skip;
#pragma GCC unroll 16
        for (int l = 0; l < kLines; ++l) __builtin_prefetch(ahead + 16 * l, 0, 3);
        __builtin_prefetch(ahead + kSpan - 1, 0, 3);
      }
#pragma GCC unroll 16
      for (int c = 0; c < R; ++c) {
        const std::int64_t q = k * R + c;
        Reg b[kVecs];
#pragma GCC unroll 4
        for (int v = 0; v < kVecs; ++v) b[v] = V::load(bp + q * ldb + kLanes * v);
        if (q < n_fetch) __builtin_prefetch(fetch[q], 0, 2);
#pragma GCC unroll 16
        for (int i = 0; i < ROWS; ++i) {
          const Reg av = V::set1(ak[i * R + c]);
#pragma GCC unroll 4
          for (int v = 0; v < kVecs; ++v) acc[i][v] = V::fma(av, b[v], acc[i][v]);
        }
      }
    }
    store_tile<ROWS>(out, ldo, mask, acc);
  }

  // tile_loop from the blocks (any rank).
  template <int ROWS>
  static void tile(std::int64_t depth, const float* const* a, std::int64_t skip, std::int64_t r, const float* bp,
                   std::int64_t ldb, float* out, std::int64_t ldo, std::int64_t cols, const char* const* fetch,
                   std::int64_t n_fetch) {
    tile_loop<ROWS>(depth, FromBlocks<ROWS>{a, skip, r, depth}, bp, ldb, out, ldo, cols, fetch, n_fetch);
  }

  // tile_loop at rank 1 from the tile's packed broadcast values. At rank 1 a step of the unpacked
  // tile reads a line of another term's block for its ROWS values alone (at rank r, the same line
  // serves r steps). Packed, bench/update_throughput summed the medium model's rank-1 shapes
  // about 18% faster on one thread, and packed row tile by row tile into a run that stays in L1,
  // 1.16-1.29 times as fast again in one process (docs/results.md); at rank 4 a packing by shuffles made the medium shapes
  // 30% slower on one thread, and a copy per row tile read no faster, so ranks above 1 read the
  // blocks as before.
  template <int ROWS>
  static void tile_packed(std::int64_t depth, const float* ap, const float* bp, std::int64_t ldb, float* out,
                          std::int64_t ldo, std::int64_t cols, const char* const* fetch, std::int64_t n_fetch) {
    tile_loop<ROWS>(depth, FromPacked{ap}, bp, ldb, out, ldo, cols, fetch, n_fetch);
  }

  using TileFn = void (*)(std::int64_t, const float* const*, std::int64_t, std::int64_t, const float*, std::int64_t,
                          float*, std::int64_t, std::int64_t, const char* const*, std::int64_t);
  using PackedTileFn = void (*)(std::int64_t, const float*, const float*, std::int64_t, float*, std::int64_t,
                                std::int64_t, const char* const*, std::int64_t);
  template <std::size_t... I>
  static constexpr std::array<TileFn, sizeof...(I) + 1> tiles_up_to(std::index_sequence<I...>) {
    return {{nullptr, &tile<static_cast<int>(I) + 1>...}};
  }
  // kTiles[rows] = tile<rows>, 1 <= rows <= kTileRows.
  static constexpr auto kTiles = tiles_up_to(std::make_index_sequence<kTileRows>{});
  template <int R, std::size_t... I>
  static constexpr std::array<TileFn, sizeof...(I) + 1> ranked_tiles_up_to(std::index_sequence<I...>) {
    return {{nullptr, &tile_ranked<static_cast<int>(I) + 1, R>...}};
  }
  // kRankedTiles<R>[rows] = tile_ranked<rows, R>.
  template <int R>
  static constexpr auto kRankedTiles = ranked_tiles_up_to<R>(std::make_index_sequence<kTileRows>{});
  // The tiles for rank r: tile_ranked at ranks 2, 4 and 8, tile at the others.
  static const TileFn* tiles_for_rank(std::int64_t r) {
    switch (r) {
      case 2: return kRankedTiles<2>.data();
      case 4: return kRankedTiles<4>.data();
      case 8: return kRankedTiles<8>.data();
      default: return kTiles.data();
    }
  }
  template <std::size_t... I>
  static constexpr std::array<PackedTileFn, sizeof...(I) + 1> packed_tiles_up_to(std::index_sequence<I...>) {
    return {{nullptr, &tile_packed<static_cast<int>(I) + 1>...}};
  }
  // kPackedTiles[rows] = tile_packed<rows>.
  static constexpr auto kPackedTiles = packed_tiles_up_to(std::make_index_sequence<kTileRows>{});

  // Rows q = c of a term's part of the panel: wk F[e0 + e][c] for e < width (the block of columns
  // [e0, e0 + width), zeros past len), column tile by column tile: value (c, e) at
  // rows[(e / kTileCols) strip + c kTileCols + e % kTileCols]; F the term's packed factor (len, r).
  static void pack_rows(const float* f, std::int64_t len, std::int64_t r, float wk, std::int64_t e0,
                        std::int64_t width, std::int64_t strip, float* rows) {
    const auto at = [&](std::int64_t c, std::int64_t e) {
      return rows + (e / kTileCols) * strip + c * kTileCols + e % kTileCols;
    };
    const Reg w = V::set1(wk);
    const bool by_columns = V::with_columns_rank(r, [&](auto rank) {
      constexpr int R = decltype(rank)::value;
      Reg column[R];
      for (std::int64_t e = 0; e < width; e += kLanes) {
        V::template columns<R>(f + (e0 + e) * R, len - e0 - e, column);
        for (int c = 0; c < R; ++c) V::store(at(c, e), V::mul(w, column[c]));
      }
    });
    if (by_columns) return;
    for (std::int64_t c = 0; c < r; ++c) {
      if (r == 1) {
        for (std::int64_t e = 0; e < width; e += kLanes)
          V::store(at(c, e), V::mul(w, V::load_masked(V::mask(len - e0 - e), f + e0 + e)));
        continue;
      }
      for (std::int64_t e = 0; e < width; ++e) *at(c, e) = e0 + e < len ? wk * f[(e0 + e) * r + c] : 0.0f;
    }
  }

  // dst[j][i] = src[i][j] for i < rows, j < cols (row strides lds, ldd): kLanes x kLanes blocks by
  // shuffles, the edges value by value.
  static void transpose_block(const float* src, std::int64_t lds, std::int64_t rows, std::int64_t cols, float* dst,
                              std::int64_t ldd) {
    std::int64_t i = 0;
    for (; i + kLanes <= rows; i += kLanes) {
      std::int64_t j = 0;
      for (; j + kLanes <= cols; j += kLanes) {
        Reg block[kLanes];
        for (int t = 0; t < kLanes; ++t) block[t] = V::load(src + (i + t) * lds + j);
        V::transpose(block);
        for (int t = 0; t < kLanes; ++t) V::store(dst + (j + t) * ldd + i, block[t]);
      }
      for (; j < cols; ++j)
        for (std::int64_t t = 0; t < kLanes; ++t) dst[j * ldd + i + t] = src[(i + t) * lds + j];
    }
    for (; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) dst[j * ldd + i] = src[i * lds + j];
  }

  // cpu_float.hpp's lowrank_update.
  static void run(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_terms, const float* const* blocks,
                  const double* weight, float* out) {
    if (n_terms == 0 || m == 0 || n == 0) return;
    // The tiles' vectors run along the shorter side, whose factor is packed (weighted): B's (n, r)
    // when n <= m, with A's values broadcast; otherwise A's (m, r), with B's values broadcast, and
    // the sums computed as out^T (n, m), in each thread's own scratch. The packing is a pass over
    // the packed factor per block of output rows, so the shorter factor costs the least.
    const bool transposed = n > m;
    const std::int64_t rows = transposed ? n : m, cols = transposed ? m : n;
    const std::int64_t packed_at = transposed ? n * r : 0, broadcast_at = transposed ? 0 : n * r;
    const std::int64_t terms_per_panel = std::max<std::int64_t>(1, kDepth / r);
    const std::int64_t col_tiles = (cols + kTileCols - 1) / kTileCols;
#pragma omp parallel if (n_terms * r * m * n >= cpu_sgemm::detail::kParallelMinWork)
    {
      // Each thread owns a block of output rows x columns and packs the panel of its own columns,
      // a block of columns at a time, so the panel it streams stays in its own cache and the
      // threads never wait on each other. A thread's cost is about (rows + 4) (columns + 4): its
      // tiles' multiply-adds, plus packing its columns' values (once per panel, whatever its
      // rows) and fetching its rows' broadcast values (once, whatever its columns); the split with
      // the least cost on the busiest thread wins, rows first on a tie.
      const std::int64_t n_threads = omp_get_num_threads(), t = omp_get_thread_num();
      std::int64_t tr = 1, best = -1;
      for (std::int64_t d = n_threads; d >= 1; --d) {
        if (n_threads % d != 0) continue;
        const std::int64_t tc = n_threads / d;
        const std::int64_t cost = ((rows + d - 1) / d + 4) * ((col_tiles + tc - 1) / tc * kTileCols + 4);
        if (best < 0 || cost < best) best = cost, tr = d;
      }
      const std::int64_t tc = n_threads / tr;
      const std::int64_t r0 = rows * (t / tc) / tr, r1 = rows * (t / tc + 1) / tr;
      const std::int64_t ct0 = col_tiles * (t % tc) / tc, ct1 = col_tiles * (t % tc + 1) / tc;
      const std::int64_t c0 = ct0 * kTileCols, c1 = std::min(cols, ct1 * kTileCols);
      // The thread's rows in tiles of nearly equal height (with 12-row tiles, 64 rows: eleven of 5
      // or 6, not ten of 6 and one of 4, whose broadcasts weigh more per multiply-add).
      const std::int64_t row_tiles = (r1 - r0 + kTileRows - 1) / kTileRows;
      const auto tile_row = [&](std::int64_t rt) { return r0 + (r1 - r0) * rt / row_tiles; };
      if (r0 < r1 && c0 < c1) {
        // Where the tiles accumulate: out itself, or this thread's block of out^T.
        static thread_local UnsetVector<float> scratch;
        float* dst = out + r0 * n + c0;
        std::int64_t ldd = n;
        if (transposed) {
          ldd = c1 - c0;
          scratch.resize(static_cast<std::size_t>((r1 - r0) * ldd));
          dst = scratch.data();
          transpose_block(out + c0 * n + r0, n, c1 - c0, r1 - r0, dst, ldd);
        }
        const std::int64_t width_max = std::min(kBlockTiles, ct1 - ct0) * kTileCols;
        UnsetVector<float> bp(static_cast<std::size_t>(terms_per_panel * r * width_max));
        std::vector<const float*> a(static_cast<std::size_t>(terms_per_panel * r));
        // Rank 1: a row tile's broadcast values of a depth block, packed just before its tiles
        // (tile_packed): ap[q kTileRows + i], 12 KiB that stay in L1 while its tiles read them.
        // Each term's values are stored as a whole vector, whose lanes past the tile's rows land
        // in the next term's place (its own store comes after) or in kLanes floats of slack.
        const bool pack_broadcast = r == 1;
        const TileFn* const rank_tiles = tiles_for_rank(r);
        const std::int64_t tile_floats = terms_per_panel * kTileRows;
        UnsetVector<float> ap(pack_broadcast ? static_cast<std::size_t>(tile_floats + kLanes) : 0);
        // A step packs the panel of (terms [k0, ..), columns from tile cb) and runs its tiles.
        // During its tiles the next step's packed lines and (rank > 1) its first row tile's
        // broadcast lines are fetched: the terms' factor blocks lie apart in memory, where the
        // hardware prefetchers do not follow them, and packing them unfetched waited on memory for
        // most of its time. Each tile asks for its share of the lines among its multiply-adds, one
        // a step of its depth loop: asked for in a burst before each tile, they stalled the core on
        // its outstanding-miss buffers (two threads, the medium model's shapes: 3.5-7% slower).
        // Not at rank 1 all the thread's broadcast values of the next depth block, which its row
        // tiles' packing reads (a quarter of L2 a thread at the medium model's shapes): those
        // reads step through the terms at the blocks' fixed distance, which the hardware follows,
        // and the queued lines only crowded L2 (docs/results.md, fifty-third pass: the medium
        // shapes 1.1-1.2 times as fast on two threads without them on a Zen 5).
        cpu::LineQueue queue;
        std::array<const char*, kDepth> fetch;
        const auto queue_step = [&](std::int64_t k0, std::int64_t cb) {
          const std::int64_t terms = std::min(terms_per_panel, n_terms - k0);
          const std::int64_t e0 = cb * kTileCols, e1 = std::min(cols, std::min(cb + kBlockTiles, ct1) * kTileCols);
          for (std::int64_t k = 0; k < terms; ++k) {
            queue.add(blocks[k0 + k] + packed_at + e0 * r, (e1 - e0) * r * 4);
            if (!pack_broadcast) queue.add(blocks[k0 + k] + broadcast_at + r0 * r, (tile_row(1) - r0) * r * 4);
          }
        };
        for (std::int64_t k0 = 0; k0 < n_terms; k0 += terms_per_panel) {
          const std::int64_t terms = std::min(terms_per_panel, n_terms - k0), depth = terms * r;
          for (std::int64_t cb = ct0; cb < ct1; cb += kBlockTiles) {
            const std::int64_t e0 = cb * kTileCols, width = std::min(kBlockTiles, ct1 - cb) * kTileCols;
            // Panel rows q = (k - k0) r + c: weight_k F_k[e0 .., c], a strip of depth x kTileCols
            // per column tile, which its tiles read in order.
            const std::int64_t strip = depth * kTileCols;
            for (std::int64_t k = 0; k < terms; ++k)
              pack_rows(blocks[k0 + k] + packed_at, cols, r, static_cast<float>(weight[k0 + k]), e0, width, strip,
                        bp.data() + k * r * kTileCols);
            queue.clear();
            if (cb + kBlockTiles < ct1)
              queue_step(k0, cb + kBlockTiles);
            else if (k0 + terms_per_panel < n_terms)
              queue_step(k0 + terms_per_panel, ct0);
            const std::int64_t tiles = row_tiles * ((width + kTileCols - 1) / kTileCols);
            const std::int64_t fetch_per_tile = (queue.lines_left() + tiles - 1) / tiles;
            // a[q] = &F_k[r0][c], q = (k - k0) r + c: the tiles broadcast the values from the
            // blocks themselves, each from its own first row on.
            for (std::int64_t k = 0, q = 0; k < terms; ++k) {
              const float* row = blocks[k0 + k] + broadcast_at + r0 * r;
              for (std::int64_t c = 0; c < r; ++c) a[q++] = row + c;
            }
            for (std::int64_t rt = 0; rt < row_tiles; ++rt) {
              const std::int64_t a0 = tile_row(rt), rows_here = tile_row(rt + 1) - a0;
              if (pack_broadcast) {
                // Rank 1: the row tile's values of each term, into the run its tiles read (in L1);
                // two lines further on in each term's values, what the next row tiles pack.
                const Mask h = V::mask(rows_here);
                for (std::int64_t k = 0; k < terms; ++k) {
                  const float* f = blocks[k0 + k] + broadcast_at + a0;
                  __builtin_prefetch(f + 32, 0, 3);
                  V::store(ap.data() + k * kTileRows, V::load_masked(h, f));
                }
              }
              for (std::int64_t b0 = e0; b0 < std::min(cols, e0 + width); b0 += kTileCols) {
                const std::int64_t n_fetch = queue.take(std::min(fetch_per_tile, depth), fetch.data());
                if (fetch_per_tile > depth) queue.pump(fetch_per_tile - depth);
                if (pack_broadcast)
                  kPackedTiles[rows_here](depth, ap.data(), bp.data() + (b0 - e0) / kTileCols * strip, kTileCols,
                                          dst + (a0 - r0) * ldd + (b0 - c0), ldd, std::min(kTileCols, c1 - b0),
                                          fetch.data(), n_fetch);
                else
                  rank_tiles[rows_here](depth, a.data(), (a0 - r0) * r, r, bp.data() + (b0 - e0) / kTileCols * strip,
                                    kTileCols,
                                    dst + (a0 - r0) * ldd + (b0 - c0), ldd, std::min(kTileCols, c1 - b0),
                                    fetch.data(), n_fetch);
              }
            }
          }
        }
        if (transposed) transpose_block(dst, ldd, r1 - r0, c1 - c0, out + c0 * n + r0, n);
      }
    }
  }
};

}  // namespace eggroll::cpu_float_update
