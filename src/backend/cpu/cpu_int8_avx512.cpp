// The cpu int8 kernels at the AVX-512 VNNI level (compiled with -mavx512*; chosen at run time when
// the CPU has avx512f/bw/vl/vnni/vbmi). Results equal the scalar level bit for bit (integer math).
#include "backend/int8_ops.hpp"
#include "backend/cpu/avx512_columns.hpp"
#include "backend/cpu/int8_correction_avx512.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

// GCC 12's AVX-512 headers trip false (maybe-)uninitialized warnings on their own _mm512_undefined
// operands (GCC bug 105593); the warning is about header internals, not this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace eggroll::cpu_int8::detail {
namespace {

// qmm tiling: a tile is kRowTile rows x kColBlocks * 16 outputs of int32 accumulators in registers;
// rows are processed in blocks of kRowBlock so a block's activations and a W panel stay in cache.
constexpr int kRowTile = 6;
constexpr int kColBlocks = 4;
constexpr std::int64_t kRowBlock = 8 * kRowTile;

std::int64_t round_up(std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; }
using avx512::byte_mask;
using avx512::load_u32;

// The operands of one qmm call in the layouts the VNNI kernels read.
// The buffers are the calling thread's, kept between calls (grow-only): every value is written
// before it is read, and fresh buffers per call cost a clear and page faults each time.
struct Packed {
  std::int64_t n_groups = 0;    // k in groups of 4: ceil(n / 4)
  std::int64_t x_stride = 0;    // row stride of xu: n rounded up to 64
  std::int64_t m_blocks = 0;    // outputs in blocks of 16: ceil(m / 16)
  std::vector<std::uint8_t>& xu;    // (rows, x_stride): x + 128 as u8, zero padded
  std::vector<std::int8_t>& wp;     // W as PackedW::wp (int8_ops.hpp), zero padded, unless given one
  std::vector<std::int32_t>& bias;  // (16 m_blocks): -128 * sum_k W[a][k], undoing the +128 on x
};

template <typename T>
std::vector<T>& thread_scratch(int which) {
  thread_local std::vector<T> buffers[2];
  return buffers[which];
}

// Grows v to at least n values (never shrinks, so a reused buffer is not cleared again).
template <typename T>
void ensure_size(std::vector<T>& v, std::int64_t n) {
  if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
}

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
void tile_kernel_fused(const std::uint8_t* xu, std::int64_t x_stride, const std::int8_t* wp, std::int64_t panel,
                       std::int64_t n_groups, const std::int32_t* bias, const typename Rows::Row* rows,
                       const typename Rows::Context& context, const ByteWriter& writer, int shift, std::int64_t a0,
                       std::int8_t* y, std::int64_t y_stride, std::int64_t cols) {
  __m512i c[RT * CT];
  accumulate<RT, CT>(c, xu, x_stride, wp, panel, n_groups, bias);
  const __m128i count = _mm_cvtsi32_si128(shift);
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

template <class Rows>
struct FusedTile {
  template <int RT, int CT>
  static auto fn() { return tile_kernel_fused<Rows, RT, CT>; }
};

// Per thread: turns a row's int32 accumulators (m64 of them, from acc) into output bytes, adding
// the member's low-rank correction first when the member is perturbed.
class RowEpilogue {
 public:
  RowEpilogue(const QmmArgs& g, std::int64_t m64)
      : g_(g),
        writer_(g.div),
        corr_(static_cast<std::size_t>(m64 + 16)),
        xb64_(static_cast<std::size_t>(g.f->rank)),
        a_sum_stride_(m64 + 16),
        lanes_(g.f->rank) {}

  // Fills rows[i - i0] for rows [i0, i1) when every one of them can finish in the tile's
  // registers (unperturbed, or rank 1 with |x . B| < 2^23 and n <= 65,536); false otherwise.
  bool fused_rows(std::int64_t i0, std::int64_t i1, const std::uint8_t* xu, std::int64_t x_stride, FusedRow* rows) {
    const std::int64_t r = g_.f->rank;
    for (std::int64_t i = i0; i < i1; ++i) {
      const MemberFactors mf = member_factors(*g_.f, i / g_.batch.rows_per_member);
      FusedRow& fr = rows[i - i0];
      fr = FusedRow{};
      if (mf.sign == 0) continue;
      if (r != 1 || g_.n > 65536) return false;
      xb_rank1(xu + (i - i0) * x_stride, x_stride, g_.n, mf.b, &fr.xb);
      if (fr.xb <= -(1 << 23) || fr.xb >= (1 << 23)) return false;
      fr.a = mf.a;
      fr.sign = mf.sign;
    }
    return true;
  }
  // fused_rows for ranks 2, 4, 8 (rank R): true when every row of [i0, i1) is unperturbed or has
  // sum_c |x . B[:, c]| < 2^23 (and n <= 65,536). The block's rows share one split (three bytes
  // if any row needs them), so 2^bias sum_c A[a][c] is made once per factor block met, in slots
  // 1 .. of a_sum_.
  template <int R>
  bool fused_rank_rows(std::int64_t i0, std::int64_t i1, const std::uint8_t* xu, std::int64_t x_stride,
                       FusedRankRow* rows) {
    alignas(16) std::int32_t xb[kRowBlock][8] = {};
    int splits = 2;
    for (std::int64_t i = i0; i < i1; ++i) {
      const MemberFactors mf = member_factors(*g_.f, i / g_.batch.rows_per_member);
      FusedRankRow& fr = rows[i - i0];
      fr = FusedRankRow{};
      if (mf.sign == 0) continue;
      if (g_.n > 65536) return false;
      std::int32_t* xi = xb[i - i0];
      if (g_.batch.rows_per_member > 1)
        xb_transposed(mf.b, xu + (i - i0) * x_stride, x_stride, xi);
      else
        xb_rank_n(xu + (i - i0) * x_stride, g_.n, R, mf.b, xi);
      std::int64_t total = 0;
      for (int c = 0; c < R; ++c) total += xi[c] < 0 ? -std::int64_t{xi[c]} : xi[c];
      if (total >= (1 << 23)) return false;
      splits = std::max(splits, splits_needed(xi));
      fr.a = mf.a;
      fr.sign = mf.sign;
    }
    ensure_size(a_sum_, (i1 - i0 + 1) * a_sum_stride_);  // before any pointer into it is kept
    std::int64_t slots = 0;
    const std::int8_t* last_a = nullptr;
    const std::int32_t* last_bias = nullptr;
    for (std::int64_t i = i0; i < i1; ++i) {
      FusedRankRow& fr = rows[i - i0];
      if (fr.sign == 0) continue;
      if (fr.a != last_a) {
        last_a = fr.a;
        last_bias = fill_a_sums<R>(fr.a, ++slots, 8 * splits - 1);
      }
      fr.a_bias = last_bias;
      fr.split = split_xb(xb[i - i0], splits);
    }
    return true;
  }
  const ByteWriter& writer() const { return writer_; }
  const RankLanes& lanes() const { return lanes_; }

  void row(std::int64_t i, const std::int32_t* acc, const std::uint8_t* xu, std::int64_t x_stride) {
    const MemberFactors mf = member_factors(*g_.f, i / g_.batch.rows_per_member);
    std::int8_t* y = g_.y + i * g_.m;
    const std::int64_t r = g_.f->rank;
    if (mf.sign != 0 && r <= 8 && g_.n <= 65536) {
      alignas(64) std::int32_t xb[16] = {};  // zero past the rank (split_xb reads 8)
      if (r == 1)
        xb_rank1(xu, x_stride, g_.n, mf.b, xb);
      else if (g_.batch.rows_per_member > 1)
        xb_transposed(mf.b, xu, x_stride, xb);
      else
        xb_rank_n(xu, g_.n, r, mf.b, xb);
      std::int64_t total = 0;
      for (std::int64_t c = 0; c < r; ++c) total += xb[c] < 0 ? -std::int64_t{xb[c]} : xb[c];
      if (total < (1 << 23)) {
        if (r == 1) return row_rank1_int32(acc, xb[0], mf, y);
        return with_rank_2_to_8(r, [&](auto rank) { row_rank_n_int32<decltype(rank)::value>(acc, xb, mf, y); });
      }
    }
    if (mf.sign != 0) correction(mf, i, xu, x_stride);
    for (std::int64_t a0 = 0; a0 < g_.m; a0 += 64) {
      __m512i t[4];
      for (int v = 0; v < 4; ++v) {
        t[v] = _mm512_loadu_si512(acc + a0 + 16 * v);
        if (mf.sign != 0) t[v] = add_correction(t[v], &corr_[a0 + 16 * v]);
      }
      writer_.store64(t, y + a0, byte_mask(g_.m - a0));
    }
  }

 private:
  // The int32 paths hold when n <= 65,536 (|acc| <= 2^30) and sum_c |xb[c]| < 2^23 (|p| < 2^30):
  // acc + s floor(p / 2^S) then fits int32. Rank 1: p = xb A[a].
  void row_rank1_int32(const std::int32_t* acc, std::int32_t xb, const MemberFactors& mf, std::int8_t* y) {
    const __m512i xbv = _mm512_set1_epi32(xb);
    const __m128i count = _mm_cvtsi32_si128(g_.f->shift);
    for (std::int64_t a0 = 0; a0 < g_.m; a0 += 64) {
      __m512i t[4];
      for (int v = 0; v < 4; ++v) {
        const std::int64_t av = a0 + 16 * v;
        const __m128i a8 = _mm_maskz_loadu_epi8(static_cast<__mmask16>(byte_mask(g_.m - av)), mf.a + av);
        const __m512i corr = _mm512_sra_epi32(_mm512_mullo_epi32(xbv, _mm512_cvtepi8_epi32(a8)), count);
        const __m512i a32 = _mm512_loadu_si512(acc + av);
        t[v] = mf.sign > 0 ? _mm512_add_epi32(a32, corr) : _mm512_sub_epi32(a32, corr);
      }
      writer_.store64(t, y + a0, byte_mask(g_.m - a0));
    }
  }

  // Calls fn(std::integral_constant<int, R>{}) for rank r = R in 2 .. 8.
  template <class Fn>
  static void with_rank_2_to_8(std::int64_t r, Fn&& fn) {
    switch (r) {
      case 2: return fn(std::integral_constant<int, 2>{});
      case 3: return fn(std::integral_constant<int, 3>{});
      case 4: return fn(std::integral_constant<int, 4>{});
      case 5: return fn(std::integral_constant<int, 5>{});
      case 6: return fn(std::integral_constant<int, 6>{});
      case 7: return fn(std::integral_constant<int, 7>{});
      default: return fn(std::integral_constant<int, 8>{});
    }
  }

  // 2^shift sum_c A[a][c] for every output a (zero past m) into slot `slot` of a_sum_ (grown by
  // the caller).
  template <int R>
  const std::int32_t* fill_a_sums(const std::int8_t* a_mat, std::int64_t slot, int shift) {
    constexpr int kGroups = (R + 3) / 4;
    std::int32_t* out = a_sum_.data() + slot * a_sum_stride_;
    const __m512i ones = _mm512_set1_epi8(1);
    for (std::int64_t av = 0; av < g_.m; av += 16) {
      __m512i raw0, raw1, sum = _mm512_setzero_si512();
      load_a_rows<R>(a_mat, av, g_.m - av, raw0, raw1);
      for (int cg = 0; cg < kGroups; ++cg) sum = _mm512_dpbusd_epi32(sum, ones, lanes_.of<R>(cg, raw0, raw1));
      _mm512_storeu_si512(out + av, _mm512_slli_epi32(sum, static_cast<unsigned>(shift)));
    }
    return out;
  }

  // The sums of A's rows for the row epilogue, in slot 0, made once per factor block: the rows
  // of a member (and of its antithetic partner) share it.
  template <int R>
  const std::int32_t* a_sums(const std::int8_t* a_mat) {
    if (a_mat == a_sum_of_) return a_sum_.data();
    ensure_size(a_sum_, a_sum_stride_);
    a_sum_of_ = a_mat;
    return fill_a_sums<R>(a_mat, 0, 0);
  }

  // Ranks 2 .. 8 in int32 (rank_product), from the stored accumulators.
  template <int R>
  void row_rank_n_int32(const std::int32_t* acc, const std::int32_t* xb, const MemberFactors& mf, std::int8_t* y) {
    const RankSplit split = split_xb(xb, splits_needed(xb));
    const std::int32_t* a_sum = a_sums<R>(mf.a);
    const __m128i count = _mm_cvtsi32_si128(g_.f->shift), bias = _mm_cvtsi32_si128(split.bias);
    for (std::int64_t a0 = 0; a0 < g_.m; a0 += 64) {
      __m512i t[4];
      for (int v = 0; v < 4; ++v) {
        const std::int64_t av = a0 + 16 * v;
        __m512i raw0, raw1;
        load_a_rows<R>(mf.a, av, g_.m - av, raw0, raw1);
        const __m512i p = rank_product<R>(split, lanes_, raw0, raw1, _mm512_sll_epi32(_mm512_loadu_si512(a_sum + av), bias));
        const __m512i corr = _mm512_sra_epi32(p, count), a32 = _mm512_loadu_si512(acc + av);
        t[v] = mf.sign > 0 ? _mm512_add_epi32(a32, corr) : _mm512_sub_epi32(a32, corr);
      }
      writer_.store64(t, y + a0, byte_mask(g_.m - a0));
    }
  }

  // xb as xb_rank_n computes it (the same integers), for members with several rows: B^T (r rows
  // of x_stride bytes, zero padded) and the column sums of B are made once per factor block (an
  // antithetic pair's two members share one) and kept while the rows of that block last; each
  // row then costs r dot products of 64 bytes per vpdpbusd. Writes xb[0 .. 4 ceil(r / 4)), zero
  // past the rank.
  void xb_transposed(const std::int8_t* b, const std::uint8_t* xu, std::int64_t x_stride, std::int32_t* xb) {
    const std::int64_t r = g_.f->rank, n = g_.n;
    if (b != bt_of_) {
      ensure_size(bt_, r * x_stride);
      std::int8_t* bt = bt_.data();
      if (r == 2 || r == 4 || r == 8) {
        // 64 / r rows of B per load, regrouped by column (byte c + r l -> c (64 / r) + l), each
        // column's run stored to its row of B^T; loads past n are zero, so is the padding.
        const std::int64_t per = 64 / r;
        alignas(64) std::uint8_t idx_bytes[64];
        for (std::int64_t c = 0; c < r; ++c)
          for (std::int64_t l = 0; l < per; ++l) idx_bytes[c * per + l] = static_cast<std::uint8_t>(c + r * l);
        const __m512i idx = _mm512_load_si512(idx_bytes);
        alignas(64) std::int8_t grouped[64];
        for (std::int64_t k = 0; k < x_stride; k += per) {
          const __m512i raw = _mm512_maskz_loadu_epi8(byte_mask((n - k) * r), b + k * r);
          _mm512_store_si512(grouped, _mm512_permutexvar_epi8(idx, raw));
          for (std::int64_t c = 0; c < r; ++c) std::memcpy(bt + c * x_stride + k, grouped + c * per, static_cast<std::size_t>(per));
        }
      } else {
        std::fill(bt, bt + r * x_stride, std::int8_t{0});
        for (std::int64_t c = 0; c < r; ++c)
          for (std::int64_t k = 0; k < n; ++k) bt[c * x_stride + k] = b[k * r + c];
      }
      const __m512i ones = _mm512_set1_epi8(1);
      for (std::int64_t c = 0; c < r; ++c) {
        __m512i sum = _mm512_setzero_si512();
        for (std::int64_t k = 0; k < x_stride; k += 64)
          sum = _mm512_dpbusd_epi32(sum, ones, _mm512_loadu_si512(bt + c * x_stride + k));
        col_sum_[c] = _mm512_reduce_add_epi32(sum);
      }
      bt_of_ = b;
    }
    with_rank_2_to_8(r, [&](auto rank) {  // the rank as a constant keeps the sums in registers
      constexpr int R = decltype(rank)::value, kGroups = (R + 3) / 4;
      __m512i dot[4 * kGroups];
      for (int c = 0; c < 4 * kGroups; ++c) dot[c] = _mm512_setzero_si512();
      for (std::int64_t k = 0; k < x_stride; k += 64) {
        const __m512i xv = _mm512_loadu_si512(xu + k);
        for (int c = 0; c < R; ++c) dot[c] = _mm512_dpbusd_epi32(dot[c], xv, _mm512_loadu_si512(bt_.data() + c * x_stride + k));
      }
      // Modulo 2^32, as xb_rank_n (the true xb fits int32), 4 ranks per vector (zero past the
      // rank): one wide store, which the split's wide loads read without a forwarding stall.
      for (int cg = 0; cg < kGroups; ++cg) {
        const __m128i col = _mm_slli_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col_sum_ + 4 * cg)), 7);
        const __m128i sums = lane_sums4(dot[4 * cg], dot[4 * cg + 1], dot[4 * cg + 2], dot[4 * cg + 3]);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(xb + 4 * cg), _mm_sub_epi32(sums, col));
      }
    });
  }

  // saturate_int32(acc + corr) for 16 outputs.
  static __m512i add_correction(__m512i acc, const std::int64_t* corr) {
    const __m512i lo = _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(acc)), _mm512_loadu_si512(corr));
    const __m512i hi =
        _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(acc, 1)), _mm512_loadu_si512(corr + 8));
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtsepi64_epi32(lo)), _mm512_cvtsepi64_epi32(hi), 1);
  }

  void correction(const MemberFactors& mf, std::int64_t i, const std::uint8_t* xu, std::int64_t x_stride) {
    const std::int64_t r = g_.f->rank;
    if (r > 16) {
      lowrank_row_scalar(g_.m, g_.n, r, g_.f->shift, mf, g_.x + i * g_.n, xb64_.data(), corr_.data());
      return;
    }
    alignas(64) std::int32_t xb[16];
    if (r == 1)
      xb_rank1(xu, x_stride, g_.n, mf.b, xb);
    else
      xb_rank_n(xu, g_.n, r, mf.b, xb);
    corr_from_xb(g_.m, r, g_.f->shift, mf.sign, mf.a, xb, corr_.data());
  }

  const QmmArgs& g_;
  ByteWriter writer_;
  std::vector<std::int64_t> corr_;  // (m64 + 16)
  std::vector<std::int64_t> xb64_;  // (r), for ranks above 16
  std::vector<std::int8_t> bt_;     // B^T of the factor block bt_of_ (xb_transposed)
  const std::int8_t* bt_of_ = nullptr;
  std::int32_t col_sum_[8] = {};
  // Sums of A's rows, slots of a_sum_stride_: slot 0 for the factor block a_sum_of_ (row
  // epilogue), slots 1 .. for a fused block's factor blocks.
  std::vector<std::int32_t> a_sum_;
  std::int64_t a_sum_stride_;
  const std::int8_t* a_sum_of_ = nullptr;
  RankLanes lanes_;
};

// What the epilogue of a block of rows reads besides the accumulators: each member's factor
// block (at one row per member every row has its own) and the addend's rows. The hardware
// prefetchers do not see these coming, so the lines of the next row block are queued and asked
// for into L2 a few per tile while the current block's tiles run (all at once, they would
// stall the core on its outstanding-miss buffers).
class LineQueue {
 public:
  void fill(const QmmArgs& g, std::int64_t i0, std::int64_t i1) {
    ranges_.clear();
    next_ = 0;
    if (i0 >= i1) return;
    if (g.add.rows != nullptr) add(g.add.rows + i0 * g.m, (i1 - i0) * g.m);
    if (g.f->blocks == nullptr && g.add.vec == nullptr) return;
    const std::int8_t* last = nullptr;
    for (std::int64_t j = i0 / g.batch.rows_per_member; j <= (i1 - 1) / g.batch.rows_per_member; ++j) {
      if (g.add.vec != nullptr && g.add.vec_stride != 0) add(g.add.vec + j * g.add.vec_stride, g.m);
      const MemberFactors mf = member_factors(*g.f, j);
      if (mf.sign == 0 || mf.b == last) continue;
      last = mf.b;
      add(mf.b, g.f->rank * (g.n + g.m));
    }
  }
  // Asks for up to `lines` more lines (all that are left when lines < 0).
  void pump(std::int64_t lines) {
    for (; next_ < ranges_.size() && lines != 0; --lines) {
      _mm_prefetch(ranges_[next_].first, _MM_HINT_T1);
      ranges_[next_].first += 64;
      if (ranges_[next_].first >= ranges_[next_].second) ++next_;
    }
  }
  std::int64_t lines_left() const {
    std::int64_t n = 0;
    for (std::size_t k = next_; k < ranges_.size(); ++k) n += (ranges_[k].second - ranges_[k].first + 63) / 64;
    return n;
  }

 private:
  void add(const std::int8_t* p, std::int64_t bytes) {
    const char* c = reinterpret_cast<const char*>(p);
    ranges_.emplace_back(c, c + bytes);
  }
  std::vector<std::pair<const char*, const char*>> ranges_;
  std::size_t next_ = 0;
};

}  // namespace

// rows are split evenly over the threads in whole tiles; each thread runs row blocks of its range.
void qmm_avx512_vnni(const QmmArgs& g) {
  const std::int64_t rows = g.batch.rows();
  Packed p{(g.n + 3) / 4, round_up(g.n, 64), (g.m + 15) / 16, thread_scratch<std::uint8_t>(0),
           thread_scratch<std::int8_t>(0), thread_scratch<std::int32_t>(0)};
  ensure_size(p.xu, rows * p.x_stride);
  const bool prepacked = g.packed != nullptr;  // W packed once by qpack for many calls
  if (!prepacked) {
    ensure_size(p.wp, p.m_blocks * p.n_groups * 64);
    ensure_size(p.bias, p.m_blocks * 16);
  }
  const std::int8_t* wp = prepacked ? g.packed->wp.data() : p.wp.data();
  const std::int32_t* bias = prepacked ? g.packed->bias.data() : p.bias.data();
  const std::int64_t m64 = round_up(g.m, 64), n_tiles = (rows + kRowTile - 1) / kRowTile;
#pragma omp parallel if (rows * g.m * g.n > kParallelMinWork)
  {
    if (!prepacked) {
#pragma omp for schedule(static)
      for (std::int64_t blk = 0; blk < p.m_blocks; ++blk)
        pack_w_block(g.m, g.n, g.w, p.n_groups, p.wp.data(), p.bias.data(), blk);
    }
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < rows; ++i) {
      if (i + 8 < rows)  // the rows come from memory, not cache: fetch a few ahead
        for (std::int64_t k = 0; k < g.n; k += 64) _mm_prefetch(reinterpret_cast<const char*>(g.x + (i + 8) * g.n + k), _MM_HINT_T1);
      convert_x_row(g.x + i * g.n, g.n, p.x_stride, p.xu.data() + i * p.x_stride);
    }
    const std::int64_t n_threads = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t begin = std::min(rows, n_tiles * t / n_threads * kRowTile);
    const std::int64_t end = std::min(rows, n_tiles * (t + 1) / n_threads * kRowTile);
    RowEpilogue epi(g, m64);
    std::vector<std::int32_t>& acc = thread_scratch<std::int32_t>(1);  // this team thread's own
    ensure_size(acc, kRowBlock * m64);
    FusedRow fused[kRowBlock];
    FusedRankRow fused_rank[kRowBlock];
    LineQueue ahead;
    ahead.fill(g, begin, std::min(end, begin + kRowBlock));
    ahead.pump(-1);
    const std::int64_t tiles_per_block = (kRowBlock / kRowTile) * ((p.m_blocks + kColBlocks - 1) / kColBlocks);
    for (std::int64_t i0 = begin; i0 < end; i0 += kRowBlock) {
      const std::int64_t i1 = std::min(end, i0 + kRowBlock);
      ahead.fill(g, i1, std::min(end, i1 + kRowBlock));
      const std::int64_t per_tile = (ahead.lines_left() + tiles_per_block - 1) / tiles_per_block;
      // The block's tiles with the epilogue in registers (Rows: the fused rows' kind).
      const auto fused_tiles = [&](auto kind, const auto* rows, const auto& context) {
        using Rows = typename decltype(kind)::type;
        for (std::int64_t b0 = 0; b0 < p.m_blocks; b0 += kColBlocks) {
          const int ct = static_cast<int>(std::min<std::int64_t>(kColBlocks, p.m_blocks - b0));
          for (std::int64_t i = i0; i < i1; i += kRowTile) {
            ahead.pump(per_tile);
            const int rt = static_cast<int>(std::min<std::int64_t>(kRowTile, i1 - i));
            kernel_for<FusedTile<Rows>>(rt, ct)(p.xu.data() + i * p.x_stride, p.x_stride, wp + b0 * p.n_groups * 64,
                                                p.n_groups * 64, p.n_groups, bias + b0 * 16, rows + (i - i0), context,
                                                epi.writer(), g.f->shift, b0 * 16, g.y + i * g.m + b0 * 16, g.m,
                                                g.m - b0 * 16);
          }
        }
        return true;
      };
      const bool fused_block =
          epi.fused_rows(i0, i1, p.xu.data() + i0 * p.x_stride, p.x_stride, fused)
              ? fused_tiles(std::type_identity<Rank1Rows>{}, fused, Rank1Rows::Context{})
              : with_fused_rank(g.f->rank, [&](auto rank) {
                  constexpr int R = decltype(rank)::value;
                  return epi.fused_rank_rows<R>(i0, i1, p.xu.data() + i0 * p.x_stride, p.x_stride, fused_rank) &&
                         fused_tiles(std::type_identity<RankRows<R>>{}, fused_rank, epi.lanes());
                });
      if (fused_block) {
        ahead.pump(-1);
        add_addend(g, i0, i1);
        continue;
      }
      for (std::int64_t b0 = 0; b0 < p.m_blocks; b0 += kColBlocks) {
        const int ct = static_cast<int>(std::min<std::int64_t>(kColBlocks, p.m_blocks - b0));
        for (std::int64_t i = i0; i < i1; i += kRowTile) {
          ahead.pump(per_tile);
          const int rt = static_cast<int>(std::min<std::int64_t>(kRowTile, i1 - i));
          kernel_for<PlainTile>(rt, ct)(p.xu.data() + i * p.x_stride, p.x_stride, wp + b0 * p.n_groups * 64,
                           p.n_groups * 64, p.n_groups, bias + b0 * 16, acc.data() + (i - i0) * m64 + b0 * 16,
                           m64);
        }
      }
      ahead.pump(-1);
      for (std::int64_t i = i0; i < i1; ++i) epi.row(i, acc.data() + (i - i0) * m64, p.xu.data() + i * p.x_stride, p.x_stride);
      add_addend(g, i0, i1);
    }
  }
}

std::shared_ptr<const PackedW> pack_avx512_vnni(std::int64_t m, std::int64_t n, const std::int8_t* w) {
  auto out = std::make_shared<PackedW>();
  const std::int64_t n_groups = (n + 3) / 4, m_blocks = (m + 15) / 16;
  out->m = m;
  out->n = n;
  out->wp.resize(static_cast<std::size_t>(m_blocks * n_groups * 64));
  out->bias.resize(static_cast<std::size_t>(m_blocks * 16));
  for (std::int64_t blk = 0; blk < m_blocks; ++blk) pack_w_block(m, n, w, n_groups, out->wp.data(), out->bias.data(), blk);
  return out;
}

}  // namespace eggroll::cpu_int8::detail
#endif
