// The cache- and register-blocked fp32 GEMM driver y = x W^T shared by the SIMD level files
// (cpu_sgemm_avx512.cpp, cpu_sgemm_avx2.cpp); each includes it with its own vector traits V.
//
// Layout: W (m, n) is packed once per call into column panels of kNr = kNv kLanes outputs,
// panel p = (n, kNr) with panel[k][c] = W[p kNr + c][k] (zero past m). A micro-tile keeps
// MR <= kMr rows x NV <= kNv vectors of outputs in registers; per k it loads NV vectors of the
// panel, broadcasts x[i][k] for each of its rows and issues MR NV FMAs. x is read in place.
// Cache blocking: rows in blocks of kMc and k in blocks of about kKc, so a panel block
// (kKc x kNr) is reused by every micro-tile of a row block and the row block of x
// (kMc x kKc) stays in L2. A chain that spans k blocks is stored to y and reloaded, which is
// exact, so every element stays one FMA chain over k = 0 .. n-1 (cpu_sgemm.hpp): the blocking,
// the tile shape and the thread split never change a bit.
//
// V (defined with internal linkage in each level file, so instantiations stay in the file that
// was compiled for that instruction set) provides:
//   Reg, kLanes, kNv, kMr; zero(), load(p), broadcast(p), fma(a, b, c) = a b + c rounded once,
//   store(p, v), load_first(p, count) / store_first(p, v, count) for the first count lanes,
//   add(a, b), relu(v) = max(v, 0) (0 for NaN) for the layer's epilogue (RowFinish),
//   transpose(Reg block[kLanes]): block[j][c] := block[c][j]; and for the fused low-rank
//   epilogue (cpu_sgemm.hpp) rank_fma(p, rank, count, s, acc): acc = fma(s[c], p[l rank + c], acc)
//   in lane l < count for c = 0 .. rank-1 in order (lanes past count add 0); optionally (16 lanes)
//   xb_sum(chains): the sum of a row's four x . B chains (XbPass) as the level's x . B adds them.
#pragma once
#include <omp.h>

#include <array>
#include <cstdint>
#include <memory>
#include <utility>

#include "backend/cpu/cpu_parallel.hpp"
#include "backend/cpu/cpu_sgemm.hpp"

namespace eggroll::cpu_sgemm::detail {

template <class V>
struct Blocked {
  using Reg = typename V::Reg;
  static constexpr int kLanes = V::kLanes;
  static constexpr int kNv = V::kNv;
  static constexpr int kNr = kLanes * kNv;        // outputs per panel
  static constexpr int kMr = V::kMr;              // rows per full micro-tile
  static constexpr std::int64_t kKc = 256;        // k block (a kKc x kNr panel block is 64 KiB at kNr 64)
  // rows per cache block: the traits' kMc where they set it, else 8 tiles
  static constexpr std::int64_t kMc = [] {
    if constexpr (requires { V::kMc; })
      return std::int64_t{V::kMc};
    else
      return std::int64_t{8 * kMr};
  }();

  static std::int64_t min64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

  // Rank 1 with LowRankEpilogue::xb_in_tiles and rows of x of n >= kXbTilesMinN: the full tiles of
  // a block's first panel also sum x . B_j of their rows, from the rows' values of the tile's k
  // block just after its stores, while they are in L1 (xb_sums), instead of prepare reading the
  // block's rows of x beforehand (faster at n 2048, not at n 512: docs/results.md, "x . B of
  // long rows in the GEMM's tiles"). Each row has four 16-lane chains over k: lane l of chain q
  // takes k = 64 i + 16 q + l below n - n % 64, then chain 0 takes the rest 16 at a time
  // (masked), from zero; at the last k the row's s = V::xb_sum(chains) coef_j. The level's x . B
  // of a row sums the same way, so a row's bits do not depend on which of the two computed them.
  struct XbPass {
    const LowRankEpilogue* ep;
    std::int64_t n, k0;  // k0: the call's first k, a multiple of 64
    float* chains;       // (kMc, 64): row i's at (i % kMc) 64 (a block is at most kMc consecutive rows)
  };
  static constexpr bool kXbTiles = kLanes == 16 && requires(const float* p) { V::xb_sum(p); };
  static constexpr std::int64_t kXbTilesMinN = 1024;
  static constexpr int kAnyRank = -1;  // tile's RANK for a rank known only at run time

  // What a tile asks for among its first k steps, one line a step, on behalf of the tiles after it
  // (compute's order), so that it is there when they start: its share of the next panel block's
  // lines, towards L2, and the next tile's rows of y, which its stores would otherwise wait for.
  // Only where W's panels take more than a quarter of the core's L2 (compute): then each row
  // block sweeps W past the L2 (the large model's first layer, 2 MiB, made the fp32 GEMM 1.10-1.15
  // times as fast); the medium model's 128 KiB layers stay there and ran 3-6% slower with it
  // (docs/results.md, "The fp32 GEMM's fetches ahead").
  struct Fetch {
    const float* lines = nullptr;  // the first line of the next panel block to fetch (16 floats a line)
    std::int64_t count = 0;        // how many lines from there
    const float* y = nullptr;      // the next tile's first row and column of y (row stride ldy), or null
  };

  using TileFn = void (*)(const float*, std::int64_t, const float*, std::int64_t, float*, std::int64_t, int, bool,
                          const LowRankEpilogue*, std::int64_t, std::int64_t, const XbPass*, const RowFinish*,
                          const Fetch*);

  // One micro-tile: y[r][c] for r < MR, c < cols (cols <= NV kLanes) continues its FMA chain
  // over kc more k (from +0 when first). x: (MR, >= kc), row stride ldx; panel: (kc, kNr);
  // y: row stride ldy. Lanes past cols are computed from zero padding and never stored.
  // With ep (only on the last k block), the chains are complete: the low-rank correction of
  // rows row .. row+MR-1 and outputs col .. col+cols-1 is added before the store.
  // RANK > 0 (full tiles, rank RANK), or kAnyRank (any rank, A^T rows only): when every row of the
  // tile is perturbed, the correction's rank FMAs per element are issued on the accumulators
  // before the store (A^T rows: rank by rank over the whole tile, like rank more steps of k; A in
  // the factor block: its columns by shuffles, row by row); otherwise after the store
  // (add_lowrank).
  // XB (RANK 0; rank 1's full tiles of a block's first panel, xb non-null): after the store the
  // tile also sums its rows' x . B_j (XbPass), then adds the correction (add_lowrank).
  // fin (only on the last k block): the layer's epilogue (RowFinish), on the accumulators before
  // the store where they hold the finished values and no kernel is needed, else on the stored rows.
  // fetch (FETCH): what to ask for on behalf of the tiles after this one, among its first k steps.
  template <int MR, int NV, int RANK = 0, bool XB = false, bool FETCH = false>
  static void tile(const float* x, std::int64_t ldx, const float* panel, std::int64_t kc, float* y,
                   std::int64_t ldy, int cols, bool first, const LowRankEpilogue* ep, std::int64_t row,
                   std::int64_t col, [[maybe_unused]] const XbPass* xb, const RowFinish* fin,
                   [[maybe_unused]] const Fetch* fetch) {
    Reg acc[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        acc[r][v] = first ? V::zero() : V::load_first(y + r * ldy + v * kLanes, cols - v * kLanes);
    const auto step = [&](std::int64_t k) [[gnu::always_inline]] {
      Reg b[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) b[v] = V::load(panel + k * kNr + v * kLanes);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const Reg a = V::broadcast(x + r * ldx + k);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = V::fma(a, b[v], acc[r][v]);
      }
    };
    std::int64_t k = 0;
    if constexpr (FETCH) {
      // The first steps also ask for what the tiles after this one will read: a line of the next
      // tile's y and a line of the next panel block (towards L2) a step, then the rest of the
      // block's lines, a step each. (Loops of single steps: in one of step pairs GCC spilled the
      // accumulators of the rank-4 tile.)
      constexpr std::int64_t kYRowLines = (kNr * 4 + 63) / 64;  // a row's kNr outputs of y
      const std::int64_t y_lines = fetch->y != nullptr ? min64(kc, kMr * kYRowLines) : 0;
      const std::int64_t lines = min64(kc, fetch->count);
      for (; k < y_lines; ++k) {
        __builtin_prefetch(fetch->y + k / kYRowLines * ldy + k % kYRowLines * 16, 0, 3);
        if (k < lines) __builtin_prefetch(fetch->lines + k * 16, 0, 2);
        step(k);
      }
      for (; k < lines; ++k) {
        __builtin_prefetch(fetch->lines + k * 16, 0, 2);
        step(k);
      }
    }
    for (; k < kc; ++k) step(k);
    if constexpr (RANK != 0) {
      if (ep != nullptr && all_perturbed<MR>(*ep, row)) {
        const int rank = RANK > 0 ? RANK : static_cast<int>(ep->rank);  // kAnyRank: the call's
        const float* s = ep->row_scale + row * rank;
        const std::int64_t ldc = ep->m;  // between the ranks of A^T
        const float* a0 = ep->row_a[row];
        if (RANK > 1 && !ep->a_by_rank) {
          // A_j (m, RANK) in the factor block: its columns for this vector of outputs, taken once
          // per run of rows with the same A (a member's rows, or an antithetic pair's).
#pragma GCC unroll 4
          for (int v = 0; v < NV; ++v) {
            Reg column[RANK > 1 ? RANK : 1];
            const float* a = nullptr;
#pragma GCC unroll 16
            for (int r = 0; r < MR; ++r) {
              if (ep->row_a[row + r] != a) {
                a = ep->row_a[row + r];
                if constexpr (RANK > 1) columns<RANK>(a + (col + v * kLanes) * RANK, column);
              }
#pragma GCC unroll 16
              for (int c = 0; c < RANK; ++c) acc[r][v] = V::fma(V::broadcast(s + r * RANK + c), column[c], acc[r][v]);
            }
          }
        } else if (a0 == ep->row_a[row + MR - 1]) {  // one member's rows (rows come in member order)
#pragma GCC unroll 16
          for (int c = 0; c < rank; ++c) {
            Reg av[NV];
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) av[v] = V::load(a0 + c * ldc + col + v * kLanes);
#pragma GCC unroll 16
            for (int r = 0; r < MR; ++r) {
              const Reg sv = V::broadcast(s + r * rank + c);
#pragma GCC unroll 4
              for (int v = 0; v < NV; ++v) acc[r][v] = V::fma(sv, av[v], acc[r][v]);
            }
          }
        } else {
#pragma GCC unroll 16
          for (int c = 0; c < rank; ++c)
#pragma GCC unroll 16
            for (int r = 0; r < MR; ++r) {
              const Reg sv = V::broadcast(s + r * rank + c);
              const float* av = ep->row_a[row + r] + c * ldc + col;
#pragma GCC unroll 4
              for (int v = 0; v < NV; ++v) acc[r][v] = V::fma(sv, V::load(av + v * kLanes), acc[r][v]);
            }
        }
        ep = nullptr;
      }
    }
    const bool finish_in_registers = fin != nullptr && ep == nullptr && fin->kernel == nullptr;
    if (finish_in_registers) finish_accumulators<MR, NV>(*fin, row, col, cols, acc);
    if (cols == NV * kLanes) {
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) V::store(y + r * ldy + v * kLanes, acc[r][v]);
    } else {
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) V::store_first(y + r * ldy + v * kLanes, acc[r][v], cols - v * kLanes);
    }
    if constexpr (XB) xb_sums<MR>(x, ldx, kc, *xb, row);
    if (ep != nullptr) add_lowrank<MR, NV>(*ep, row, col, cols, y, ldy);
    if (fin != nullptr && !finish_in_registers) finish_stored<MR, NV>(*fin, row, col, cols, y, ldy);
  }

  // The layer's epilogue (RowFinish: bias, relu) on a tile's finished accumulators. Lanes past
  // cols add zeros and are never stored.
  template <int MR, int NV>
  [[gnu::always_inline]] static inline void finish_accumulators(const RowFinish& fin, std::int64_t row,
                                                                std::int64_t col, int cols, Reg (&acc)[MR][NV]) {
    if (fin.bias != nullptr)
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const float* b = fin.bias_of_row(row + r) + col;
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = V::add(acc[r][v], V::load_first(b + v * kLanes, cols - v * kLanes));
      }
    if (fin.relu)
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = V::relu(acc[r][v]);
  }

  // The same on a tile's rows just stored (still in L1), where the correction was added after the
  // store or the activation needs the backend's kernel: each row's values once more through the
  // registers, then the kernel over the row's cols values.
  template <int MR, int NV>
  static void finish_stored(const RowFinish& fin, std::int64_t row, std::int64_t col, int cols, float* y,
                            std::int64_t ldy) {
    for (int r = 0; r < MR; ++r) {
      float* yr = y + r * ldy;
      if (fin.bias != nullptr || fin.relu) {
        const float* b = fin.bias != nullptr ? fin.bias_of_row(row + r) + col : nullptr;
        for (int v = 0; v < NV; ++v) {
          const int count = cols - v * kLanes;
          Reg t = V::load_first(yr + v * kLanes, count);
          if (b != nullptr) t = V::add(t, V::load_first(b + v * kLanes, count));
          if (fin.relu) t = V::relu(t);
          V::store_first(yr + v * kLanes, t, count);
        }
      }
      if (fin.kernel != nullptr) fin.kernel(fin.activation, cols, yr, yr);
    }
  }

  // The XbPass of rows row .. row + MR - 1 over the call's kc values of k (x: at the call's first
  // k), after the tile's stores, when the accumulators no longer hold registers (summed among the
  // tile's FMAs, the chains cost the k loop a spilled accumulator; summed before them, the rows
  // came from memory there instead of in the k loop, and it measured slower).
  template <int MR>
  static void xb_sums(const float* x, std::int64_t ldx, std::int64_t kc, const XbPass& xb, std::int64_t row) {
    const std::int64_t n = xb.n, n64 = n - n % 64, k_end = xb.k0 + kc;
    for (int r = 0; r < MR; ++r) {
      const float* b = xb.ep->row_b[row + r];
      if (b == nullptr) continue;
      float* chains = xb.chains + (row + r) % kMc * 64;
      Reg c0 = V::zero(), c1 = c0, c2 = c0, c3 = c0;
      if (xb.k0 > 0)
        c0 = V::load(chains), c1 = V::load(chains + 16), c2 = V::load(chains + 32), c3 = V::load(chains + 48);
      const float* xr = x + r * ldx - xb.k0;  // at k = 0
      std::int64_t k = xb.k0;                 // a multiple of 64
      for (; k + 64 <= min64(k_end, n64); k += 64) {
        c0 = V::fma(V::load(xr + k), V::load(b + k), c0);
        c1 = V::fma(V::load(xr + k + 16), V::load(b + k + 16), c1);
        c2 = V::fma(V::load(xr + k + 32), V::load(b + k + 32), c2);
        c3 = V::fma(V::load(xr + k + 48), V::load(b + k + 48), c3);
      }
      for (; k < k_end; k += 16) {  // past n's last multiple of 64 (in the last call)
        const int count = static_cast<int>(min64(kLanes, n - k));
        c0 = V::fma(V::load_first(xr + k, count), V::load_first(b + k, count), c0);
      }
      V::store(chains, c0), V::store(chains + 16, c1), V::store(chains + 32, c2), V::store(chains + 48, c3);
      if (k_end == n) xb.ep->row_scale[row + r] = V::xb_sum(chains) * xb.ep->row_scale[row + r];
    }
  }

  // out[c] lane l = p[l RANK + c], c < RANK, l < kLanes: a vector's columns of a (kLanes, RANK)
  // row-major block, by the level's shuffles where it has them (V::columns), else value by value.
  template <int RANK>
  static void columns(const float* p, Reg (&out)[RANK]) {
    if constexpr (requires { V::template columns<RANK>(p, out); }) {
      V::template columns<RANK>(p, out);
    } else {
      alignas(64) float lane[kLanes];
      for (int c = 0; c < RANK; ++c) {
        for (int l = 0; l < kLanes; ++l) lane[l] = p[l * RANK + c];
        out[c] = V::load(lane);
      }
    }
  }

  // y[r][..] += the low-rank correction of row + r (cpu_sgemm.hpp), one FMA per rank, on the tile
  // just stored (still in L1; the chain value reloads exactly), row by row: the tiles that do not
  // take it in registers (edge tiles, tiles with an unperturbed row, ranks other than 1, 2, 4, 8,
  // 16). Each element gets the same FMAs in the same order as in registers.
  template <int MR, int NV>
  static void add_lowrank(const LowRankEpilogue& ep, std::int64_t row, std::int64_t col, int cols, float* y,
                          std::int64_t ldy) {
    const std::int64_t rank = ep.rank;
    for (int r = 0; r < MR; ++r) {
      const float* a = ep.row_a[row + r];
      if (a == nullptr) continue;
      const float* s = ep.row_scale + (row + r) * rank;
      for (int v = 0; v < NV; ++v) {
        const int count = cols - v * kLanes;
        float* yv = y + r * ldy + v * kLanes;
        Reg t = V::load_first(yv, count);
        if (ep.a_by_rank) {
          const float* av = a + col + v * kLanes;
          for (std::int64_t c = 0; c < rank; ++c) t = V::fma(V::broadcast(s + c), V::load_first(av + c * ep.m, count), t);
        } else {
          t = V::rank_fma(a + (col + v * kLanes) * rank, rank, count, s, t);
        }
        V::store_first(yv, t, count);
      }
    }
  }

  // The A values that the tile of rows [row, row + kMr) at outputs [col, col + kNr) will read,
  // towards L2: issued before the tile ahead of it, which computes for about a microsecond while
  // they arrive. With one row per member every row brings a new factor block from a random place (a
  // noise table slice, or a view far larger than the caches), in an order (a panel's columns of
  // one member after another) that the hardware prefetchers do not follow. (Inlined early on
  // purpose: GCC 12 finds a function whose only effects are prefetches free of side effects and
  // drops the calls.)
  [[gnu::always_inline]] static inline void prefetch_a(const LowRankEpilogue& ep, std::int64_t row, std::int64_t col) {
    constexpr int kLine = 16;  // floats per 64-byte line
    if (col >= ep.m) return;
    const float* last = nullptr;
    for (std::int64_t r = row; r < min64(row + kMr, ep.rows); ++r) {
      const float* a = ep.row_a[r];
      if (a == nullptr || a == last) continue;
      last = a;
      if (ep.a_by_rank) {
        for (std::int64_t c = 0; c < ep.rank; ++c)
          for (int e = 0; e < kNr; e += kLine) __builtin_prefetch(a + c * ep.m + col + e, 0, 2);
      } else {
        for (std::int64_t e = 0; e < kNr * ep.rank; e += kLine) __builtin_prefetch(a + col * ep.rank + e, 0, 2);
      }
    }
  }

  template <int MR>
  static bool all_perturbed(const LowRankEpilogue& ep, std::int64_t row) {
    bool all = true;
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) all = all && ep.row_a[row + r] != nullptr;
    return all;
  }

  // The full tile for a fused correction: rank 1, 2, 4, 8 or 16 in registers; otherwise the
  // plain tile (the correction after the store).
  template <bool FETCH>
  static TileFn full_tile(const LowRankEpilogue* ep) {
    if (ep == nullptr) return &tile<kMr, kNv, 0, false, FETCH>;
    switch (ep->rank) {
      case 1: return &tile<kMr, kNv, 1, false, FETCH>;
      case 2: return &tile<kMr, kNv, 2, false, FETCH>;
      case 4: return &tile<kMr, kNv, 4, false, FETCH>;
      // 8 and 16 with A^T rows: the rank a loop bound as for the other ranks, the same operations
      // (fully unrolled, rank 16's forward at 16 rows per member ran 4-15% slower on a Zen 5,
      // rank 8's level to 7%: docs/results.md, fifty-fourth pass)
      case 8: return ep->a_by_rank ? &tile<kMr, kNv, kAnyRank, false, FETCH> : &tile<kMr, kNv, 8, false, FETCH>;
      case 16: return ep->a_by_rank ? &tile<kMr, kNv, kAnyRank, false, FETCH> : &tile<kMr, kNv, 16, false, FETCH>;
      // other ranks with A^T rows (several rows per member): the rank a loop bound
      default: return ep->a_by_rank ? &tile<kMr, kNv, kAnyRank, false, FETCH> : &tile<kMr, kNv, 0, false, FETCH>;
    }
  }

  // The first panel's full tile that also sums x . B (rank 1; XbPass).
  template <bool FETCH>
  static TileFn xb_tile() {
    if constexpr (kXbTiles) return &tile<kMr, kNv, 0, true, FETCH>;
    return nullptr;
  }

  // kTiles[NV - 1][MR - 1] = tile<MR, NV>: the edge tiles (fewer rows at the end of a row range,
  // fewer vectors in a narrow last panel) run the same per-element chain as the full tile.
  template <int NV, std::size_t... R>
  static constexpr std::array<TileFn, kMr> tiles_of_width(std::index_sequence<R...>) {
    return {{&tile<static_cast<int>(R) + 1, NV>...}};
  }
  template <std::size_t... NVm1>
  static constexpr std::array<std::array<TileFn, kMr>, kNv> all_tiles(std::index_sequence<NVm1...>) {
    return {{tiles_of_width<static_cast<int>(NVm1) + 1>(std::make_index_sequence<kMr>{})...}};
  }
  static constexpr auto kTiles = all_tiles(std::make_index_sequence<kNv>{});

  // Panel p of W (m, n) into out (n, kNr). Square blocks of kLanes outputs x kLanes k are loaded
  // as rows of W and transposed in registers.
  static void pack_panel(std::int64_t m, std::int64_t n, const float* w, std::int64_t p, float* out) {
    for (int v = 0; v < kNv; ++v) {
      const std::int64_t first = p * kNr + v * kLanes;
      const int count = static_cast<int>(min64(kLanes, m - first));  // outputs present (may be <= 0)
      for (std::int64_t k0 = 0; k0 < n; k0 += kLanes) {
        const int k_count = static_cast<int>(min64(kLanes, n - k0));
        Reg block[kLanes];
#pragma GCC unroll 16
        for (int c = 0; c < kLanes; ++c)
          block[c] = c < count ? V::load_first(w + (first + c) * n + k0, k_count) : V::zero();
        V::transpose(block);
        for (int j = 0; j < k_count; ++j) V::store(out + (k0 + j) * kNr + v * kLanes, block[j]);
      }
    }
  }

  // Rows [r0, r1) x panels [p0, p1) of y from the packed panels (ep: the fused correction or null).
  // prepare_blocks: call ep->prepare for each row block first. The full tiles fetch ahead (Fetch)
  // where W's panels take more than a quarter of the core's L2.
  static void compute(std::int64_t r0, std::int64_t r1, std::int64_t p0, std::int64_t p1, std::int64_t m,
                      std::int64_t n, const float* x, const float* packed, const LowRankEpilogue* ep,
                      const RowFinish* fin, float* y, bool prepare_blocks) {
    if ((m + kNr - 1) / kNr * kNr * n * 4 > l2_bytes() / 4)
      compute_with<true>(r0, r1, p0, p1, m, n, x, packed, ep, fin, y, prepare_blocks);
    else
      compute_with<false>(r0, r1, p0, p1, m, n, x, packed, ep, fin, y, prepare_blocks);
  }

  template <bool FETCH>
  static void compute_with(std::int64_t r0, std::int64_t r1, std::int64_t p0, std::int64_t p1, std::int64_t m,
                           std::int64_t n, const float* x, const float* packed, const LowRankEpilogue* ep,
                           const RowFinish* fin, float* y, bool prepare_blocks) {
    const std::int64_t n_kblocks = (n + kKc - 1) / kKc, kc_step = (n + n_kblocks - 1) / n_kblocks;
    const TileFn full = full_tile<FETCH>(ep);
    // x . B in the first panel's full tiles (XbPass): blocks prepared here, long rows, k blocks
    // starting at multiples of 64, a first panel of full width
    const bool xb_tiles = kXbTiles && prepare_blocks && ep != nullptr && ep->prepare != nullptr && ep->xb_in_tiles &&
                          ep->rank == 1 && n >= kXbTilesMinN && (n_kblocks == 1 || kc_step % 64 == 0) &&
                          (p0 + 1) * kNr <= m;
    const TileFn first_panel = xb_tiles ? xb_tile<FETCH>() : full;
    alignas(64) float chains[kXbTiles ? kMc * 64 : 1];
    cpu::LineQueue queue;  // what the next block of rows will read, fetched during this block's tiles
    // rows per block: kMc, or where the correction asks for fewer (LowRankEpilogue::block_rows) the
    // fewest whole tiles that hold them (rounded down, 4-row tiles took the large model's rank-4
    // blocks from 6 rows to 4, a third more sweeps of W: docs/results.md, "The AVX2 GEMM's tile on a
    // Zen 3")
    const std::int64_t mc =
        ep != nullptr && ep->block_rows > 0 ? min64(kMc, (ep->block_rows + kMr - 1) / kMr * kMr) : kMc;
    for (std::int64_t i0 = r0; i0 < r1; i0 += mc) {
      const std::int64_t i1 = min64(i0 + mc, r1);
      std::int64_t fetch_per_tile = 0;
      if (prepare_blocks && ep != nullptr && ep->prepare != nullptr) {
        queue.clear();
        (*ep->prepare)(i0, i1, xb_tiles ? i0 + (i1 - i0) / kMr * kMr : i0, i1 < r1 ? &queue : nullptr);
        const std::int64_t tiles = n_kblocks * (p1 - p0) * ((i1 - i0 + kMr - 1) / kMr);
        fetch_per_tile = (queue.lines_left() + tiles - 1) / tiles;
      }
      for (std::int64_t k0 = 0; k0 < n; k0 += kc_step) {
        const std::int64_t kc = min64(kc_step, n - k0);
        const bool first = k0 == 0;
        const LowRankEpilogue* epk = k0 + kc == n ? ep : nullptr;
        const RowFinish* fink = k0 + kc == n ? fin : nullptr;
        const LowRankEpilogue* ahead = epk != nullptr && epk->fetch_a_ahead ? epk : nullptr;
        if (ahead != nullptr) prefetch_a(*ahead, i0, p0 * kNr);
        const XbPass pass{ep, n, k0, chains};
        for (std::int64_t p = p0; p < p1; ++p) {
          const float* panel = packed + (p * n + k0) * kNr;
          const int cols = static_cast<int>(min64(kNr, m - p * kNr));
          const int nv = (cols + kLanes - 1) / kLanes;
          const TileFn full_p = p == p0 ? first_panel : full;
          const XbPass* xb = xb_tiles && p == p0 ? &pass : nullptr;
          // FETCH: the panel block after this one (the next panel, else the first of the next k block
          // or of the next row block), its lines shared out among this panel's row tiles
          const float* next = nullptr;
          std::int64_t next_lines = 0, share = 0;
          float* y_after_panel = nullptr;
          if constexpr (FETCH) {
            std::int64_t next_kc = 0;
            if (p + 1 < p1)
              next = panel + n * kNr, next_kc = kc;
            else if (k0 + kc < n)
              next = packed + (p0 * n + k0 + kc) * kNr, next_kc = min64(kc_step, n - k0 - kc);
            else if (i1 < r1)
              next = packed + p0 * n * kNr, next_kc = min64(kc_step, n);
            const std::int64_t row_tiles = (i1 - i0 + kMr - 1) / kMr;
            next_lines = (next_kc * kNr + 15) / 16;
            share = (next_lines + row_tiles - 1) / row_tiles;
            y_after_panel = p + 1 < p1      ? y + i0 * m + (p + 1) * kNr
                            : k0 + kc < n ? y + i0 * m + p0 * kNr
                            : i1 < r1     ? y + i1 * m + p0 * kNr
                                          : nullptr;
          }
          const auto fetch_for = [&](std::int64_t i) {  // the full tile at row i's Fetch (FETCH)
            Fetch f;
            const std::int64_t first_line = (i - i0) / kMr * share;
            if (first_line < next_lines) f.lines = next + first_line * 16, f.count = min64(share, next_lines - first_line);
            f.y = i + kMr < i1 ? y + (i + kMr) * m + p * kNr : y_after_panel;
            return f;
          };
          std::int64_t i = i0;
          if (nv == kNv && cols == kNr)
            for (; i + kMr <= i1; i += kMr) {
              // the next tile's A: the next rows, or the next panel's first rows
              if (ahead != nullptr) prefetch_a(*ahead, i + kMr < i1 ? i + kMr : i0, i + kMr < i1 ? p * kNr : (p + 1) * kNr);
              queue.pump(fetch_per_tile);
              Fetch f;
              if constexpr (FETCH) f = fetch_for(i);
              full_p(x + i * n + k0, n, panel, kc, y + i * m + p * kNr, m, cols, first, epk, i, p * kNr, xb, fink,
                     FETCH ? &f : nullptr);
            }
          else if (nv == kNv)
            for (; i + kMr <= i1; i += kMr) {
              queue.pump(fetch_per_tile);
              tile<kMr, kNv>(x + i * n + k0, n, panel, kc, y + i * m + p * kNr, m, cols, first, epk, i, p * kNr,
                             nullptr, fink, nullptr);
            }
          for (; i < i1; i += kMr) {
            queue.pump(fetch_per_tile);
            kTiles[nv - 1][min64(kMr, i1 - i) - 1](x + i * n + k0, n, panel, kc, y + i * m + p * kNr, m, cols, first,
                                                   epk, i, p * kNr, nullptr, fink, nullptr);
          }
        }
      }
    }
  }

  // Splits [0, count) into `parts` contiguous ranges as even as possible; range `part`.
  static std::pair<std::int64_t, std::int64_t> split(std::int64_t count, std::int64_t parts, std::int64_t part) {
    return {count * part / parts, count * (part + 1) / parts};
  }

  // This thread's share of the team's work: a grid of tr x tc threads over row micro-tiles x
  // panels. Rows are split first: threads that share rows each read all of those rows of x, and
  // with the fused correction one thread prepares them all while the others wait. So columns are
  // split further only where that is clearly less work on the busiest thread (fewer row tiles
  // than threads), not to save a tile.
  static void compute_share(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* packed,
                            const LowRankEpilogue* ep, const RowFinish* fin, float* y, std::int64_t t,
                            std::int64_t n_threads) {
    const std::int64_t n_tiles = (rows + kMr - 1) / kMr, n_panels = (m + kNr - 1) / kNr;
    std::int64_t tr = 1, best = -1;
    for (std::int64_t d = n_threads; d >= 1; --d) {
      if (n_threads % d != 0) continue;
      const std::int64_t tc = n_threads / d, cost = ((n_tiles + d - 1) / d) * ((n_panels + tc - 1) / tc);
      if (best < 0 || 4 * cost < 3 * best) best = cost, tr = d;
    }
    const std::int64_t tc = n_threads / tr;
    // Rows shared by threads (tc > 1): their correction inputs are prepared once, up front.
    if (tc > 1 && ep != nullptr && ep->prepare != nullptr) {
      if (t == 0) (*ep->prepare)(0, rows, 0, nullptr);
      cpu_parallel::barrier(n_threads);
    }
    const auto [t0, t1] = split(n_tiles, tr, t / tc);
    const auto [p0, p1] = split(n_panels, tc, t % tc);
    if (t0 < t1 && p0 < p1) compute(t0 * kMr, min64(t1 * kMr, rows), p0, p1, m, n, x, packed, ep, fin, y, tc == 1);
  }

  // gemm_nt (cpu_sgemm.hpp) for rows, m, n >= 1: pack W (threads split the panels), then each
  // thread computes its share; with ep, the low-rank correction is fused into the stores, with
  // fin, the layer's epilogue. With prepacked (a PackedPanels of this layout: pack_with), the
  // panels come from it: filled already (no packing, no wait), or filled now, by the threads of
  // this call and of any other call on it, panel by panel, in place of the scratch.
  static void run(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y,
                  const LowRankEpilogue* ep, const RowFinish* fin, const PackedWeights* prepacked) {
    const std::int64_t n_panels = (m + kNr - 1) / kNr;
    const PackedPanels* kept = PackedPanels::of(prepacked, kNr, m, n);
    const bool filled = kept != nullptr && kept->filled();
    float* packed = kept != nullptr ? kept->data() : thread_buffer(n_panels * n * kNr);
    cpu_parallel::team(rows * m * n >= kParallelMinWork, [&](std::int64_t t, std::int64_t nt) {
      if (!filled) {
        if (kept != nullptr) {
          for (std::int64_t p = kept->claim(); p < n_panels; p = kept->claim()) {
            pack_panel(m, n, w, p, packed + p * n * kNr);
            kept->packed_one();
          }
          kept->wait_filled();  // every panel packed, by any thread, before any tile
        } else {
          const auto [p0, p1] = cpu_parallel::share(n_panels, t, nt);
          for (std::int64_t p = p0; p < p1; ++p) pack_panel(m, n, w, p, packed + p * n * kNr);
          cpu_parallel::barrier(nt);  // every panel packed before any tile
        }
      }
      compute_share(rows, m, n, x, packed, ep, fin, y, t, nt);
    });
  }

  // cpu_sgemm::pack at this layout: an empty pack for W's panels, which the first calls fill.
  static std::shared_ptr<const PackedWeights> pack_with(std::int64_t m, std::int64_t n) {
    return std::make_shared<PackedPanels>(kNr, m, n);
  }
};

}  // namespace eggroll::cpu_sgemm::detail
