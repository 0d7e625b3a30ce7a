// The discrete update's sum (ALGORITHM.md 2.6), z[a][b] += sum_k d_k sum_c A_k[a][c] B_k[b][c],
// at the AVX-512 VNNI level.
// - When every d is -1, 0 or 1 (the signs the integer strategy passes): four terms per vpdpbusd
//   lane (64 multiply-adds per instruction), one factor + 128 as the u8 operand and the other as
//   the s8 one, neither operand negated (-A does not fit int8 when A = -128): both signs in the
//   same tiles, a d = -1 quad's u8 operand being 127 - its factor (the +128 operand xor 0xFF).
//   The share comes back out as 128 (d = +1) or 127 (d = -1) times the other factor's sum over
//   the terms. Rank 4, and 8 and 16 while a pass's A lines fit the L2 (in_place_serves;
//   cpu_int8_update_in_place_avx512.cpp): A + 128 broadcast from the blocks, B copied per column
//   block (its share summed as it is copied), and qapply_moves's step applied in the last pass
//   where asked. Other ranks (cpu_int8_update_quads_avx512.cpp): B + 128 packed, A packed (its
//   share per row); ranks 3, 5-7 and 13-15 first copied with zero columns to 4, 8 or 16
//   (add_padded).
// - Otherwise (this file): term pairs of int16 (d_k A_k against B_k, packed by
//   cpu_int8_update.cpp), one vpdpwssd per pair (32 multiply-adds).
// Exact either way: int32 within a chunk of terms, int64 in z, so the result equals the scalar
// level's bit for bit whatever the threads.
#include "backend/cpu/avx512_columns.hpp"
#include "backend/cpu/cpu_parallel.hpp"
#include "backend/cpu/cpu_sgemm.hpp"
#include "backend/cpu/int8_padded_rows_avx512.hpp"
#include "backend/int8_ops.hpp"
#include "eggroll/core/unset_vector.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backend/cpu/cpu_int8_update_avx512.hpp"

#include <algorithm>
#include <vector>

// GCC 12's AVX-512 headers trip false (maybe-)uninitialized warnings on their own _mm512_undefined
// operands (GCC bug 105593), as in cpu_int8_avx512.cpp.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace eggroll::cpu_int8::detail {
namespace {

using avx512::add16_to_z;
using avx512::load_u32;

// Term pairs of int16, any d (the level's kernel for the packing of cpu_int8_update.cpp):
// z rows [a0, a0 + AT) x columns [b0, b0 + 32) += the term pairs [j0, j1): int32 in registers
// (coef pair broadcast, vpdpwssd against Bp), then added into the int64 z (columns past n masked).
template <int AT>
void update_tile(const UpdateArgs& g, std::int64_t a0, std::int64_t b0, std::int64_t j0, std::int64_t j1) {
  __m512i c[AT * 2];
#pragma GCC unroll 16
  for (int e = 0; e < AT * 2; ++e) c[e] = _mm512_setzero_si512();
  for (std::int64_t jp = j0; jp < j1; ++jp) {
    // 32 columns: two blocks' slices
    const __m512i w0 = _mm512_loadu_si512(g.bp_at(jp, b0)), w1 = _mm512_loadu_si512(g.bp_at(jp, b0 + 16));
#pragma GCC unroll 8
    for (int i = 0; i < AT; ++i) {
      const __m512i cf = _mm512_set1_epi32(load_u32(g.coef + (a0 + i) * 2 * g.n_jp + 2 * jp));
      c[2 * i] = _mm512_dpwssd_epi32(c[2 * i], cf, w0);
      c[2 * i + 1] = _mm512_dpwssd_epi32(c[2 * i + 1], cf, w1);
    }
  }
  alignas(64) std::int32_t part[AT][32];  // stored first: GCC spills the accumulators otherwise
#pragma GCC unroll 8
  for (int i = 0; i < AT; ++i) {
    _mm512_store_si512(part[i], c[2 * i]);
    _mm512_store_si512(part[i] + 16, c[2 * i + 1]);
  }
  const std::int64_t cols = std::min<std::int64_t>(32, g.n - b0);
  for (int i = 0; i < AT; ++i)
    for (std::int64_t col = 0; col < cols; col += 16)
      add16_to_z(g.z + (a0 + i) * g.n + b0 + col, cols - col, _mm512_load_si512(part[i] + col), 1);
}

// Whether the in-place tiles serve rank r for m rows of z: rank 4 always; ranks 8 and 16 while a
// pass's A lines (512 quads, a dword of each of the m rows: 2 KiB a row) fit in the core's L2.
// Beyond, each of the pass's column blocks read them again from the L3: the packed quads were
// 1.2-2.0 times as fast at rank 16 for 1024 rows and more on a Zen 5 (1 MiB L2), and up to 1.35
// at rank 8 (within 5% the other way at 1024 x 1024 and 2048 x 512; docs/results.md, fifty-fourth
// pass).
bool in_place_serves(std::int64_t m, std::int64_t r) {
  if (r == 4) return true;
  if (r != 8 && r != 16) return false;
  const std::int64_t l2 = cpu_sgemm::detail::l2_bytes();
  return m * 2048 <= (l2 > 0 ? l2 : std::int64_t{1} << 20);
}

// Ranks 3, 5 .. 7 and 13 .. 15 run as the next power of two (4, 8, 16): the same number of quads
// (four columns of one pair each), but whole ones, which the in-place tiles take (and the packed
// ones without their missing terms); rank 3 summed 2.6 times slower than rank 4 at the medium
// model's shapes. Ranks 9 .. 12 would gain a quad a pair, so they stay as they are.
std::int64_t padded_update_rank(std::int64_t r) {
  const std::int64_t p = next_power_of_two_rank(r);
  return (r + 3) / 4 == p / 4 ? p : r;
}

// The sums at rank p > r from copies of the pairs' blocks with zero columns (BytePad), in
// chunks of pairs of at most 4 MiB of copies, each summed into z in turn: exact integers, so the
// same z.
void add_padded(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t p, std::int64_t n_pairs,
                const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z) {
  const std::int64_t rows = n + m, chunk = std::max<std::int64_t>(1, (std::int64_t{4} << 20) / (rows * p));
  static thread_local UnsetVector<std::int8_t> store;
  std::vector<const std::int8_t*> padded;
  const BytePad pad(r, p);
  for (std::int64_t k0 = 0; k0 < n_pairs; k0 += chunk) {
    const std::int64_t count = std::min(chunk, n_pairs - k0);
    if (store.size() < static_cast<std::size_t>(count * rows * p)) store.resize(static_cast<std::size_t>(count * rows * p));
    padded.resize(static_cast<std::size_t>(count));
    // the copies shared by the team (a null block, of a pair left out, stays null); the calling
    // thread's buffer, by pointer (the name `store` is each team thread's own)
    std::int8_t* const copies = store.data();
    cpu_parallel::for_each(count, count * rows * p >= (std::int64_t{1} << 16), [&](std::int64_t k) {
      std::int8_t* to = copies + k * rows * p;
      if (blocks[k0 + k] != nullptr) pad(blocks[k0 + k], rows, to);
      padded[static_cast<std::size_t>(k)] = blocks[k0 + k] != nullptr ? to : nullptr;
    });
    if (in_place_serves(m, p))
      update_signs::add_in_place(m, n, p, count, padded.data(), d + k0, z);
    else
      update_signs::add_packed(m, n, p, count, padded.data(), d + k0, z);
  }
}

// Whether every d is -1, 0 or 1 (what the quads need).
bool signs_only(const std::int8_t* d, std::int64_t n_pairs) {
  for (std::int64_t k = 0; k < n_pairs; ++k)
    if (d[k] < -1 || d[k] > 1) return false;
  return true;
}

}  // namespace

bool update_signs_avx512_vnni(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                              const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z) {
  if (!signs_only(d, n_pairs)) return false;
  if (m <= 0 || n <= 0) return true;
  if (const std::int64_t p = padded_update_rank(r); p != r)
    add_padded(m, n, r, p, n_pairs, blocks, d, z);
  else if (in_place_serves(m, r))
    update_signs::add_in_place(m, n, r, n_pairs, blocks, d, z);
  else
    update_signs::add_packed(m, n, r, n_pairs, blocks, d, z);
  return true;
}

bool apply_signs_avx512_vnni(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                             const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t threshold,
                             std::int8_t* w, std::int64_t* moved) {
  if (!in_place_serves(m, r) || !signs_only(d, n_pairs)) return false;
  *moved = m <= 0 || n <= 0 ? 0 : update_signs::apply_in_place(m, n, r, n_pairs, blocks, d, threshold, w);
  return true;
}

void update_avx512_vnni(const UpdateArgs& g) {
  static const UpdateTileFn tiles[8] = {update_tile<1>, update_tile<2>, update_tile<3>, update_tile<4>,
                                        update_tile<5>, update_tile<6>, update_tile<7>, update_tile<8>};
  run_update_tiles(g, 8, 32, tiles);
}

}  // namespace eggroll::cpu_int8::detail
#endif
