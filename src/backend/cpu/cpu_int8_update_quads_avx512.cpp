// The int8 update's sign sums at the AVX-512 VNNI level for ranks other than 4, 8, 16
// (cpu_int8_update_avx512.hpp): four terms per vpdpbusd lane (64 multiply-adds per instruction),
// B + 128 packed as the u8 operand and A packed as the s8 one, both signs in the same tiles (a
// d = -1 quad's u8 operand is 127 - B, the +128 operand xor 0xFF); the share comes back out as
// 128 (d = +1) or 127 (d = -1) times a row's sum of A over the terms, per chunk of quads. Exact:
// int32 within a chunk, int64 in z.
#include "backend/cpu/cpu_parallel.hpp"
#include "backend/cpu/line_queue.hpp"
#include "backend/int8_ops.hpp"

#if defined(__x86_64__)
#include "backend/cpu/cpu_int8_update_avx512.hpp"  // the AVX-512 headers, the tile

#include <algorithm>
#include <memory>
#include <vector>

namespace eggroll::cpu_int8::detail {
namespace {

constexpr int kRows = update_signs::kRows;
constexpr std::int64_t kCols = update_signs::kCols;
constexpr std::int64_t kChunkQuads = 16384;  // 4 * 128 * 255 * kChunkQuads < 2^31
constexpr std::int64_t kPackRows = 64;       // coef packing block: rows x terms
constexpr std::int64_t kPackTerms = 64;

using avx512::byte_mask;
using avx512::load_u32;

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
  // A simple quad's packing also asks for the next one's B rows (its pairs' B parts, the lines
  // spread over its steps): each quad starts four streams of rows lying apart, and the steps of
  // the one before waited on their first lines (the medium model's rank-1 and rank-2 updates
  // 1.15-1.40 times as fast on two threads of a Zen 5; docs/results.md, fifty-third pass).
  cpu::LineQueue queue;
  const std::int64_t steps = g.n_pad / 16;
  for (std::int64_t q = qa; q < qb; ++q) {
    const std::uint8_t flip_byte = q < g.n_plus ? 0x80 : 0x7F;
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(flip_byte));
    if (simple_quad(tk, tc, r, 4 * q)) {  // the pairs' B rows + 128 (the padding's value is never read)
      queue.clear();
      if (q + 1 < qb && simple_quad(tk, tc, r, 4 * (q + 1)))
        for (std::int64_t e = 0; e < 4; e += r <= 2 ? r : 4) queue.add(blocks[tk[4 * (q + 1) + e]], n * r);
      const std::int64_t per_step = (queue.lines_left() + steps - 1) / steps;
      for (std::int64_t b = 0; b < g.n_pad; b += 16) {
        queue.pump(per_step);
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
    update_signs::fetch_z_line<RT>(zt, g.n, q - q0);
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
  update_signs::add_tile_to_z<RT>(c, g.rowsum.get() + a0 * g.n_chunks + ch, g.n_chunks, nullptr, g.n - b0, zt, g.n);
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

}  // namespace

void update_signs::add_packed(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                              const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z) {
  Quads g = quads_of(m, n, r, blocks, d, n_pairs);
  if (g.n_terms > 0) run(g, blocks, z);
}

}  // namespace eggroll::cpu_int8::detail
#endif
