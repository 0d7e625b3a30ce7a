// The discrete update's sum (ALGORITHM.md 2.6) on AMX tiles, for the int8 level avx512_amx:
// AVX-512 code (compiled with the VNNI level's flags) that packs the factors and adds the sums to
// z, around amx_accumulate (cpu_int8_amx.cpp), which runs the tiles. The VNNI sum
// (cpu_int8_update_avx512.cpp) serves the other levels and the weights other than -1, 0, 1.
#include "backend/int8_ops.hpp"
#include "backend/cpu/avx512_columns.hpp"
#include "backend/cpu/cpu_int8_amx.hpp"
#include "backend/cpu/cpu_parallel.hpp"
#include "backend/cpu/int8_row_epilogue_avx512.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <utility>
#include <vector>

// GCC 12's AVX-512 headers trip false (maybe-)uninitialized warnings on their own _mm512_undefined
// operands (GCC bug 105593), as in cpu_int8_avx512.cpp.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace eggroll::cpu_int8::detail {

// ---- The sum on AMX tiles (level avx512_amx): every d in {-1, 0, 1} ----
// Per sign, the quads of four terms (Quad) in order, as a matmul of K = 4 quads over
// signed bytes (tdpbssd) that amx_accumulate runs: the "x" rows are one factor's rows (16 quads of
// a row make a tile row, taken by 16 x 16 transposes) and the "W" outputs the other's in PackedW's
// layout (a quad's 16 rows of 4 bytes make a tile row: one load at rank 4). x is the factor with
// fewer rows (B, when m > n: then the sums come out as z's transpose and are added transposed),
// so that fewer values go through the transposes. Exact: a quad adds at most 4 128^2 = 2^16 in
// magnitude, so runs of kAmxRunQuads quads stay within int32; z is int64.
namespace {

constexpr std::int64_t kAmxRunQuads = 4096;  // quads summed in int32 before they go to z (2^28), W at most 16 KB a row
constexpr std::int64_t kAmxRows = 64;         // x rows per block: a block's packed x stays in L2

// A quad's four terms: at ranks 4, 8, 16 columns 4 g .. 4 g + 3 of one pair (p[0] = its block + 4
// g); at rank 2 both columns of two pairs (p[0], p[1]: their blocks); at rank 1 the column of four
// pairs. A missing pair (in a run's last quad) is null: its terms are zero. Factor row i (B's b,
// then A's a at n + a) is at p + i r.
struct Quad {
  const std::int8_t* p[4] = {};
};

// One run of quads of one sign. x's row i is factor row x_off + i (x_rows of them), W's output o
// factor row w_off + o; transposed: x is B.
struct AmxRun {
  std::int64_t m = 0, n = 0, r = 0;
  int sign = 0;
  std::vector<Quad> at;
  bool transposed() const { return m > n; }
  std::int64_t x_off() const { return transposed() ? 0 : n; }
  std::int64_t x_rows() const { return transposed() ? n : m; }
  std::int64_t w_off() const { return transposed() ? n : 0; }
  std::int64_t w_outputs() const { return transposed() ? m : n; }
  std::int64_t groups() const { return (static_cast<std::int64_t>(at.size()) + 15) / 16 * 16; }
};

// Lanes l < count: quad q's 4 bytes at factor row row + l; zero in the others. At rank 4 one load;
// at 8 and 16 the rows' lines loaded (only the group's dwords, so nothing past the last row's
// group is read) and the group's dwords picked; at 1 and 2 the pairs' bytes interleaved.
[[gnu::always_inline]] inline __m512i rows_of_group(const Quad& q, std::int64_t r, std::int64_t row, std::int64_t count) {
  const std::uint32_t rows = avx512::first_lanes(count);
  if (r < 4) {
    __m512i v = _mm512_setzero_si512();
    for (int s = 0; s < 4 / r; ++s) {
      if (q.p[s] == nullptr) continue;
      const __m512i part = r == 1 ? _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(static_cast<__mmask16>(rows), q.p[s] + row))
                                  : _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(static_cast<__mmask16>(rows), q.p[s] + 2 * row));
      v = _mm512_or_si512(v, _mm512_slli_epi32(part, 8 * r * s));
    }
    return v;
  }
  const std::int8_t* p = q.p[0] + row * r;
  if (r == 4) return _mm512_maskz_loadu_epi32(static_cast<__mmask16>(rows), p);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  // the dwords of rows [first, first + per) among 16 dwords of `per` rows (every (16 / per)-th)
  const auto row_dwords = [&](int first, int per) {
    if (count >= 16) return per == 8 ? 0x5555u : 0x1111u;
    std::uint32_t mask = 0;
    for (int l = 0; l < per; ++l) mask |= ((rows >> (first + l)) & 1u) << (16 / per * l);
    return mask;
  };
  if (r == 8) {  // row l's dword is dword 2 l of the 32 at p
    const auto dwords = [&](int half) {
      return _mm512_maskz_loadu_epi32(static_cast<__mmask16>(row_dwords(8 * half, 8)), p + 64 * half);
    };
    return _mm512_permutex2var_epi32(dwords(0), _mm512_slli_epi32(lane, 1), dwords(1));
  }
  // r == 16: row l's dword is dword 4 l of the 64 at p
  const auto dwords = [&](int quarter) {
    return _mm512_maskz_loadu_epi32(static_cast<__mmask16>(row_dwords(4 * quarter, 4)), p + 64 * quarter);
  };
  const __m512i index = _mm512_and_si512(_mm512_slli_epi32(lane, 2), _mm512_set1_epi32(31));
  const __m512i lo = _mm512_permutex2var_epi32(dwords(0), index, dwords(1));
  const __m512i hi = _mm512_permutex2var_epi32(dwords(2), index, dwords(3));
  return _mm512_mask_blend_epi32(static_cast<__mmask16>(0xFF00), lo, hi);
}

// W in PackedW's layout, output blocks [blk0, blk1): block blk's group j at wp + (blk groups + j)
// 64 (zero past the run's quads and past the outputs). Quad by quad, so that each reads its rows
// in order; each quad's rows come from a factor block of its own, in no order the prefetchers
// follow, so the quad kAhead on is fetched.
// Quad q's factor rows [row, row + rows) towards L1.
void prefetch_rows(const Quad& q, std::int64_t r, std::int64_t row, std::int64_t rows) {
  for (const std::int8_t* p : q.p)
    if (p != nullptr)
      for (std::int64_t e = 0; e < rows * r; e += 64) _mm_prefetch(reinterpret_cast<const char*>(p + row * r + e), _MM_HINT_T0);
}

void amx_pack_w(const AmxRun& run, std::int64_t blk0, std::int64_t blk1, std::int8_t* wp) {
  constexpr std::int64_t kAhead = 4;
  const std::int64_t groups = run.groups(), quads = static_cast<std::int64_t>(run.at.size());
  const std::int64_t first = run.w_off() + 16 * blk0, rows = std::min(16 * (blk1 - blk0), run.w_outputs() - 16 * blk0);
  for (std::int64_t j = 0; j < groups; ++j) {
    if (j + kAhead < quads) prefetch_rows(run.at[j + kAhead], run.r, first, rows);
    for (std::int64_t blk = blk0; blk < blk1; ++blk) {
      const __m512i v = j < quads ? rows_of_group(run.at[j], run.r, run.w_off() + 16 * blk, run.w_outputs() - 16 * blk)
                                  : _mm512_setzero_si512();
      _mm512_storeu_si512(wp + (blk * groups + j) * 64, v);
    }
  }
}

// x's rows [x0, x0 + rows) (rows a multiple of 16, zero past x_rows and past the run's quads): 16
// quads x 16 rows loaded by quad and transposed.
void amx_pack_x(const AmxRun& run, std::int64_t x0, std::int64_t rows, std::int8_t* xa) {
  const std::int64_t groups = run.groups(), quads = static_cast<std::int64_t>(run.at.size()), stride = groups * 4;
  for (std::int64_t i = 0; i < rows; i += 16) {
    const std::int64_t count = std::min<std::int64_t>(16, run.x_rows() - x0 - i);
    const std::int64_t row = run.x_off() + x0 + i;
    for (std::int64_t j0 = 0; j0 < groups; j0 += 16) {
      for (std::int64_t j = j0 + 16; j < std::min(quads, j0 + 32); ++j) prefetch_rows(run.at[j], run.r, row, 16);  // the next 16 quads'
      __m512 t[16];
      for (int j = 0; j < 16; ++j)
        t[j] = j0 + j < quads ? _mm512_castsi512_ps(rows_of_group(run.at[j0 + j], run.r, row, count))
                              : _mm512_setzero_ps();
      avx512::transpose16(t);
      for (int l = 0; l < 16; ++l) _mm512_storeu_ps(xa + (i + l) * stride + j0 * 4, t[l]);
    }
  }
}

// z += sign times the block's sums: acc's rows are x rows [x0, x0 + rows), its columns W's
// outputs [o0, o1). Transposed, 16 x 16 at a time through a transpose.
void amx_add_to_z(const AmxRun& run, const std::int32_t* acc, std::int64_t acc_stride, std::int64_t x0,
                  std::int64_t rows, std::int64_t o0, std::int64_t o1, std::int64_t* z) {
  if (!run.transposed()) {
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t b = o0; b < o1; b += 16)
        avx512::add16_to_z(z + (x0 + i) * run.n + b, o1 - b, _mm512_loadu_si512(acc + i * acc_stride + b), run.sign);
    return;
  }
  for (std::int64_t i = 0; i < rows; i += 16) {
    const std::int64_t count = std::min<std::int64_t>(16, rows - i);  // z's columns x0 + i ..
    for (std::int64_t a = o0; a < o1; a += 16) {
      __m512 t[16];
      for (int l = 0; l < 16; ++l)
        t[l] = l < count ? _mm512_loadu_ps(reinterpret_cast<const float*>(acc + (i + l) * acc_stride + a))
                         : _mm512_setzero_ps();
      avx512::transpose16(t);  // t[e] lane l: x row i + l, output a + e
      for (std::int64_t e = 0; e < std::min<std::int64_t>(16, o1 - a); ++e)
        avx512::add16_to_z(z + (a + e) * run.n + x0 + i, count, _mm512_castps_si512(t[e]), run.sign);
    }
  }
}

// One run: W packed by all threads, then each thread's blocks of x rows (x packed, the tiles, z):
// the row blocks split over the threads, or where there are fewer than threads, the outputs (in
// pairs of blocks, as the tiles take them), each thread packing the rows' x for itself.
void amx_run(const AmxRun& run, std::int64_t* z) {
  const std::int64_t groups = run.groups(), n_blocks = (run.w_outputs() + 15) / 16, acc_stride = n_blocks * 16;
  UnsetVector<std::int8_t>& wp = kept_buffer<std::int8_t, 2>();  // shared by the team
  ensure_size(wp, n_blocks * groups * 64 + 1024);
  std::fill(wp.data() + n_blocks * groups * 64, wp.data() + n_blocks * groups * 64 + 1024, std::int8_t{0});
  const std::int64_t row_blocks = (run.x_rows() + kAmxRows - 1) / kAmxRows;
  cpu_parallel::team(run.m * run.n * groups * 4 > kParallelMinWork, [&](std::int64_t t, std::int64_t nt) {
    const auto [c0, c1] = cpu_parallel::share(n_blocks, t, nt);
    if (c0 < c1) amx_pack_w(run, c0, c1, wp.data());
    cpu_parallel::barrier(nt);  // all of W packed before any tile
    const AmxTiles tiles;
    UnsetVector<std::int8_t>& xa = kept_buffer<std::int8_t, 3>();
    UnsetVector<std::int32_t>& acc = kept_buffer<std::int32_t, 4>();
    ensure_size(xa, kAmxRows * groups * 4);
    ensure_size(acc, kAmxRows * acc_stride);
    const bool by_rows = row_blocks >= nt;
    const auto [rb0, rb1] = by_rows ? cpu_parallel::share(row_blocks, t, nt) : std::pair<std::int64_t, std::int64_t>{0, row_blocks};
    const auto [cp0, cp1] = by_rows ? std::pair<std::int64_t, std::int64_t>{0, (n_blocks + 1) / 2}
                                    : cpu_parallel::share((n_blocks + 1) / 2, t, nt);
    const std::int64_t b_begin = 2 * cp0, b_end = std::min(n_blocks, 2 * cp1);
    for (std::int64_t rb = rb0; rb < rb1 && b_begin < b_end; ++rb) {
      const std::int64_t x0 = rb * kAmxRows, rows = std::min(kAmxRows, run.x_rows() - x0);
      amx_pack_x(run, x0, (rows + 15) / 16 * 16, xa.data());
      amx_accumulate(reinterpret_cast<const std::uint8_t*>(xa.data()), groups * 4, rows, wp.data(), groups, b_begin,
                     b_end, acc.data(), acc_stride, true);
      amx_add_to_z(run, acc.data(), acc_stride, x0, rows, 16 * b_begin, std::min(run.w_outputs(), 16 * b_end), z);
    }
  });
}

}  // namespace

bool update_signs_amx(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                      const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z) {
  if (r != 1 && r != 2 && r != 4 && r != 8 && r != 16) return false;
  for (std::int64_t k = 0; k < n_pairs; ++k)
    if (d[k] < -1 || d[k] > 1) return false;
  if (m <= 0 || n <= 0) return true;
  const int pairs_per_quad = r < 4 ? static_cast<int>(4 / r) : 1;
  for (int sign : {1, -1}) {
    AmxRun run{m, n, r, sign, {}};
    int filled = pairs_per_quad;  // pairs in the last quad
    for (std::int64_t k = 0; k < n_pairs; ++k) {
      if (d[k] != sign || blocks[k] == nullptr) continue;
      for (std::int64_t g = 0; g < r; g += 4) {
        if (filled == pairs_per_quad) {
          if (static_cast<std::int64_t>(run.at.size()) == kAmxRunQuads) amx_run(run, z), run.at.clear();
          run.at.emplace_back(), filled = 0;
        }
        run.at.back().p[filled++] = blocks[k] + g;
      }
    }
    if (!run.at.empty()) amx_run(run, z);
  }
  return true;
}

}  // namespace eggroll::cpu_int8::detail
#endif
