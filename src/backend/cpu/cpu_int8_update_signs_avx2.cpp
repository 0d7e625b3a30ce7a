// The discrete update's sum (ALGORITHM.md 2.6), z[a][b] += sum_k d_k sum_c A_k[a][c] B_k[b][c], at
// the AVX2 level (compiled with -mavx2) when every d is -1, 0 or 1 (the signs the integer strategy
// passes), the rank 1 or a multiple of 4 and every factor value within [-63, 63] (the int8 noise's
// values lie within +-61, ALGORITHM.md 2.2).
// Eight terms per int32 lane and step, two quads of four, with vpmaddubsw, which multiplies 32 byte
// pairs per instruction and runs twice as often a cycle as vpmaddwd on a Zen 3: B + 63 (0 .. 126)
// is the u8 operand, A the s8 one, so a product pair is at most 2 * 126 * 63 = 15876 in magnitude,
// the instruction's int16 saturation never happens and the two quads' pairs add exactly in int16
// (at most 31752); one vpmaddwd against ones then sums a lane's pairs into int32. The terms of
// d = -1 take 63 - B (also 0 .. 126) as their u8 operand, so their lanes sum -A B + 63 A: both
// signs go into the same accumulators, and the + 63 comes back out as 63 times a row's sum of A
// over the terms of both signs.
// Exact: int32 within a chunk of quads, int64 in z, so the result equals the scalar level's bit
// for bit whatever the threads.
#include "backend/int8_ops.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "backend/cpu/avx2_columns.hpp"

namespace eggroll::cpu_int8::detail {
namespace {

using avx2::load_u32;

constexpr int kRows = 4;                     // z rows per tile: 4 x 2 accumulators
constexpr std::int64_t kCols = 16;           // z columns per tile
constexpr std::int64_t kChunkQuads = 16384;  // even; a lane's quad sum is at most 4 * 126 * 63 < 2^15: < 2^29 a chunk
constexpr int kMaxByte = 63;                 // |A|, |B| <= 63 keep the int16 sums of two quads' pairs exact

// One sign's terms: quad q is columns 4 g .. 4 g + 3 of pair pairs[q / (r / 4)], g = q % (r / 4), at
// ranks that are multiples of 4; at rank 1, pairs 4 q .. 4 q + 3 (a missing last one's term zero).
// The quads are stored in an even number of slots, the last one zero when n_quads is odd.
struct SignQuads {
  int sign = 0;
  std::vector<const std::int8_t*> pairs;   // the factor blocks of the pairs with d = sign, in order
  std::int64_t n_quads = 0, n_slots = 0, n_chunks = 0;
  std::unique_ptr<std::uint8_t[]> bq;      // (n_pad / 16, n_slots, 16, 4): B + 63 (d = +1) or 63 - B (d = -1)
  std::unique_ptr<std::int8_t[]> coef;     // (m, 4 n_slots): A
  std::unique_ptr<std::int32_t[]> rowsum;  // (m, n_chunks): 63 times a row's sum of coef over a chunk
};

struct Shape {
  std::int64_t m = 0, n = 0, r = 0, n_pad = 0;
  // Quad q's first byte of factor row j (B rows j < n, then A rows n + a), at a rank r = 4 g.
  const std::int8_t* at(const SignQuads& s, std::int64_t q, std::int64_t j) const {
    return s.pairs[static_cast<std::size_t>(q / (r / 4))] + j * r + 4 * (q % (r / 4));
  }
  // Term e of quad q at factor row j, at any rank (0 for a missing term).
  std::int8_t byte(const SignQuads& s, std::int64_t q, int e, std::int64_t j) const {
    if (r != 1) return at(s, q, j)[e];
    const std::size_t p = static_cast<std::size_t>(4 * q + e);
    return p < s.pairs.size() ? s.pairs[p][j] : std::int8_t{0};
  }
  // Rank 1: whether all four of quad q's pairs exist (the last quad may be short).
  bool whole(const SignQuads& s, std::int64_t q) const { return 4 * q + 4 <= static_cast<std::int64_t>(s.pairs.size()); }
};

// The largest of a vector's 32 unsigned bytes.
int largest_byte(__m256i v) {
  alignas(32) std::uint8_t lanes[32];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  return *std::max_element(lanes, lanes + 32);
}

// Rank 1: the four pairs' bytes of rows j .. j + 7 (or + 15), interleaved into one dword a row by
// two rounds of unpacks (rows 0-3, 4-7, 8-11, 12-15 in the four results).
inline void interleave4(const SignQuads& s, std::int64_t q, std::int64_t j, bool sixteen, __m128i (&d)[4]) {
  __m128i x[4];
  for (int e = 0; e < 4; ++e) {
    const std::int8_t* p = s.pairs[static_cast<std::size_t>(4 * q + e)] + j;
    x[e] = sixteen ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)) : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  }
  const __m128i lo01 = _mm_unpacklo_epi8(x[0], x[1]), hi01 = _mm_unpackhi_epi8(x[0], x[1]);
  const __m128i lo23 = _mm_unpacklo_epi8(x[2], x[3]), hi23 = _mm_unpackhi_epi8(x[2], x[3]);
  d[0] = _mm_unpacklo_epi16(lo01, lo23);
  d[1] = _mm_unpackhi_epi16(lo01, lo23);
  d[2] = _mm_unpacklo_epi16(hi01, hi23);
  d[3] = _mm_unpackhi_epi16(hi01, hi23);
}

// Slot q's bytes of B, as B + 63 (d = +1) or 63 - B (d = -1), into its place in each column block
// (zero for the slot past the last quad, and for the columns past n): at rank 4 a block's 16 rows
// are 64 contiguous bytes of the pair's B. False when a value of B is outside [-63, 63].
bool pack_b(const Shape& sh, SignQuads& s, std::int64_t q) {
  const __m256i offset = _mm256_set1_epi8(kMaxByte);
  __m256i widest = _mm256_setzero_si256();  // the largest |B| met, per byte (unsigned: |-128| = 128)
  int largest = 0;
  for (std::int64_t b0 = 0; b0 < sh.n_pad; b0 += kCols) {
    std::uint8_t* out = s.bq.get() + ((b0 / kCols) * s.n_slots + q) * kCols * 4;
    if (q >= s.n_quads) {
      std::fill(out, out + kCols * 4, std::uint8_t{0});
      continue;
    }
    __m256i v[2];
    bool vector = false;
    if (sh.r == 4 && b0 + kCols <= sh.n) {
      const std::int8_t* in = sh.at(s, q, b0);
      for (int h = 0; h < 2; ++h) v[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in) + h);
      vector = true;
    } else if (sh.r == 1 && sh.whole(s, q) && b0 + kCols <= sh.n) {
      __m128i d[4];
      interleave4(s, q, b0, true, d);
      v[0] = _mm256_set_m128i(d[1], d[0]);
      v[1] = _mm256_set_m128i(d[3], d[2]);
      vector = true;
    }
    if (vector) {
      for (int h = 0; h < 2; ++h) {
        widest = _mm256_max_epu8(widest, _mm256_abs_epi8(v[h]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out) + h,
                            s.sign > 0 ? _mm256_add_epi8(v[h], offset) : _mm256_sub_epi8(offset, v[h]));
      }
      continue;
    }
    for (std::int64_t b = 0; b < kCols; ++b)
      for (int e = 0; e < 4; ++e) {
        const int x = b0 + b < sh.n ? sh.byte(s, q, e, b0 + b) : -s.sign * kMaxByte;  // zero past n
        largest = std::max(largest, x < 0 ? -x : x);
        out[4 * b + e] = static_cast<std::uint8_t>(s.sign > 0 ? x + kMaxByte : kMaxByte - x);
      }
  }
  return std::max(largest, largest_byte(widest)) <= kMaxByte;
}

// Rows [a0, a1) of coef and rowsum; false when a value of A is outside [-63, 63]. At ranks 4 and 1,
// 8 rows x 8 quads at a time: each quad's 8 rows as 8 dwords (at rank 4 32 contiguous bytes, at
// rank 1 the four pairs' bytes interleaved), an 8 x 8 transpose of dwords (avx2::transpose8) makes
// them the rows' 32 bytes. The rest byte by byte.
bool pack_coef(const Shape& sh, SignQuads& s, std::int64_t a0, std::int64_t a1) {
  const std::int64_t width = 4 * s.n_slots;
  const std::int64_t whole = sh.r == 1 ? static_cast<std::int64_t>(s.pairs.size()) / 4 : s.n_quads;
  const std::int64_t grouped = sh.r == 4 || sh.r == 1 ? whole / 8 * 8 : 0;
  __m256i widest = _mm256_setzero_si256();  // the largest |A| met, per byte (unsigned: |-128| = 128)
  std::int64_t a = a0;
  for (; grouped > 0 && a + 8 <= a1; a += 8)
    for (std::int64_t q0 = 0; q0 < grouped; q0 += 8) {
      __m256i v[8];
      for (int q = 0; q < 8; ++q) {
        if (sh.r == 4) {
          v[q] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sh.at(s, q0 + q, sh.n + a)));
        } else {
          __m128i d[4];
          interleave4(s, q0 + q, sh.n + a, false, d);
          v[q] = _mm256_set_m128i(d[1], d[0]);
        }
        widest = _mm256_max_epu8(widest, _mm256_abs_epi8(v[q]));
      }
      __m256 rows[8];  // the 8 x 8 dword transpose (as floats: shuffles move the bits as they are)
      for (int q = 0; q < 8; ++q) rows[q] = _mm256_castsi256_ps(v[q]);
      avx2::transpose8(rows);  // rows[i]: row a + i's 8 quads
      for (int i = 0; i < 8; ++i)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(s.coef.get() + (a + i) * width + 4 * q0), _mm256_castps_si256(rows[i]));
    }
  int largest = largest_byte(widest);
  for (std::int64_t row = a0; row < a1; ++row)
    for (std::int64_t q = row < a ? grouped : 0; q < s.n_slots; ++q)
      for (int e = 0; e < 4; ++e) {
        const std::int8_t v = q < s.n_quads ? sh.byte(s, q, e, sh.n + row) : std::int8_t{0};
        s.coef[static_cast<std::size_t>(row * width + 4 * q + e)] = v;
        largest = std::max(largest, v < 0 ? -int{v} : int{v});
      }
  if (largest > kMaxByte) return false;
  for (std::int64_t row = a0; row < a1; ++row)
    for (std::int64_t ch = 0; ch < s.n_chunks; ++ch) {
      const std::int8_t* c = s.coef.get() + row * width + 4 * ch * kChunkQuads;
      const std::int64_t count = 4 * (std::min(s.n_quads, (ch + 1) * kChunkQuads) - ch * kChunkQuads);
      std::int32_t sum = 0;  // at most 4 * 63 * 16384 < 2^22 in magnitude
      for (std::int64_t e = 0; e < count; ++e) sum += c[e];
      s.rowsum[static_cast<std::size_t>(row * s.n_chunks + ch)] = kMaxByte * sum;
    }
  return true;
}

// z rows [a0, a0 + AT) x columns [b0, b0 + 16) += both signs' quads, chunk ch of each at a time
// (at most 2^30 in int32): int32 in registers (two slots a step: each slot's A broadcast,
// vpmaddubsw against its B + 63 or 63 - B, the two added in int16, vpmaddwd against ones), less
// the rows' 63 sum A, then into the int64 z (columns past n skipped).
template <int AT>
void tile(const Shape& sh, const std::vector<SignQuads>& signs, std::int64_t a0, std::int64_t b0, std::int64_t* z) {
  const __m256i ones = _mm256_set1_epi16(1);
  const std::int64_t cols = std::min<std::int64_t>(kCols, sh.n - b0);
  std::int64_t n_chunks = 0;
  for (const SignQuads& s : signs) n_chunks = std::max(n_chunks, s.n_chunks);
  for (std::int64_t ch = 0; ch < n_chunks; ++ch) {
    __m256i c[AT * 2];
#pragma GCC unroll 8
    for (int e = 0; e < AT * 2; ++e) c[e] = _mm256_setzero_si256();
    std::int64_t bias[AT] = {};
    for (const SignQuads& s : signs) {
      if (ch >= s.n_chunks) continue;
      const std::int64_t width = 4 * s.n_slots;
      const std::int64_t q0 = ch * kChunkQuads, q1 = std::min(s.n_slots, q0 + kChunkQuads);
      for (int i = 0; i < AT; ++i) bias[i] += s.rowsum[static_cast<std::size_t>((a0 + i) * s.n_chunks + ch)];
      const std::uint8_t* bq = s.bq.get() + ((b0 / kCols) * s.n_slots + q0) * kCols * 4;
      const std::int8_t* cf = s.coef.get() + a0 * width + 4 * q0;
      for (std::int64_t q = q0; q < q1; q += 2, bq += kCols * 8, cf += 8) {
        const __m256i* w = reinterpret_cast<const __m256i*>(bq);
        const __m256i w0 = _mm256_loadu_si256(w), w1 = _mm256_loadu_si256(w + 1);
        const __m256i w2 = _mm256_loadu_si256(w + 2), w3 = _mm256_loadu_si256(w + 3);
#pragma GCC unroll 8
        for (int i = 0; i < AT; ++i) {
          const __m256i a = _mm256_set1_epi32(load_u32(cf + i * width));
          const __m256i a2 = _mm256_set1_epi32(load_u32(cf + i * width + 4));
          const __m256i lo = _mm256_add_epi16(_mm256_maddubs_epi16(w0, a), _mm256_maddubs_epi16(w2, a2));
          const __m256i hi = _mm256_add_epi16(_mm256_maddubs_epi16(w1, a), _mm256_maddubs_epi16(w3, a2));
          c[2 * i] = _mm256_add_epi32(c[2 * i], _mm256_madd_epi16(lo, ones));
          c[2 * i + 1] = _mm256_add_epi32(c[2 * i + 1], _mm256_madd_epi16(hi, ones));
        }
      }
    }
    alignas(32) std::int32_t part[AT][kCols];
#pragma GCC unroll 8
    for (int i = 0; i < AT; ++i) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(part[i]), c[2 * i]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(part[i] + 8), c[2 * i + 1]);
    }
    for (int i = 0; i < AT; ++i) {
      std::int64_t* zr = z + (a0 + i) * sh.n + b0;
      for (std::int64_t b = 0; b < cols; ++b) zr[b] += part[i][b] - bias[i];
    }
  }
}

}  // namespace

bool update_signs_avx2(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                       const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z) {
  if (r != 1 && (r <= 0 || r % 4 != 0)) return false;
  for (std::int64_t k = 0; k < n_pairs; ++k)
    if (d[k] < -1 || d[k] > 1) return false;
  if (m <= 0 || n <= 0) return true;
  const Shape sh{m, n, r, (n + kCols - 1) / kCols * kCols};
  std::vector<SignQuads> signs;
  for (int sign : {1, -1}) {
    SignQuads s;
    s.sign = sign;
    for (std::int64_t k = 0; k < n_pairs; ++k)
      if (d[k] == sign && blocks[k] != nullptr) s.pairs.push_back(blocks[k]);
    if (s.pairs.empty()) continue;
    const std::int64_t n_pairs_s = static_cast<std::int64_t>(s.pairs.size());
    s.n_quads = r == 1 ? (n_pairs_s + 3) / 4 : n_pairs_s * (r / 4);
    s.n_slots = (s.n_quads + 1) / 2 * 2;
    s.n_chunks = (s.n_quads + kChunkQuads - 1) / kChunkQuads;
    s.bq = std::make_unique_for_overwrite<std::uint8_t[]>(static_cast<std::size_t>(s.n_slots * sh.n_pad * 4));
    s.coef = std::make_unique_for_overwrite<std::int8_t[]>(static_cast<std::size_t>(m * 4 * s.n_slots));
    s.rowsum = std::make_unique_for_overwrite<std::int32_t[]>(static_cast<std::size_t>(m * s.n_chunks));
    signs.push_back(std::move(s));
  }
  if (signs.empty()) return true;
  std::int64_t work = 0;
  for (const SignQuads& s : signs) work += s.n_quads * 4 * m * n;
  const bool parallel = work > kParallelMinWork;
  // Every value of A is checked as coef is packed, every value of B as bq is: one outside
  // [-63, 63] leaves z untouched and the int16 term pairs take over.
  std::atomic<bool> fits{true};
  const std::int64_t row_blocks = (m + 7) / 8;
  for (SignQuads& s : signs) {
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int64_t rb = 0; rb < row_blocks; ++rb)  // once a block has failed, the rest are skipped
      if (fits.load(std::memory_order_relaxed) && !pack_coef(sh, s, 8 * rb, std::min(m, 8 * rb + 8))) fits = false;
    if (!fits) return false;
  }
  for (SignQuads& s : signs) {
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int64_t q = 0; q < s.n_slots; ++q)
      if (fits.load(std::memory_order_relaxed) && !pack_b(sh, s, q)) fits = false;
    if (!fits) return false;
  }
  using TileFn = void (*)(const Shape&, const std::vector<SignQuads>&, std::int64_t, std::int64_t, std::int64_t*);
  static const TileFn tiles[kRows] = {tile<1>, tile<2>, tile<3>, tile<4>};
  const std::int64_t n_col_blocks = sh.n_pad / kCols, n_row_blocks = (m + kRows - 1) / kRows;
  // column blocks outermost: a thread's consecutive tiles reread one cached slice of bq
#pragma omp parallel for collapse(2) schedule(static) if (parallel)
  for (std::int64_t cb = 0; cb < n_col_blocks; ++cb)
    for (std::int64_t rb = 0; rb < n_row_blocks; ++rb) {
      const std::int64_t a0 = rb * kRows;
      tiles[std::min<std::int64_t>(kRows, m - a0) - 1](sh, signs, a0, cb * kCols, z);
    }
  return true;
}

}  // namespace eggroll::cpu_int8::detail
#endif
