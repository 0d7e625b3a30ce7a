// The cpu int8 kernels at the AVX-512 VNNI level (compiled with -mavx512*; chosen at run time when
// the CPU has avx512f/bw/vl/vnni/vbmi). Results equal the scalar level bit for bit (integer math).
#include "backend/cpu/cpu_parallel.hpp"
#include "backend/int8_ops.hpp"
#include "backend/cpu/avx512_columns.hpp"
#include "backend/cpu/cpu_int8_amx.hpp"
#include "backend/cpu/int8_correction_avx512.hpp"
#include "backend/cpu/int8_padded_rows_avx512.hpp"
#include "backend/cpu/int8_row_epilogue_avx512.hpp"
#include "backend/cpu/line_queue.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

// GCC 12's AVX-512 headers trip false (maybe-)uninitialized warnings on their own _mm512_undefined
// operands (GCC bug 105593); the warning is about header internals, not this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace eggroll::cpu_int8::detail {
namespace {


std::int64_t round_up(std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; }
// Bytes a packed W holds past its last block: an AMX tile reads up to 15 k-groups of 64 bytes past
// a block's last group (amx_accumulate).
constexpr std::int64_t kPackSlack = 1024;
using avx512::byte_mask;
using avx512::load_u32;

// The operands of one qmm call in the layouts the VNNI kernels read.
// The buffers are the calling thread's, kept between calls (grow-only): every value is written
// before it is read, and fresh buffers per call cost a clear and page faults each time.
struct Packed {
  std::int64_t n_groups = 0;    // k in groups of 4: ceil(n / 4)
  std::int64_t x_stride = 0;    // row stride of xu: n rounded up to 64
  std::int64_t m_blocks = 0;    // outputs in blocks of 16: ceil(m / 16)
  UnsetVector<std::uint8_t>& xu;    // (rows, x_stride): x + 128 as u8, zero padded
  UnsetVector<std::int8_t>& wp;     // W as PackedW::wp (int8_ops.hpp), zero padded, unless given one
  UnsetVector<std::int32_t>& bias;  // (16 m_blocks): -128 * sum_k W[a][k], undoing the +128 on x
};

// W (m, n) -> one packed block of 16 outputs and its +128 offset correction. Whole k-groups are
// loaded 16 at a time and transposed (lane l of group g = W[16 blk + l][4 g .. 4 g + 3]); a partial
// last group is copied bytewise.
void pack_w_block(std::int64_t m, std::int64_t n, const std::int8_t* w, std::int64_t n_groups, std::int8_t* wp,
                  std::int32_t* bias, std::int64_t blk) {
  const std::int64_t a0 = blk * 16, valid = std::min<std::int64_t>(16, m - a0), full_groups = n / 4;
  const std::int8_t* base = w + a0 * n;
  const __m512i ones = _mm512_set1_epi8(1);
  std::int8_t* out = wp + blk * n_groups * 64;
  __m512i colsum = _mm512_setzero_si512();
  // 16 groups at a time: 64 bytes of each of the 16 rows, transposed as 16 x 16 dwords, so that
  // vector g holds group g of every row (row l in dword lane l).
  for (std::int64_t grp = 0; grp < full_groups; grp += 16) {
    const std::int64_t count = std::min<std::int64_t>(16, full_groups - grp);
    const __mmask16 dwords = static_cast<__mmask16>(count >= 16 ? 0xFFFF : (1u << count) - 1u);
    __m512 block[16];
    if (a0 + 32 <= m)  // the same bytes of the next block's rows: W comes from memory, not cache
      for (std::int64_t l = 0; l < 16; ++l) _mm_prefetch(reinterpret_cast<const char*>(base + (16 + l) * n + 4 * grp), _MM_HINT_T0);
    for (std::int64_t l = 0; l < 16; ++l)
      block[l] = l < valid ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(dwords, base + l * n + 4 * grp))
                           : _mm512_setzero_ps();
    avx512::transpose16(block);
    for (std::int64_t q = 0; q < count; ++q) {
      const __m512i v = _mm512_castps_si512(block[q]);
      _mm512_storeu_si512(out + (grp + q) * 64, v);
      colsum = _mm512_dpbusd_epi32(colsum, ones, v);
    }
  }
  if (full_groups < n_groups) {  // the last k-group holds n % 4 columns
    std::int8_t* tail = out + full_groups * 64;
    std::memset(tail, 0, 64);
    for (std::int64_t l = 0; l < valid; ++l)
      for (std::int64_t k = 4 * full_groups; k < n; ++k) tail[l * 4 + k % 4] = base[l * n + k];
    colsum = _mm512_dpbusd_epi32(colsum, ones, _mm512_loadu_si512(tail));
  }
  _mm512_storeu_si512(bias + a0, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(colsum, 7)));
}

// xu row (x_stride) = x row (n) + 128 as u8, zero past n.
void convert_x_row(const std::int8_t* x, std::int64_t n, std::int64_t x_stride, std::uint8_t* xu) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (std::int64_t k = 0; k < x_stride; k += 64) {
    const __mmask64 valid = byte_mask(n - k);
    _mm512_storeu_si512(xu + k, _mm512_maskz_mov_epi8(valid, _mm512_xor_si512(_mm512_maskz_loadu_epi8(valid, x + k), flip)));
  }
}

// c (RT, 16 CT) = bias + xu rows . packed W panel^T over all n_groups k-groups, in registers
// (fully unrolled loops over a flat accumulator array starting from the bias: the form GCC 12
// keeps in registers; adding the bias at the store made it spill every accumulator per step).
template <int RT, int CT>
[[gnu::always_inline]] inline void accumulate(__m512i (&c)[RT * CT], const std::uint8_t* xu, std::int64_t x_stride,
                                              const std::int8_t* wp, std::int64_t panel, std::int64_t n_groups,
                                              const std::int32_t* bias) {
#pragma GCC unroll 32
  for (int e = 0; e < RT * CT; ++e) c[e] = _mm512_loadu_si512(bias + (e % CT) * 16);
  for (std::int64_t grp = 0; grp < n_groups; ++grp) {
    const std::int8_t* wg = wp + grp * 64;
    const __m512i w0 = _mm512_loadu_si512(wg);
    const __m512i w1 = CT > 1 ? _mm512_loadu_si512(wg + panel) : w0;
    const __m512i w2 = CT > 2 ? _mm512_loadu_si512(wg + 2 * panel) : w0;
    const __m512i w3 = CT > 3 ? _mm512_loadu_si512(wg + 3 * panel) : w0;
#pragma GCC unroll 8
    for (int i = 0; i < RT; ++i) {
      const __m512i xv = _mm512_set1_epi32(load_u32(xu + i * x_stride + grp * 4));
      c[i * CT] = _mm512_dpbusd_epi32(c[i * CT], xv, w0);
      if constexpr (CT > 1) c[i * CT + 1] = _mm512_dpbusd_epi32(c[i * CT + 1], xv, w1);
      if constexpr (CT > 2) c[i * CT + 2] = _mm512_dpbusd_epi32(c[i * CT + 2], xv, w2);
      if constexpr (CT > 3) c[i * CT + 3] = _mm512_dpbusd_epi32(c[i * CT + 3], xv, w3);
    }
  }
}

// acc (RT, 16 CT) = the accumulation above, stored.
template <int RT, int CT>
void tile_kernel(const std::uint8_t* xu, std::int64_t x_stride, const std::int8_t* wp, std::int64_t panel,
                 std::int64_t n_groups, const std::int32_t* bias, std::int32_t* acc, std::int64_t acc_stride) {
  __m512i c[RT * CT];
  accumulate<RT, CT>(c, xu, x_stride, wp, panel, n_groups, bias);
#pragma GCC unroll 8
  for (int i = 0; i < RT; ++i)
#pragma GCC unroll 4
    for (int t = 0; t < CT; ++t)
      _mm512_storeu_si512(acc + i * acc_stride + t * 16, c[i * CT + t]);
}

using TileFn = void (*)(const std::uint8_t*, std::int64_t, const std::int8_t*, std::int64_t, std::int64_t,
                        const std::int32_t*, std::int32_t*, std::int64_t);

// kernel_for<K>(rt, ct) = K::fn<rt, ct>() for 1 <= rt <= kRowTile, 1 <= ct <= kColBlocks: the
// tile kernels are instantiated per shape and picked at run time for the edge tiles.
template <typename K, int RT>
auto kernel_for_cols(int ct) {
  switch (ct) {
    case 1: return K::template fn<RT, 1>();
    case 2: return K::template fn<RT, 2>();
    case 3: return K::template fn<RT, 3>();
    default: return K::template fn<RT, 4>();
  }
}

template <typename K>
auto kernel_for(int rt, int ct) {
  switch (rt) {
    case 1: return kernel_for_cols<K, 1>(ct);
    case 2: return kernel_for_cols<K, 2>(ct);
    case 3: return kernel_for_cols<K, 3>(ct);
    case 4: return kernel_for_cols<K, 4>(ct);
    case 5: return kernel_for_cols<K, 5>(ct);
    default: return kernel_for_cols<K, 6>(ct);
  }
}

struct PlainTile {
  template <int RT, int CT>
  static TileFn fn() { return tile_kernel<RT, CT>; }
};

// tile_kernel's accumulation, then each perturbed row's correction (Rows::correction, added or
// subtracted by the row's sign) and its bytes stored straight from the registers: the
// accumulators never go to memory. The tile's columns start at output a0; y points at its first
// row and column.
template <class Rows, int RT, int CT>
[[gnu::always_inline]] inline void finish_fused(__m512i (&c)[RT * CT], const typename Rows::Row* rows,
                                                const typename Rows::Context& context, const ByteWriter& writer,
                                                int shift, std::int64_t a0, std::int8_t* y, std::int64_t y_stride,
                                                std::int64_t cols) {
  const __m512i count = _mm512_set1_epi32(shift);
  const __mmask64 mask = byte_mask(cols);
#pragma GCC unroll 8
  for (int i = 0; i < RT; ++i) {
    __m512i t[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) t[v] = v < CT ? c[i * CT + (v < CT ? v : 0)] : _mm512_setzero_si512();
    if (rows[i].sign != 0) {
#pragma GCC unroll 4
      for (int v = 0; v < CT; ++v) {
        const __m512i corr = Rows::correction(rows[i], context, a0 + 16 * v, cols - 16 * v, count);
        t[v] = rows[i].sign > 0 ? _mm512_add_epi32(t[v], corr) : _mm512_sub_epi32(t[v], corr);
      }
    }
    writer.store64(t, y + i * y_stride, mask);
  }
}

template <class Rows, int RT, int CT>
void tile_kernel_fused(const std::uint8_t* xu, std::int64_t x_stride, const std::int8_t* wp, std::int64_t panel,
                       std::int64_t n_groups, const std::int32_t* bias, const typename Rows::Row* rows,
                       const typename Rows::Context& context, const ByteWriter& writer, int shift, std::int64_t a0,
                       std::int8_t* y, std::int64_t y_stride, std::int64_t cols) {
  __m512i c[RT * CT];
  accumulate<RT, CT>(c, xu, x_stride, wp, panel, n_groups, bias);
  finish_fused<Rows, RT, CT>(c, rows, context, writer, shift, a0, y, y_stride, cols);
}

// The same epilogue from sums already stored (acc, the tile's first row and column, at row stride
// acc_stride) without their bias (the tile's columns' at bias), as the AMX tiles leave them; a null
// bias: sums that need none (signed x).
template <class Rows, int RT, int CT>
void tile_finish_stored(const std::int32_t* acc, std::int64_t acc_stride, const std::int32_t* bias,
                        const typename Rows::Row* rows, const typename Rows::Context& context,
                        const ByteWriter& writer, int shift, std::int64_t a0, std::int8_t* y, std::int64_t y_stride,
                        std::int64_t cols) {
  __m512i c[RT * CT];
#pragma GCC unroll 8
  for (int i = 0; i < RT; ++i)
#pragma GCC unroll 4
    for (int t = 0; t < CT; ++t) c[i * CT + t] = _mm512_loadu_si512(acc + i * acc_stride + t * 16);
  if (bias != nullptr)
#pragma GCC unroll 4
    for (int t = 0; t < CT; ++t) {
      const __m512i b = _mm512_loadu_si512(bias + t * 16);
#pragma GCC unroll 8
      for (int i = 0; i < RT; ++i) c[i * CT + t] = _mm512_add_epi32(c[i * CT + t], b);
    }
  finish_fused<Rows, RT, CT>(c, rows, context, writer, shift, a0, y, y_stride, cols);
}

template <class Rows>
struct FusedTile {
  template <int RT, int CT>
  static auto fn() { return tile_kernel_fused<Rows, RT, CT>; }
};

template <class Rows>
struct StoredTile {
  template <int RT, int CT>
  static auto fn() { return tile_finish_stored<Rows, RT, CT>; }
};

// The rows [i0, i1) of x (rows, n) for AMX tiles on x's own bytes: in place, unless the block's last
// 16-row tile would read past x's last row; then a copy (this thread's buffer) with 15 zero rows after.
const std::uint8_t* raw_block(const std::int8_t* x, std::int64_t n, std::int64_t rows, std::int64_t i0,
                              std::int64_t i1) {
  const auto* in_place = reinterpret_cast<const std::uint8_t*>(x + i0 * n);
  if (i0 + round_up(i1 - i0, 16) <= rows) return in_place;
  UnsetVector<std::uint8_t>& copy = kept_buffer<std::uint8_t, 1>();
  ensure_size(copy, (i1 - i0 + 15) * n);
  std::memcpy(copy.data(), in_place, static_cast<std::size_t>((i1 - i0) * n));
  std::memset(copy.data() + (i1 - i0) * n, 0, static_cast<std::size_t>(15 * n));
  return copy.data();
}

// The most bytes of padded factor copies (below) a qmm call makes at once.
constexpr std::int64_t kPaddedBytes = std::int64_t{4} << 20;

// The power of two that ranks 3, 5, 6, 7 and 9 .. 15 run as with several rows per member (below);
// the rank itself otherwise.
std::int64_t padded_rank(std::int64_t r, std::int64_t rows_per_member) {
  return rows_per_member == 1 ? r : next_power_of_two_rank(r);
}

// f's factor blocks with p - f.rank zero columns after each row of B and of A, into this thread's
// kept buffer <int8_t, 4> (one copy per distinct block: an antithetic pair shares one), pointed to
// by blocks; the padded factors otherwise as f (the same signs and shift).
QFactors padded_factors(const QFactors& f, std::int64_t members, std::int64_t p,
                        std::vector<const std::int8_t*>& blocks) {
  const std::int64_t r = f.rank, rows = f.n + f.m;
  blocks.assign(static_cast<std::size_t>(members), nullptr);
  std::int64_t distinct = 0;
  for (std::int64_t j = 0; j < members; ++j)
    if (f.blocks[j] != nullptr && (j == 0 || f.blocks[j] != f.blocks[j - 1])) ++distinct;
  UnsetVector<std::int8_t>& store = kept_buffer<std::int8_t, 4>();
  ensure_size(store, distinct * rows * p);
  std::int8_t* next = store.data();
  const BytePad pad(r, p);
  for (std::int64_t j = 0; j < members; ++j) {
    if (f.blocks[j] == nullptr) continue;
    if (j > 0 && f.blocks[j] == f.blocks[j - 1]) {
      blocks[static_cast<std::size_t>(j)] = blocks[static_cast<std::size_t>(j - 1)];
      continue;
    }
    pad(f.blocks[j], rows, next);
    blocks[static_cast<std::size_t>(j)] = next;
    next += rows * p;
  }
  QFactors out = f;
  out.rank = p;
  out.blocks = blocks.data();
  return out;
}

// qmm_avx512_vnni with the factors padded to rank p (padded_factors), in calls of at most
// kPaddedBytes of copies (whole pairs), in member order. The sums are the same integers and the
// shift stays the rank's own, so every output is the same; the copies cost (n + m) p bytes per
// pair, spread over the rows of two members.
void qmm_padded(const QmmArgs& g, bool amx, std::int64_t p) {
  const std::int64_t rpm = g.batch.rows_per_member, members = g.batch.n_members;
  const std::int64_t chunk = std::max<std::int64_t>(2, kPaddedBytes / ((g.n + g.m) * p) / 2 * 2);
  std::vector<const std::int8_t*> blocks;
  for (std::int64_t j0 = 0; j0 < members; j0 += chunk) {
    const std::int64_t count = std::min(chunk, members - j0);
    QFactors part = *g.f;
    part.blocks += j0;
    part.sign += j0;
    const QFactors padded = padded_factors(part, count, p, blocks);
    QmmArgs sub = g;
    sub.batch = {count, rpm};
    sub.x += j0 * rpm * g.n;
    sub.y += j0 * rpm * g.m;
    if (sub.add.rows != nullptr) sub.add.rows += j0 * rpm * g.m;
    if (sub.add.vec != nullptr) sub.add.vec += j0 * sub.add.vec_stride;
    sub.f = &padded;
    qmm_avx512_vnni(sub, amx);
  }
}

}  // namespace

// rows are split evenly over the threads in whole tiles; each thread runs row blocks of its range.
// With amx, AMX tiles compute each block's accumulators into acc and the epilogues read them there.
// With amx and n a multiple of 64 (raw), the tiles read x's own rows, signed (tdpbssd: no +128, so
// no bias), and the epilogues' x . B flips their bytes as it loads them (x_flip): no converted copy
// of x, and with W packed beforehand no wait for the other threads.
void qmm_avx512_vnni(const QmmArgs& g, bool amx) {
  // Ranks 3, 5, 6, 7 and 9 .. 15 with several rows per member run as the next power of two, with
  // zero columns: their rows then take the int16 pairs in the tile's registers (ranks 2, 4, 8 and
  // 16) instead of the row epilogue.
  if (g.f != nullptr && g.f->blocks != nullptr && g.f->sign != nullptr) {
    const std::int64_t padded = padded_rank(g.f->rank, g.batch.rows_per_member);
    if (padded != g.f->rank) return qmm_padded(g, amx, padded);
  }
  const std::int64_t rows = g.batch.rows();
  Packed p{(g.n + 3) / 4, round_up(g.n, 64), (g.m + 15) / 16, kept_buffer<std::uint8_t, 0>(),
           kept_buffer<std::int8_t, 1>(), kept_buffer<std::int32_t, 2>()};
  const bool raw = amx && g.n % 64 == 0;
  if (!raw) {
    // AMX reads whole 16-row tiles: up to 15 rows past the last, zeroed (their sums are never used)
    ensure_size(p.xu, (rows + (amx ? 15 : 0)) * p.x_stride);
    if (amx) std::memset(p.xu.data() + rows * p.x_stride, 0, static_cast<std::size_t>(15 * p.x_stride));
  }
  const bool prepacked = g.packed != nullptr;  // W packed once by qpack for many calls
  if (!prepacked) {
    ensure_size(p.wp, p.m_blocks * p.n_groups * 64 + kPackSlack);
    ensure_size(p.bias, p.m_blocks * 16);
  }
  const std::int8_t* wp = prepacked ? g.packed->wp.data() : p.wp.data();
  const std::int32_t* bias = prepacked ? g.packed->bias.data() : p.bias.data();

  const std::int64_t m64 = round_up(g.m, 64), n_tiles = (rows + kRowTile - 1) / kRowTile;
  cpu_parallel::team(rows * g.m * g.n > kParallelMinWork, [&](std::int64_t t, std::int64_t n_threads) {
    if (!prepacked) {
      const auto [b0, b1] = cpu_parallel::share(p.m_blocks, t, n_threads);
      for (std::int64_t blk = b0; blk < b1; ++blk) pack_w_block(g.m, g.n, g.w, p.n_groups, p.wp.data(), p.bias.data(), blk);
    }
    if (!raw) {  // x + 128 for the tiles and x . B (raw reads x itself)
      const auto [r0, r1] = cpu_parallel::share(rows, t, n_threads);
      for (std::int64_t i = r0; i < r1; ++i) {
        if (i + 8 < rows)  // the rows come from memory, not cache: fetch a few ahead
          for (std::int64_t k = 0; k < g.n; k += 64) _mm_prefetch(reinterpret_cast<const char*>(g.x + (i + 8) * g.n + k), _MM_HINT_T1);
        convert_x_row(g.x + i * g.n, g.n, p.x_stride, p.xu.data() + i * p.x_stride);
      }
    }
    if (!raw || !prepacked) cpu_parallel::barrier(n_threads);  // every row converted and W packed before any tile
    const std::int64_t begin = std::min(rows, n_tiles * t / n_threads * kRowTile);
    const std::int64_t end = std::min(rows, n_tiles * (t + 1) / n_threads * kRowTile);
    RowEpilogue epi(g, m64, amx && !raw ? bias : nullptr, raw);  // AMX leaves the sums without their bias
    UnsetVector<std::int32_t>& acc = kept_buffer<std::int32_t, 3>();  // this team thread's own
    ensure_size(acc, kRowBlock * m64);
    std::optional<AmxTiles> tiles;
    if (amx) tiles.emplace();
    FusedRow fused[kRowBlock];
    PairRow fused_pair[kRowBlock];
    cpu::LineQueue ahead;
    queue_block(g, begin, std::min(end, begin + kRowBlock), ahead);
    ahead.pump(-1);
    const std::int64_t tiles_per_block = (kRowBlock / kRowTile) * ((p.m_blocks + kColBlocks - 1) / kColBlocks);
    for (std::int64_t i0 = begin; i0 < end; i0 += kRowBlock) {
      const std::int64_t i1 = std::min(end, i0 + kRowBlock);
      queue_block(g, i1, std::min(end, i1 + kRowBlock), ahead);
      const std::int64_t per_tile = (ahead.lines_left() + tiles_per_block - 1) / tiles_per_block;
      // the block's rows of x as the tiles and the epilogues read them (x_stride apart)
      const std::uint8_t* xb = raw ? raw_block(g.x, g.n, rows, i0, i1) : p.xu.data() + i0 * p.x_stride;
      // AMX: the block's accumulators of output blocks [b0, b1), into acc
      const auto amx_blocks = [&](std::int64_t b0, std::int64_t b1) {
        amx_accumulate(xb, p.x_stride, i1 - i0, wp, p.n_groups, b0, b1, acc.data(), m64, raw);
      };
      // The block's tiles with the epilogue in registers (Rows: the fused rows' kind). With AMX, each
      // panel's accumulators are summed a panel before its epilogues, so they are read back from L1.
      const auto fused_tiles = [&](auto kind, const auto* rows, const auto& context) {
        using Rows = typename decltype(kind)::type;
        // AMX: one panel ahead, so that the epilogues read sums stored a panel earlier, not ones
        // whose stores are still in flight (each panel's columns of acc are its own)
        if (amx) amx_blocks(0, std::min<std::int64_t>(kColBlocks, p.m_blocks));
        for (std::int64_t b0 = 0; b0 < p.m_blocks; b0 += kColBlocks) {
          const int ct = static_cast<int>(std::min<std::int64_t>(kColBlocks, p.m_blocks - b0));
          if (amx && b0 + kColBlocks < p.m_blocks)
            amx_blocks(b0 + kColBlocks, std::min<std::int64_t>(b0 + 2 * kColBlocks, p.m_blocks));
          for (std::int64_t i = i0; i < i1; i += kRowTile) {
            ahead.pump(per_tile);
            const int rt = static_cast<int>(std::min<std::int64_t>(kRowTile, i1 - i));
            if (amx)
              kernel_for<StoredTile<Rows>>(rt, ct)(acc.data() + (i - i0) * m64 + b0 * 16, m64,
                                                   raw ? nullptr : bias + b0 * 16,
                                                   rows + (i - i0), context,
                                                   epi.writer(), g.f->shift, b0 * 16, g.y + i * g.m + b0 * 16, g.m,
                                                   g.m - b0 * 16);
            else
              kernel_for<FusedTile<Rows>>(rt, ct)(xb + (i - i0) * p.x_stride, p.x_stride, wp + b0 * p.n_groups * 64,
                                                  p.n_groups * 64, p.n_groups, bias + b0 * 16, rows + (i - i0), context,
                                                  epi.writer(), g.f->shift, b0 * 16, g.y + i * g.m + b0 * 16, g.m,
                                                  g.m - b0 * 16);
          }
        }
        return true;
      };
      const bool fused_block =
          epi.fused_rows(i0, i1, xb, p.x_stride, fused)
              ? (epi.fused_short() ? fused_tiles(std::type_identity<Rank1RowsShort>{}, fused, Rank1RowsShort::Context{})
                                   : fused_tiles(std::type_identity<Rank1Rows>{}, fused, Rank1Rows::Context{}))
              : with_fused_rank(g.f->rank, [&](auto rank) {
                  constexpr int R = decltype(rank)::value;
                  const RowEpilogue::Fused kind = epi.block_xb<R>(i0, i1, xb, p.x_stride);
                  if (kind == RowEpilogue::Fused::no) return false;
                  epi.fused_pair_rows<R>(i0, i1, kind == RowEpilogue::Fused::wide, fused_pair);
                  return kind == RowEpilogue::Fused::wide
                             ? fused_tiles(std::type_identity<PairRows<R, true>>{}, fused_pair, typename PairRows<R, true>::Context{})
                             : fused_tiles(std::type_identity<PairRows<R, false>>{}, fused_pair, typename PairRows<R, false>::Context{});
                });
      if (fused_block) {
        ahead.pump(-1);
        add_addend(g, i0, i1);
        continue;
      }
      if (amx)
        amx_blocks(0, p.m_blocks);
      else
        for (std::int64_t b0 = 0; b0 < p.m_blocks; b0 += kColBlocks) {
          const int ct = static_cast<int>(std::min<std::int64_t>(kColBlocks, p.m_blocks - b0));
          for (std::int64_t i = i0; i < i1; i += kRowTile) {
            ahead.pump(per_tile);
            const int rt = static_cast<int>(std::min<std::int64_t>(kRowTile, i1 - i));
            kernel_for<PlainTile>(rt, ct)(xb + (i - i0) * p.x_stride, p.x_stride, wp + b0 * p.n_groups * 64,
                                          p.n_groups * 64, p.n_groups, bias + b0 * 16,
                                          acc.data() + (i - i0) * m64 + b0 * 16, m64);
          }
        }
      ahead.pump(-1);
      for (std::int64_t i = i0; i < i1; ++i) epi.row(i, acc.data() + (i - i0) * m64, xb + (i - i0) * p.x_stride, p.x_stride);
      add_addend(g, i0, i1);
    }
  });
}

void floor_clip_avx512(std::int64_t d, const std::int32_t* t, std::int64_t count, std::int8_t* y) {
  const ByteWriter writer{FloorClip(d)};
  for (std::int64_t i = 0; i < count; i += 64) {
    __m512i v[4];
    for (int q = 0; q < 4; ++q)
      v[q] = _mm512_maskz_loadu_epi32(avx512::first_lanes(count - i - 16 * q), t + i + 16 * q);
    writer.store64(v, y + i, byte_mask(count - i));
  }
}

std::shared_ptr<const PackedW> pack_avx512_vnni(std::int64_t m, std::int64_t n, const std::int8_t* w) {
  auto out = std::make_shared<PackedW>();
  const std::int64_t n_groups = (n + 3) / 4, m_blocks = (m + 15) / 16;
  out->m = m;
  out->n = n;
  out->wp.resize(static_cast<std::size_t>(m_blocks * n_groups * 64 + kPackSlack));
  std::memset(out->wp.data() + m_blocks * n_groups * 64, 0, kPackSlack);
  out->bias.resize(static_cast<std::size_t>(m_blocks * 16));
  for (std::int64_t blk = 0; blk < m_blocks; ++blk) pack_w_block(m, n, w, n_groups, out->wp.data(), out->bias.data(), blk);
  return out;
}

}  // namespace eggroll::cpu_int8::detail
#endif
