// The int8 update's sign sums at the AVX-512 VNNI level for ranks 4, 8, 16
// (cpu_int8_update_avx512.hpp), with the step of qapply_moves in the last pass where asked: four
// terms per vpdpbusd lane, A + 128 broadcast from the factor blocks as the u8 operand and B copied
// per column block as the s8 one, both signs in the same tiles (a d = -1 quad's u8 operand is
// 127 - A); the share comes back out as 128 (d = +1) or 127 (d = -1) times B's column sums. Exact:
// int32 within a pass, int64 in z.
#include "backend/cpu/cpu_parallel.hpp"
#include "backend/int8_ops.hpp"

#if defined(__x86_64__)
#include "backend/cpu/cpu_int8_update_avx512.hpp"  // the AVX-512 headers, the tile

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

namespace eggroll::cpu_int8::detail {
namespace {

constexpr int kRows = update_signs::kRows;
constexpr std::int64_t kCols = update_signs::kCols;
constexpr std::int64_t kAhead = 8;  // quads ahead that the in-place tile fetches
// Quads per pass over z: a tile's A lines of a pass (64 bytes a quad) and its column block's slice
// (256 bytes a quad) stay in L2 (one pass over every quad lost 1.8x at N 65536). With both signs
// in the same passes, 1024 quads lost 10-20% against 512 on a Zen 5 (the large model), and 256
// was slower again at N 1024.
constexpr std::int64_t kPassQuads = 512;

using avx512::byte_mask;
using avx512::load_u32;

// At these ranks a quad is four columns 4 g .. 4 g + 3 of one pair, so its bytes at B row b (and
// at A row a) are dword g of the pair's row, as it lies in its block. Here A + 128 is the u8 operand,
// broadcast from the blocks, and B the s8 one: each thread copies B of a column block into a
// slice of its own when it starts that column block's tiles (in cache for them), instead of a
// packing pass writing B and A for every quad to memory and the tiles reading them back, and
// sums the slice's columns as it copies them, for the +128's share. No pass over A besides the
// tiles'.
// Both signs go through the same tiles, the d = +1 quads first: a d = -1 quad's u8 operand is
// 127 - A = (A + 128) ^ 0xFF, so its lane sums (127 - A) B = -A B + 127 B, and the share is
// 128 B for the d = +1 terms and 127 B for the d = -1 ones. Any int8 A and B, one epilogue and
// one pass over z for both signs.

struct InPlace {
  std::int64_t m = 0, n = 0, r = 0, n_quads = 0, n_plus = 0, n_passes = 0, pass_quads = 0;  // passes of about even size
  std::vector<const std::int8_t*> block;  // quad q's factor block: B rows (n, r), then A rows (m, r)
  std::vector<std::int64_t> dword;        // quad q's dword of the block's rows (its columns / 4)
  std::pair<std::int64_t, std::int64_t> pass_quads_of(std::int64_t pass) const {
    return {pass * pass_quads, std::min(n_quads, (pass + 1) * pass_quads)};
  }
  // where the d = -1 quads start in [q0, q1)
  std::int64_t minus_from(std::int64_t q0, std::int64_t q1) const { return std::clamp(n_plus, q0, q1); }
};

InPlace in_place(std::int64_t m, std::int64_t n, std::int64_t r, const std::int8_t* const* blocks, const std::int8_t* d,
                 std::int64_t n_pairs) {
  InPlace g;
  g.m = m;
  g.n = n;
  g.r = r;
  for (int sign : {1, -1}) {
    for (std::int64_t k = 0; k < n_pairs; ++k)
      if (d[k] == sign && blocks[k] != nullptr)
        for (std::int64_t q = 0; q < r / 4; ++q) {
          g.block.push_back(blocks[k]);
          g.dword.push_back(q);
        }
    if (sign == 1) g.n_plus = static_cast<std::int64_t>(g.block.size());
  }
  g.n_quads = static_cast<std::int64_t>(g.block.size());
  g.n_passes = (g.n_quads + kPassQuads - 1) / kPassQuads;
  g.pass_quads = g.n_passes > 0 ? (g.n_quads + g.n_passes - 1) / g.n_passes : 0;
  return g;
}

// Lane i (i < count <= 16; zero past it) = dword g of row i, rows of r = 4, 8 or 16 bytes from
// `rows`: rank 4 one load; rank 8 two loads of rows 8 at a time, dword 2 i + g picked; rank 16
// four loads of rows 4 at a time, dword 4 i + g picked from each half and the halves blended.
// Only the dwords wanted are loaded.
inline __m512i strided_dwords(const std::int8_t* rows, std::int64_t r, std::int64_t g, std::int64_t count) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  if (r == 4) return _mm512_maskz_loadu_epi32(avx512::first_lanes(count), rows);
  if (r == 8) {
    const __mmask16 wanted = static_cast<__mmask16>(0x5555 << g);
    const __m512i first = _mm512_maskz_loadu_epi32(wanted & avx512::first_lanes(2 * count), rows);
    const __m512i second = _mm512_maskz_loadu_epi32(wanted & avx512::first_lanes(2 * count - 16), rows + 64);
    const __m512i pick = _mm512_add_epi32(_mm512_slli_epi32(lane, 1), _mm512_set1_epi32(static_cast<int>(g)));
    return _mm512_permutex2var_epi32(first, pick, second);
  }
  const __mmask16 wanted = static_cast<__mmask16>(0x1111 << g);
  __m512i v[4];
  for (int h = 0; h < 4; ++h)
    v[h] = _mm512_maskz_loadu_epi32(wanted & avx512::first_lanes(4 * (count - 4 * h)), rows + 64 * h);
  const __m512i pick = _mm512_add_epi32(_mm512_and_si512(_mm512_slli_epi32(lane, 2), _mm512_set1_epi32(31)),
                                        _mm512_set1_epi32(static_cast<int>(g)));
  return _mm512_mask_blend_epi32(0xFF00, _mm512_permutex2var_epi32(v[0], pick, v[1]),
                                 _mm512_permutex2var_epi32(v[2], pick, v[3]));
}

// slice (pass_quads, 64, 4) = the B bytes of columns [b0, b0 + 64) of the quads of this pass,
// copied from the blocks: one contiguous stream for the tiles of a column block (read in place,
// the blocks' lines lie a block's size apart and crowd a few cache sets); colsum[b - b0] = the
// share over the quads, 128 B_t[b] for d = +1 and 127 B_t[b] for d = -1 (zero past n).
void pack_slice(const InPlace& g, std::int64_t pass, std::int64_t b0, std::uint8_t* slice, std::int32_t* colsum) {
  const auto [q0, q1] = g.pass_quads_of(pass);
  const std::int64_t minus = g.minus_from(q0, q1), cols = std::min<std::int64_t>(kCols, g.n - b0);
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i sum[2][4];  // d = +1, d = -1
  for (auto& half : sum)
    for (__m512i& v : half) v = _mm512_setzero_si512();
  for (std::int64_t q = q0; q < q1; ++q) {
    const std::size_t qa = static_cast<std::size_t>(std::min(q + kAhead, q1 - 1));
    if (g.dword[qa] == 0)  // the pair's lines, once for its quads
      for (std::int64_t line = 0; line < g.r; ++line)
        _mm_prefetch(reinterpret_cast<const char*>(g.block[qa] + b0 * g.r + 64 * line), _MM_HINT_T0);
    const std::int8_t* src = g.block[static_cast<std::size_t>(q)] + b0 * g.r;
    const std::int64_t dw = g.dword[static_cast<std::size_t>(q)];
    __m512i(&s)[4] = sum[q >= minus ? 1 : 0];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m512i bv = strided_dwords(src + 16 * v * g.r, g.r, dw, cols - 16 * v);
      _mm512_store_si512(slice + (q - q0) * kCols * 4 + 64 * v, bv);
      s[v] = _mm512_dpbusd_epi32(s[v], ones, bv);
    }
  }
#pragma GCC unroll 4
  for (int v = 0; v < 4; ++v)  // 128 (plus + minus) - minus
    _mm512_store_si512(colsum + 16 * v, _mm512_sub_epi32(_mm512_slli_epi32(_mm512_add_epi32(sum[0][v], sum[1][v]), 7),
                                                         sum[1][v]));
}

// c += the quads [qa, qb) of a tile: B from the column block's slice (quad q0's first), A + 128
// broadcast from the quads' blocks and xor-ed with flip (0x80 bytes: A + 128; 0x7F: 127 - A),
// with the tile's lines of z fetched meanwhile, one a quad from quad q0 on, for its epilogue (z
// outgrows L2 at the large model).
template <int RT>
[[gnu::always_inline]] inline void in_place_quads(const InPlace& g, const std::uint8_t* slice, std::int64_t a_at,
                                                  std::int64_t q0, std::int64_t qa, std::int64_t qb, std::int64_t q1,
                                                  __m512i flip, const std::int64_t* zt, __m512i (&c)[RT][4]) {
  const std::int64_t r = g.r;
  for (std::int64_t q = qa; q < qb; ++q) {
    const std::int8_t* blk = g.block[static_cast<std::size_t>(q)] + 4 * g.dword[static_cast<std::size_t>(q)];
    _mm_prefetch(reinterpret_cast<const char*>(g.block[static_cast<std::size_t>(std::min(q + kAhead, q1 - 1))] + a_at),
                 _MM_HINT_T0);
    if (zt != nullptr) update_signs::fetch_z_line<RT>(zt, g.n, q - q0);
    const std::uint8_t* bp = slice + (q - q0) * kCols * 4;
    __m512i w[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) w[v] = _mm512_load_si512(bp + 64 * v);
#pragma GCC unroll 8
    for (int i = 0; i < RT; ++i) {
      const __m512i au = _mm512_xor_si512(_mm512_set1_epi32(load_u32(blk + a_at + r * i)), flip);
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) c[i][v] = _mm512_dpbusd_epi32(c[i][v], au, w[v]);
    }
  }
}

// With a step to apply (qupdate_apply): what the in-place tiles do with a pass's sums. Without
// one, they add them into z (z zeroed by the caller). With one, the first pass stores them into
// z (no zeroing), the later ones add them, and the last applies the step to w with its sums and
// z's (no z at all when there is one pass): no pass over z before or after the sums.
struct Step {
  std::int64_t threshold = 0;  // >= 1
  std::int8_t* w = nullptr;    // (m, n)
};

// The end of a pass for columns [0, count) of a row (count <= 16, p32 the pass's int32 sums less
// the share) when a step is applied: the sums plus z's (none at the first pass), stored into z,
// or, at the last pass, the step applied to w with them: w = clip(w + sign(v)) where |v| >= t, as
// qapply_moves, 16 values at once, the bytes stored from a register (a narrowing store to memory
// is slow on AMD cores). Returns how many values changed.
inline std::int64_t end16(bool first, bool last, std::int64_t* z, std::int8_t* w, std::int64_t count, __m512i p32,
                          std::int64_t t) {
  __m512i v[2];
  __mmask16 up = 0, down = 0;
  for (int h = 0; h < 2; ++h) {
    const __mmask8 mask = static_cast<__mmask8>(byte_mask(count - 8 * h));
    v[h] = _mm512_cvtepi32_epi64(h == 0 ? _mm512_castsi512_si256(p32) : _mm512_extracti64x4_epi64(p32, 1));
    if (!first) v[h] = _mm512_add_epi64(v[h], _mm512_maskz_loadu_epi64(mask, z + 8 * h));
    if (!last) {
      _mm512_mask_storeu_epi64(z + 8 * h, mask, v[h]);
      continue;
    }
    up |= static_cast<__mmask16>(_mm512_mask_cmpge_epi64_mask(mask, v[h], _mm512_set1_epi64(t)) << (8 * h));
    down |= static_cast<__mmask16>(_mm512_mask_cmple_epi64_mask(mask, v[h], _mm512_set1_epi64(-t)) << (8 * h));
  }
  if (!last) return 0;
  const __mmask16 valid = avx512::first_lanes(count);
  const __m512i old = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(valid, w));
  __m512i next = _mm512_mask_add_epi32(old, up, old, _mm512_set1_epi32(1));
  next = _mm512_mask_sub_epi32(next, down, next, _mm512_set1_epi32(1));
  next = _mm512_min_epi32(_mm512_max_epi32(next, _mm512_set1_epi32(-127)), _mm512_set1_epi32(127));
  _mm_mask_storeu_epi8(w, valid, _mm512_cvtepi32_epi8(next));
  return __builtin_popcount(static_cast<unsigned>(_mm512_mask_cmpneq_epi32_mask(valid, next, old)));
}

// quad_tile's sum over the quads of this pass, both signs, then added into z, or, with a step,
// ended as `end` says (end16); returns the values of w it changed.
template <int RT>
std::int64_t in_place_tile(const InPlace& g, const std::uint8_t* slice, const std::int32_t* colsum, std::int64_t a0,
                           std::int64_t b0, std::int64_t pass, std::int64_t* z, const Step* step) {
  const auto [q0, q1] = g.pass_quads_of(pass);
  const std::int64_t minus = g.minus_from(q0, q1);
  __m512i c[RT][4];
#pragma GCC unroll 8
  for (int i = 0; i < RT; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) c[i][v] = _mm512_setzero_si512();
  const std::int64_t a_at = (g.n + a0) * g.r;
  std::int64_t* zt = z != nullptr ? z + a0 * g.n + b0 : nullptr;  // none with a step over one pass
  in_place_quads<RT>(g, slice, a_at, q0, q0, minus, q1, _mm512_set1_epi8(static_cast<char>(0x80)), zt, c);
  in_place_quads<RT>(g, slice, a_at, q0, minus, q1, q1, _mm512_set1_epi8(0x7F), zt, c);
  if (step == nullptr) {
    update_signs::add_tile_to_z<RT>(c, nullptr, 0, colsum, g.n - b0, zt, g.n);
    return 0;
  }
  alignas(64) std::int32_t part[RT][kCols];  // stored first, as add_tile_to_z does
#pragma GCC unroll 8
  for (int i = 0; i < RT; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) _mm512_store_si512(part[i] + 16 * v, c[i][v]);
  const std::int64_t cols = std::min(kCols, g.n - b0);
  std::int64_t moved = 0;
  for (int i = 0; i < RT; ++i)
    for (std::int64_t col = 0; col < cols; col += 16) {
      const __m512i v = _mm512_sub_epi32(_mm512_load_si512(part[i] + col), _mm512_load_si512(colsum + col));
      moved += end16(pass == 0, pass + 1 == g.n_passes, zt != nullptr ? zt + i * g.n + col : nullptr,
                     step->w + (a0 + i) * g.n + b0 + col, cols - col, v, step->threshold);
    }
  return moved;
}

// The sums in one team, with no barrier: contiguous shares of (column block, row tile) in that
// order, as the packed ranks' run (cpu_int8_update_quads_avx512.cpp); pass by pass, a thread
// packs a column block's slice when its share enters it. A thread's tiles are its own in every
// pass.
std::int64_t run_in_place(const InPlace& g, std::int64_t* z, const Step* step) {
  using Fn = std::int64_t (*)(const InPlace&, const std::uint8_t*, const std::int32_t*, std::int64_t, std::int64_t,
                              std::int64_t, std::int64_t*, const Step*);
  static const Fn tiles[kRows] = {in_place_tile<1>, in_place_tile<2>, in_place_tile<3>,
                                  in_place_tile<4>, in_place_tile<5>, in_place_tile<6>};
  const std::int64_t m = g.m, n = g.n;
  const std::int64_t col_blocks = (n + kCols - 1) / kCols, row_blocks = (m + kRows - 1) / kRows;
  std::atomic<std::int64_t> moved{0};
  cpu_parallel::team(m * n * g.n_quads * 4 > kParallelMinWork, [&](std::int64_t t, std::int64_t nt) {
    const auto [first, last] = cpu_parallel::share(col_blocks * row_blocks, t, nt);
    std::int64_t my_moved = 0;
    // the slice, then the column sums (64-byte aligned)
    const auto lines = std::make_unique_for_overwrite<__m512i[]>(static_cast<std::size_t>(kPassQuads * 4 + 4));
    std::uint8_t* slice = reinterpret_cast<std::uint8_t*>(lines.get());
    std::int32_t* colsum = reinterpret_cast<std::int32_t*>(lines.get() + kPassQuads * 4);
    for (std::int64_t pass = 0; pass < g.n_passes; ++pass) {
      std::int64_t packed = -1;
      for (std::int64_t it = first; it < last; ++it) {
        const std::int64_t cb = it / row_blocks, a0 = (it % row_blocks) * kRows;
        if (cb != packed) pack_slice(g, pass, cb * kCols, slice, colsum);
        packed = cb;
        my_moved += tiles[std::min<std::int64_t>(kRows, m - a0) - 1](g, slice, colsum, a0, cb * kCols, pass, z, step);
      }
    }
    moved += my_moved;
  });
  return moved;
}

}  // namespace

void update_signs::add_in_place(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                                const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z) {
  const InPlace g = in_place(m, n, r, blocks, d, n_pairs);
  if (g.n_quads > 0) run_in_place(g, z, nullptr);
}

std::int64_t update_signs::apply_in_place(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                                          const std::int8_t* const* blocks, const std::int8_t* d,
                                          std::int64_t threshold, std::int8_t* w) {
  const InPlace g = in_place(m, n, r, blocks, d, n_pairs);
  if (g.n_quads == 0) return 0;  // every sum zero: nothing moves
  const Step step{std::max<std::int64_t>(threshold, 1), w};
  // z for the passes before the last, written by the first (not zeroed)
  const auto z = g.n_passes > 1 ? std::make_unique_for_overwrite<std::int64_t[]>(static_cast<std::size_t>(m * n))
                                : std::unique_ptr<std::int64_t[]>();
  return run_in_place(g, z.get(), &step);
}

}  // namespace eggroll::cpu_int8::detail
#endif
