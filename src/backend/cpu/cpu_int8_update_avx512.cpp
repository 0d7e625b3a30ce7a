// The discrete update's sum (ALGORITHM.md 2.6), z[a][b] += sum_k d_k sum_c A_k[a][c] B_k[b][c],
// at the AVX-512 VNNI level.
// - When every d is -1, 0 or 1 (the signs the integer strategy passes): four terms per vpdpbusd
//   lane (64 multiply-adds per instruction), one factor + 128 as the u8 operand and the other as
//   the s8 one, neither operand negated (-A does not fit int8 when A = -128): both signs in the
//   same tiles, a d = -1 quad's u8 operand being 127 - its factor (the +128 operand xor 0xFF).
//   The share comes back out as 128 (d = +1) or 127 (d = -1) times the other factor's sum over
//   the terms. Ranks 4, 8, 16: A + 128 broadcast from the blocks, B copied per column block (its
//   share summed as it is copied). Other ranks: B + 128 packed, A packed (its share per row).
// - Otherwise: term pairs of int16 (d_k A_k against B_k, packed by cpu_int8_update.cpp), one
//   vpdpwssd per pair (32 multiply-adds).
// Exact either way: int32 within a chunk of terms, int64 in z, so the result equals the scalar
// level's bit for bit whatever the threads.
// Sections, in order: the packed ranks; the in-place ranks 4, 8, 16 (with the step of
// qupdate_apply applied in their last pass); the int16 term pairs; the entry points.
#include "backend/int8_ops.hpp"
#include "backend/cpu/avx512_columns.hpp"
#include "backend/cpu/cpu_parallel.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

// GCC 12's AVX-512 headers trip false (maybe-)uninitialized warnings on their own _mm512_undefined
// operands (GCC bug 105593), as in cpu_int8_avx512.cpp.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace eggroll::cpu_int8::detail {
namespace {

constexpr int kRows = 6;                      // z rows per tile: 6 x 4 accumulators
constexpr std::int64_t kCols = 64;            // z columns per tile
constexpr std::int64_t kChunkQuads = 16384;   // 4 * 128 * 255 * kChunkQuads < 2^31
constexpr std::int64_t kPackRows = 64;        // coef packing block: rows x terms
constexpr std::int64_t kPackTerms = 64;
constexpr std::int64_t kAhead = 8;  // quads ahead that the in-place tile fetches
// Quads per pass over z at ranks 4, 8, 16: a tile's A lines of a pass (64 bytes a quad) and its
// column block's slice (256 bytes a quad) stay in L2 (one pass over every quad lost 1.8x at N
// 65536). With both signs in the same passes, 1024 quads lost 10-20% against 512 on a Zen 5 (the
// large model), and 256 was slower again at N 1024.
constexpr std::int64_t kPassQuads = 512;

using avx512::byte_mask;
using avx512::load_u32;
using avx512::add16_to_z;

// ---- ranks other than 4, 8, 16: both factors packed (Quads, pack_quads, quad_tile, run) ----

// Both signs' terms, packed: term t = 4 q + e is (pair tk[t], column tc[t]), the d = +1 terms
// first, up to a whole quad (padded with missing terms, tk = -1), then the d = -1 terms. A d = +1
// quad's u8 operand is B + 128 and a d = -1 quad's 127 - B = (B + 128) ^ 0xFF, so the lanes sum
// A B + 128 A and -A B + 127 A: one tile and one pass over z for both signs.
struct Quads {
  std::int64_t m = 0, n = 0, r = 0, n_pad = 0, n_terms = 0, n_quads = 0, n_plus = 0, n_chunks = 0;  // n_plus: d = +1 quads
  std::vector<std::int64_t> tk, tc;        // the terms (pair, column), in order
  std::unique_ptr<std::uint8_t[]> bq;      // (n_pad / 64, n_quads, 64, 4): B_t[b] + 128 or 127 - B_t[b], zero for a missing term
  // The 4 bytes of quad q at B row b: a column block's slice is contiguous, so a tile streams it
  // (with rows of n_pad * 4 bytes, a multiple of 4 KiB at n = 1024 and more, every quad's line
  // of the slice fell into the same few cache sets and the slice did not stay in L2).
  std::uint8_t* quad_at(std::int64_t q, std::int64_t b) const {
    return bq.get() + ((b / kCols) * n_quads + q) * kCols * 4 + (b % kCols) * 4;
  }
  std::unique_ptr<std::int8_t[]> coef;     // (m, 4 n_quads): A_t[a], zero for a missing term
  std::unique_ptr<std::int32_t[]> rowsum;  // (m, n_chunks): a chunk's share, 128 sum of a row's d = +1 coef + 127 sum of its d = -1 ones
};

// A quad is simple when its four terms are whole pairs' columns in order: four pairs' one (rank
// 1), two pairs' two (rank 2), or four columns c .. c + 3 of one pair, c a multiple of 4 (ranks 4,
// 8, 16). Its bytes at factor row j then come from the pairs' rows j as they lie, interleaved or
// picked by quad_rows instead of gathered byte by byte.
bool simple_quad(const std::vector<std::int64_t>& tk, const std::vector<std::int64_t>& tc, std::int64_t r,
                 std::int64_t t) {
  if ((r != 1 && r != 2 && r % 4 != 0) || t + 3 >= static_cast<std::int64_t>(tk.size())) return false;
  if (r >= 4) {
    for (std::int64_t e = 1; e < 4; ++e)
      if (tk[t + e] != tk[t] || tc[t + e] != tc[t] + e) return false;
    return tc[t] % 4 == 0;
  }
  for (std::int64_t e = 0; e < 4; e += r)
    if (tc[t + e] != 0 || tk[t + e + r - 1] != tk[t + e]) return false;
  return true;
}

// How many quads from t0 on, up to t1 (at most 64 terms on), are simple, counting until one is not.
std::int64_t simple_quads(const std::vector<std::int64_t>& tk, const std::vector<std::int64_t>& tc, std::int64_t r,
                          std::int64_t t0, std::int64_t t1) {
  std::int64_t count = 0;
  for (std::int64_t t = t0; t + 4 <= t1 && simple_quad(tk, tc, r, t); t += 4) ++count;
  return count;
}

// Lane i (i < count <= 16; zero past it) = the simple quad's four bytes at factor row j + i: the
// terms t .. t + 3 of rows of r bytes each. Ranks 12, 20, ...: the quad's dword of each row, r
// bytes apart, by a gather (ranks 4, 8 and 16 are summed in place, below). Ranks 1 and 2:
// interleaved from the 4 / r pairs by unpacks.
[[gnu::always_inline]] inline __m512i quad_rows(const std::int8_t* const* blocks, const std::vector<std::int64_t>& tk,
                                                const std::vector<std::int64_t>& tc, std::int64_t r, std::int64_t t,
                                                std::int64_t j, std::int64_t count) {
  const auto row = [&](std::int64_t e) { return blocks[tk[t + e]] + j * r; };
  if (r >= 4) {
    const __m512i offsets = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm512_set1_epi32(static_cast<int>(r)));
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), avx512::first_lanes(count), offsets, row(0) + tc[t], 1);
  }
  __m128i d[4];
  if (r == 2) {  // two pairs' 16-bit rows: 8 rows per half
    const __mmask16 lo = static_cast<__mmask16>(byte_mask(2 * count)), hi = static_cast<__mmask16>(byte_mask(2 * count - 16));
    const __m128i x0 = _mm_maskz_loadu_epi8(lo, row(0)), x1 = _mm_maskz_loadu_epi8(lo, row(2));
    const __m128i y0 = _mm_maskz_loadu_epi8(hi, row(0) + 16), y1 = _mm_maskz_loadu_epi8(hi, row(2) + 16);
    d[0] = _mm_unpacklo_epi16(x0, x1);
    d[1] = _mm_unpackhi_epi16(x0, x1);
    d[2] = _mm_unpacklo_epi16(y0, y1);
    d[3] = _mm_unpackhi_epi16(y0, y1);
  } else {  // four pairs' bytes
    const __mmask16 valid = static_cast<__mmask16>(byte_mask(count));
    const __m128i x0 = _mm_maskz_loadu_epi8(valid, row(0)), x1 = _mm_maskz_loadu_epi8(valid, row(1));
    const __m128i x2 = _mm_maskz_loadu_epi8(valid, row(2)), x3 = _mm_maskz_loadu_epi8(valid, row(3));
    const __m128i lo01 = _mm_unpacklo_epi8(x0, x1), hi01 = _mm_unpackhi_epi8(x0, x1);
    const __m128i lo23 = _mm_unpacklo_epi8(x2, x3), hi23 = _mm_unpackhi_epi8(x2, x3);
    d[0] = _mm_unpacklo_epi16(lo01, lo23);
    d[1] = _mm_unpackhi_epi16(lo01, lo23);
    d[2] = _mm_unpacklo_epi16(hi01, hi23);
    d[3] = _mm_unpackhi_epi16(hi01, hi23);
  }
  const __m512i v = _mm512_inserti32x4(_mm512_castsi128_si512(d[0]), d[1], 1);
  return _mm512_inserti32x4(_mm512_inserti32x4(v, d[2], 2), d[3], 3);
}

// coef rows [a0, a1) x terms [t0, t1) (t1 <= t0 + 64) whose first n_simple quads are simple, 16
// rows at a time: each simple quad's rows a .. a + 16 are one vector (quad_rows), and a 16 x 16
// transpose of 32-bit values turns the quads' vectors into the 16 rows' bytes (zero past the
// simple quads; the terms there are written one by one after).
void pack_coef_block(const std::int8_t* const* blocks, const std::vector<std::int64_t>& tk,
                     const std::vector<std::int64_t>& tc, std::int64_t r, std::int64_t n, std::int64_t width,
                     std::int64_t a0, std::int64_t a1, std::int64_t t0, std::int64_t t1, std::int64_t n_simple,
                     std::int8_t* coef) {
  const std::int64_t n_terms = static_cast<std::int64_t>(tk.size());
  if (n_simple > 0) {
    const __mmask64 bytes = byte_mask(t1 - t0);
    for (std::int64_t a = a0; a < a1; a += 16) {
      const std::int64_t count = std::min<std::int64_t>(16, a1 - a);
      __m512 v[16];
#pragma GCC unroll 16
      for (int q = 0; q < 16; ++q)
        v[q] = q < n_simple ? _mm512_castsi512_ps(quad_rows(blocks, tk, tc, r, t0 + 4 * q, n + a, count))
                            : _mm512_setzero_ps();
      avx512::transpose16(v);
      for (std::int64_t i = 0; i < count; ++i)
        _mm512_mask_storeu_epi8(coef + (a + i) * width + t0, bytes, _mm512_castps_si512(v[i]));
    }
  }
  for (std::int64_t a = a0; a < a1; ++a) {
    std::int8_t* out = coef + a * width;
    for (std::int64_t k = t0 + 4 * n_simple; k < t1; ++k)
      out[k] = k < n_terms && tk[k] >= 0 ? blocks[tk[k]][(n + a) * r + tc[k]] : std::int8_t{0};
  }
}

// The terms (pair, column) in order, d = +1 then d = -1, and room for their packing (pack_quads).
Quads quads_of(std::int64_t m, std::int64_t n, std::int64_t r, const std::int8_t* const* blocks, const std::int8_t* d,
               std::int64_t n_pairs) {
  Quads g;
  for (int sign : {1, -1}) {
    for (std::int64_t k = 0; k < n_pairs; ++k) {
      if (d[k] != sign || blocks[k] == nullptr) continue;
      for (std::int64_t c = 0; c < r; ++c) {
        g.tk.push_back(k);
        g.tc.push_back(c);
      }
    }
    if (sign == 1) {
      while (g.tk.size() % 4 != 0) {
        g.tk.push_back(-1);
        g.tc.push_back(-1);
      }
      g.n_plus = static_cast<std::int64_t>(g.tk.size()) / 4;
    }
  }
  g.m = m;
  g.n = n;
  g.r = r;
  g.n_pad = (n + kCols - 1) / kCols * kCols;
  g.n_terms = static_cast<std::int64_t>(g.tk.size());
  g.n_quads = (g.n_terms + 3) / 4;
  g.n_chunks = (g.n_quads + kChunkQuads - 1) / kChunkQuads;
  g.bq = std::make_unique_for_overwrite<std::uint8_t[]>(static_cast<std::size_t>(g.n_quads * g.n_pad * 4));
  g.coef = std::make_unique_for_overwrite<std::int8_t[]>(static_cast<std::size_t>(m * 4 * g.n_quads));
  g.rowsum = std::make_unique_for_overwrite<std::int32_t[]>(static_cast<std::size_t>(m * g.n_chunks));
  return g;
}

// The sum of bytes [k0, k1) of row, 64 at a time, as 1 * s8 dot products.
inline std::int32_t byte_sum(const std::int8_t* row, std::int64_t k0, std::int64_t k1) {
  __m512i sum = _mm512_setzero_si512();
  for (std::int64_t k = k0; k < k1; k += 64)
    sum = _mm512_dpbusd_epi32(sum, _mm512_set1_epi8(1), _mm512_maskz_loadu_epi8(byte_mask(k1 - k), row + k));
  return _mm512_reduce_add_epi32(sum);
}

// Thread t of nt's part of the packing: bq of its share of the quads, then coef and the rowsums of
// its share of the rows (16 at a time, so that a short matrix still splits).
void pack_quads(Quads& g, const std::int8_t* const* blocks, std::int64_t t, std::int64_t nt) {
  const std::int64_t m = g.m, n = g.n, r = g.r, width = 4 * g.n_quads;
  const std::vector<std::int64_t>&tk = g.tk, &tc = g.tc;
  const auto [qa, qb] = cpu_parallel::share(g.n_quads, t, nt);
  for (std::int64_t q = qa; q < qb; ++q) {
    const std::uint8_t flip_byte = q < g.n_plus ? 0x80 : 0x7F;
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(flip_byte));
    if (simple_quad(tk, tc, r, 4 * q)) {  // the pairs' B rows + 128 (the padding's value is never read)
      for (std::int64_t b = 0; b < g.n_pad; b += 16) {
        const std::int64_t count = std::max<std::int64_t>(0, std::min<std::int64_t>(16, n - b));
        _mm512_storeu_si512(g.quad_at(q, b), _mm512_xor_si512(quad_rows(blocks, tk, tc, r, 4 * q, b, count), flip));
      }
      continue;
    }
    for (std::int64_t b = 0; b < g.n_pad; b += kCols) std::fill_n(g.quad_at(q, b), kCols * 4, std::uint8_t{0});
    for (std::int64_t e = 0; e < 4 && 4 * q + e < g.n_terms; ++e) {
      if (tk[4 * q + e] < 0) continue;
      const std::int8_t* col = blocks[tk[4 * q + e]] + tc[4 * q + e];
      for (std::int64_t b = 0; b < n; ++b) g.quad_at(q, b)[e] = static_cast<std::uint8_t>(col[b * r] ^ flip_byte);
    }
  }
  // coef in blocks of rows x terms, row by row: the block's factor rows stay in L1 and each row
  // is written 64 contiguous bytes at a time (pack_coef in cpu_int8_update.cpp).
  const auto [ga, gb] = cpu_parallel::share((m + 15) / 16, t, nt);
  const std::int64_t row_first = 16 * ga, row_last = std::min(m, 16 * gb);
  for (std::int64_t a0 = row_first; a0 < row_last; a0 += kPackRows)
    for (std::int64_t t0 = 0; t0 < width; t0 += kPackTerms) {
      const std::int64_t a1 = std::min(row_last, a0 + kPackRows), t1 = std::min(width, t0 + kPackTerms);
      pack_coef_block(blocks, tk, tc, r, n, width, a0, a1, t0, t1, simple_quads(tk, tc, r, t0, t1), g.coef.get());
    }
  for (std::int64_t a = row_first; a < row_last; ++a)
    for (std::int64_t ch = 0; ch < g.n_chunks; ++ch) {
      const std::int8_t* row = g.coef.get() + a * width;
      const std::int64_t t0 = 4 * ch * kChunkQuads, t1 = std::min(width, 4 * (ch + 1) * kChunkQuads);
      const std::int64_t minus = std::clamp(4 * g.n_plus, t0, t1);
      g.rowsum[static_cast<std::size_t>(a * g.n_chunks + ch)] =
          128 * byte_sum(row, t0, minus) + 127 * byte_sum(row, minus, t1);
    }
}

// z rows [0, RT) x columns [0, min(cols, 64)) (row stride ldz) += c[i] - the share: the end of a
// quad tile. The share is the row's, rowsum[i * rowsum_stride], or, with a
// null rowsum, the column's, colsum[col]. The accumulators are stored first, then widened from
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
      add16_to_z(z + i * ldz + col, cols - col, _mm512_sub_epi32(_mm512_load_si512(part[i] + col), share), 1);
    }
  }
}

// z rows [a0, a0 + RT) x columns [b0, b0 + 64) += the quads [q0, q1) of chunk ch: int32 in
// registers, then the share taken out and the result added into the int64 z. The tile's lines of
// z are fetched during its quads, one a quad, for the epilogue.
template <int RT>
void quad_tile(const Quads& g, std::int64_t a0, std::int64_t b0, std::int64_t ch, std::int64_t* z) {
  const std::int64_t q0 = ch * kChunkQuads, q1 = std::min(g.n_quads, q0 + kChunkQuads), width = 4 * g.n_quads;
  __m512i c[RT][4];
#pragma GCC unroll 8
  for (int i = 0; i < RT; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) c[i][v] = _mm512_setzero_si512();
  const std::int8_t* coef = g.coef.get() + a0 * width;
  const std::uint8_t* slice = g.quad_at(q0, b0);  // quad q's 64 columns at slice + 256 (q - q0)
  std::int64_t* zt = z + a0 * g.n + b0;
  for (std::int64_t q = q0; q < q1; ++q) {
    if (const std::int64_t line = q - q0; line < RT * 8)
      _mm_prefetch(reinterpret_cast<const char*>(zt + (line / 8) * g.n + (line % 8) * 8), _MM_HINT_ET0);
    const std::uint8_t* bp = slice + (q - q0) * kCols * 4;
    __m512i w[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) w[v] = _mm512_loadu_si512(bp + 64 * v);
#pragma GCC unroll 8
    for (int i = 0; i < RT; ++i) {
      const __m512i cf = _mm512_set1_epi32(load_u32(coef + i * width + 4 * q));
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) c[i][v] = _mm512_dpbusd_epi32(c[i][v], w[v], cf);
    }
  }
  add_tile_to_z<RT>(c, g.rowsum.get() + a0 * g.n_chunks + ch, g.n_chunks, nullptr, g.n - b0, zt, g.n);
}

// The sums in one team: each thread packs its share of the quads and rows, then after a barrier
// runs its contiguous share of (column block, row tile), in that order (a thread's consecutive
// tiles reread one cached slice of bq).
void run(Quads& g, const std::int8_t* const* blocks, std::int64_t* z) {
  using Fn = void (*)(const Quads&, std::int64_t, std::int64_t, std::int64_t, std::int64_t*);
  static const Fn tiles[kRows] = {quad_tile<1>, quad_tile<2>, quad_tile<3>, quad_tile<4>, quad_tile<5>, quad_tile<6>};
  const std::int64_t m = g.m, n = g.n;
  const std::int64_t col_blocks = g.n_pad / kCols, row_blocks = (m + kRows - 1) / kRows;
  cpu_parallel::team(m * n * g.n_terms > kParallelMinWork, [&](std::int64_t t, std::int64_t nt) {
    const auto [first, last] = cpu_parallel::share(col_blocks * row_blocks, t, nt);
    pack_quads(g, blocks, t, nt);
    cpu_parallel::barrier(nt);
    for (std::int64_t it = first; it < last; ++it) {
      const std::int64_t cb = it / row_blocks, a0 = (it % row_blocks) * kRows;
      const Fn tile = tiles[std::min<std::int64_t>(kRows, m - a0) - 1];
      for (std::int64_t ch = 0; ch < g.n_chunks; ++ch) tile(g, a0, cb * kCols, ch, z);
    }
  });
}

// ---- ranks 4, 8, 16: no packing pass ----
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
    if (const std::int64_t line = q - q0; zt != nullptr && line < RT * 8)
      _mm_prefetch(reinterpret_cast<const char*>(zt + (line / 8) * g.n + (line % 8) * 8), _MM_HINT_ET0);
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
    add_tile_to_z<RT>(c, nullptr, 0, colsum, g.n - b0, zt, g.n);
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

// The sums in one team, with no barrier: column blocks split into contiguous shares of (column
// block, row tile) in that order, as in run above; pass by pass, a thread packs a column block's
// slice when its share enters it. A thread's tiles are its own in every pass.
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

// ---- any d: term pairs of int16 (the level's kernel for the packing of cpu_int8_update.cpp) ----

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
  if (r == 4 || r == 8 || r == 16) {
    const InPlace g = in_place(m, n, r, blocks, d, n_pairs);
    if (g.n_quads > 0) run_in_place(g, z, nullptr);
    return true;
  }
  Quads g = quads_of(m, n, r, blocks, d, n_pairs);
  if (g.n_terms > 0) run(g, blocks, z);
  return true;
}

bool apply_signs_avx512_vnni(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                             const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t threshold,
                             std::int8_t* w, std::int64_t* moved) {
  if ((r != 4 && r != 8 && r != 16) || !signs_only(d, n_pairs)) return false;
  *moved = 0;
  if (m <= 0 || n <= 0) return true;
  const InPlace g = in_place(m, n, r, blocks, d, n_pairs);
  if (g.n_quads == 0) return true;  // every sum zero: nothing moves
  const Step step{std::max<std::int64_t>(threshold, 1), w};
  // z for the passes before the last, written by the first (not zeroed)
  const auto z = g.n_passes > 1 ? std::make_unique_for_overwrite<std::int64_t[]>(static_cast<std::size_t>(m * n))
                                : std::unique_ptr<std::int64_t[]>();
  *moved = run_in_place(g, z.get(), &step);
  return true;
}

void update_avx512_vnni(const UpdateArgs& g) {
  static const UpdateTileFn tiles[8] = {update_tile<1>, update_tile<2>, update_tile<3>, update_tile<4>,
                                        update_tile<5>, update_tile<6>, update_tile<7>, update_tile<8>};
  run_update_tiles(g, 8, 32, tiles);
}

}  // namespace eggroll::cpu_int8::detail
#endif
