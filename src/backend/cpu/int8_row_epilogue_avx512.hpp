// The int8 matmul's row epilogue at the AVX-512 VNNI level, for cpu_int8_avx512.cpp (and only
// files compiled with its -mavx512* flags): per thread, a row's int32 accumulators to output bytes,
// with the member's low-rank correction, either in the tile's registers (the fused rows of a block)
// or after the tile. Integer math throughout: every result equals the scalar level's bit for bit.
#pragma once
// GCC 12's AVX-512 headers trip false (maybe-)uninitialized warnings on their own _mm512_undefined
// operands (GCC bug 105593), as in the files that include this one.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/avx512_columns.hpp"
#include "backend/cpu/int8_correction_avx512.hpp"
#include "backend/int8_ops.hpp"

namespace eggroll::cpu_int8::detail {

// qmm tiling: a tile is kRowTile rows x kColBlocks * 16 outputs of int32 accumulators in registers;
// rows are processed in blocks of kRowBlock so a block's activations and a W panel stay in cache.
constexpr int kRowTile = 6;
constexpr int kColBlocks = 4;
constexpr std::int64_t kRowBlock = 8 * kRowTile;

// Grows v to at least n values (never shrinks, so a reused buffer is not cleared again).
template <typename Vector>
void ensure_size(Vector& v, std::int64_t n) {
  if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
}

// This thread's buffer `Which` of T, kept between calls and grown by ensure_size, never cleared:
// every value is written before it is read. Slots: qmm's operands (cpu_int8_avx512.cpp) xu
// <uint8_t, 0>, wp <int8_t, 1>, bias <int32_t, 2>, acc <int32_t, 3>, padded factors <int8_t, 4>;
// RowEpilogue's bt_ <int8_t, 0>, at_ <int8_t, 5>, a_sum_ <int32_t, 0>, a32_ <int32_t, 1>, a16_
// <int16_t, 0>; the AMX update's (cpu_int8_update_amx.cpp) packed B <int8_t, 2>, packed A <int8_t,
// 3>, sums <int32_t, 4>. (Made and freed with each call, the epilogue's buffers cost a clear of up
// to 200 KB, and page faults where malloc mapped them, on every qmm call.)
template <typename T, int Which>
UnsetVector<T>& kept_buffer() {
  thread_local UnsetVector<T> v;
  return v;
}

// Per thread: turns a row's int32 accumulators (m64 of them, from acc) into output bytes, adding
// the member's low-rank correction first when the member is perturbed. With stored_bias, acc holds
// the sums without their bias (as the AMX tiles leave them) and row() adds stored_bias[a] to each.
// The rows of x it is handed (xu) are x + 128 as u8, or with raw_x x's own bytes (x_flip).
class RowEpilogue {
 public:
  RowEpilogue(const QmmArgs& g, std::int64_t m64, const std::int32_t* stored_bias = nullptr, bool raw_x = false)
      : g_(g),
        stored_bias_(stored_bias),
        flip_(x_flip(raw_x)),
        writer_(g.div),
        corr_(static_cast<std::size_t>(m64 + 16)),
        xb64_(static_cast<std::size_t>(g.f->rank)),
        col_sum_(static_cast<std::size_t>(std::max<std::int64_t>(16, (g.f->rank + 3) / 4 * 4))),
        lanes_(g.f->rank),
        xb_wide_(col_sum_.size()) {}

  // block_mf_ for rows [i0, i1): each member's factors looked up once for its rows. Whether any
  // row is perturbed.
  bool block_factors(std::int64_t i0, std::int64_t i1) {
    const std::int64_t per_member = g_.batch.rows_per_member;
    bool any = false;
    for (std::int64_t i = i0; i < i1;) {
      const std::int64_t j = i / per_member, end = std::min(i1, (j + 1) * per_member);
      const MemberFactors mf = member_factors(*g_.f, j);
      any = any || mf.sign != 0;
      for (; i < end; ++i) block_mf_[i - i0] = mf;
    }
    return any;
  }

  // Fills rows[i - i0] for rows [i0, i1) when every one of them can finish in the tile's
  // registers (unperturbed, or rank 1 with |x . B| < 2^23 and n <= 65,536); false otherwise.
  // fused_short() then tells whether every x . B fits int16 (Rank1RowsShort).
  bool fused_rows(std::int64_t i0, std::int64_t i1, const std::uint8_t* xu, std::int64_t x_stride, FusedRow* rows) {
    const bool rank1 = g_.f->rank == 1 && g_.n <= 65536;
    if (block_factors(i0, i1) && !rank1) return false;
    if (rank1) runs_xb<1>(i0, i1, xu, x_stride);
    const std::int64_t per_block = (g_.m + 15) / 16 * 16;
    ensure_size(a32_, (i1 - i0) * per_block);
    std::int64_t used = 0;
    const std::int8_t* last_a = nullptr;
    const std::int32_t* last_a32 = nullptr;
    short_ = true;
    for (std::int64_t i = i0; i < i1; ++i) {
      const MemberFactors& mf = block_mf_[i - i0];
      FusedRow& fr = rows[i - i0];
      fr.sign = 0;  // field by field: a whole-struct copy here stalls on store forwarding
      if (mf.sign == 0) continue;
      fr.xb = xb_[i - i0][0];
      if (fr.xb <= -(1 << 23) || fr.xb >= (1 << 23)) return false;
      short_ = short_ && fr.xb >= -32768 && fr.xb <= 32767;
      if (mf.a != last_a) {  // each factor block met has its A widened once
        last_a = mf.a;
        std::int32_t* out = a32_.data() + used;
        used += per_block;
        for (std::int64_t av = 0; av < g_.m; av += 16) {
          const __m128i a8 = _mm_maskz_loadu_epi8(static_cast<__mmask16>(byte_mask(g_.m - av)), mf.a + av);
          _mm512_storeu_si512(out + av, _mm512_cvtepi8_epi32(a8));
        }
        last_a32 = out;
      }
      fr.a32 = last_a32;
      fr.sign = mf.sign;
    }
    return true;
  }
  bool fused_short() const { return short_; }

  // How the rows of a block at rank R in 2, 4, 8, 16 finish in the tile's registers: not at all (some
  // row has sum_c |x . B[:, c]| >= 2^23, or n > 65,536), in int16 pairs (PairRows) when every
  // |x . B[:, c]| < 2^15, else in int16 pairs of x . B split in two (wide).
  enum class Fused { no, pairs, wide };

  // x . B of each perturbed row of [i0, i1) into xb_ (rows of 16, zero past the rank), and the way
  // the block's rows can finish.
  template <int R>
  Fused block_xb(std::int64_t i0, std::int64_t i1, const std::uint8_t* xu, std::int64_t x_stride) {
    if (g_.n > 65536) return Fused::no;
    block_factors(i0, i1);
    runs_xb<R>(i0, i1, xu, x_stride);
    bool pairs = true;
    for (std::int64_t i = i0; i < i1; ++i) {
      const MemberFactors& mf = block_mf_[i - i0];
      if (mf.sign == 0) continue;
      const std::int32_t* xi = xb_[i - i0];
      std::int64_t total = 0;
      for (int c = 0; c < R; ++c) total += xi[c] < 0 ? -std::int64_t{xi[c]} : xi[c];
      if (total >= (1 << 23)) return Fused::no;
      pairs = pairs && pairs_fit<R>(xi);
    }
    return pairs ? Fused::pairs : Fused::wide;
  }

  // x . B of each perturbed row of [i0, i1) (factors in block_mf_) into xb_. With several rows per
  // member: by runs of rows with the same factor block, several rows at a time; with one, pairs_xb.
  template <int R>
  void runs_xb(std::int64_t i0, std::int64_t i1, const std::uint8_t* xu, std::int64_t x_stride) {
    if (g_.batch.rows_per_member == 1) return pairs_xb<R>(i0, i1, xu, x_stride);
    constexpr int kTogether = R == 1 ? 8 : 4;  // the rows whose sums xb_rows keeps in registers
    for (std::int64_t i = i0; i < i1;) {
      const MemberFactors& mf = block_mf_[i - i0];
      std::int64_t run = 1;
      while (i + run < i1 && block_mf_[i + run - i0].b == mf.b && (block_mf_[i + run - i0].sign != 0) == (mf.sign != 0))
        ++run;
      if (mf.sign != 0) {
        lay_out_b(mf.b, x_stride);
        std::int64_t t = 0;
        for (; t + kTogether <= run; t += kTogether) {
          std::int32_t* out[kTogether];
          for (int u = 0; u < kTogether; ++u) out[u] = xb_[i - i0 + t + u];
          xb_rows<R, kTogether>(xu + (i - i0 + t) * x_stride, x_stride, out);
        }
        for (; t < run; ++t) {
          std::int32_t* out = xb_[i - i0 + t];
          xb_rows<R, 1>(xu + (i - i0 + t) * x_stride, x_stride, &out);
        }
      }
      i += run;
    }
  }

  // runs_xb with one row per member: at rank 1 an antithetic pair's two rows (next to each other,
  // B shared) in one pass of B, any other row alone.
  template <int R>
  void pairs_xb(std::int64_t i0, std::int64_t i1, const std::uint8_t* xu, std::int64_t x_stride) {
    for (std::int64_t i = i0; i < i1;) {
      const MemberFactors& mf = block_mf_[i - i0];
      const std::uint8_t* x = xu + (i - i0) * x_stride;
      const bool pair = R == 1 && mf.sign != 0 && i + 1 < i1 &&
                        block_mf_[i + 1 - i0].sign != 0 && block_mf_[i + 1 - i0].b == mf.b;
      if (pair) {
        std::int32_t* const out[2] = {xb_[i - i0], xb_[i + 1 - i0]};
        xb_rank1_rows<2>(x, x_stride, g_.n, mf.b, out, flip_);
      } else if (mf.sign != 0) {
        if constexpr (R == 1)
          xb_rank1(x, x_stride, g_.n, mf.b, xb_[i - i0], flip_);
        else
          xb_rank_n(x, g_.n, R, mf.b, xb_[i - i0], flip_);
      }
      i += pair ? 2 : 1;
    }
  }

  // The PairRows of [i0, i1) after block_xb (wide: its answer was Fused::wide): each factor block
  // met has its A widened once, into a16_.
  template <int R>
  void fused_pair_rows(std::int64_t i0, std::int64_t i1, bool wide, PairRow* rows) {
    const std::int64_t per_block = (g_.m + 15) / 16 * 16 * R;
    ensure_size(a16_, (i1 - i0) * per_block);
    std::int64_t used = 0;
    const std::int8_t* last_a = nullptr;
    const std::int16_t* last_a16 = nullptr;
    for (std::int64_t i = i0; i < i1; ++i) {
      const MemberFactors& mf = block_mf_[i - i0];
      PairRow& pr = rows[i - i0];
      pr.sign = mf.sign;
      if (mf.sign == 0) continue;
      if (mf.a != last_a) {
        last_a = mf.a;
        std::int16_t* out = a16_.data() + used;
        used += per_block;
        widen_a_pairs<R>(mf.a, g_.m, out);
        last_a16 = out;
      }
      pr.a16 = last_a16;
      pack_pairs<R>(xb_[i - i0], wide, pr);
    }
  }
  const ByteWriter& writer() const { return writer_; }

  void row(std::int64_t i, const std::int32_t* acc, const std::uint8_t* xu, std::int64_t x_stride) {
    const MemberFactors mf = member_factors(*g_.f, i / g_.batch.rows_per_member);
    std::int8_t* y = g_.y + i * g_.m;
    const std::int64_t r = g_.f->rank;
    if (mf.sign != 0 && r <= 8 && g_.n <= 65536) {
      alignas(64) std::int32_t xb[16] = {};  // zero past the rank (split_xb reads 8)
      if (r == 1)
        xb_rank1(xu, x_stride, g_.n, mf.b, xb, flip_);
      else if (g_.batch.rows_per_member > 1)
        xb_laid_out(mf.b, xu, x_stride, xb);
      else
        xb_rank_n(xu, g_.n, r, mf.b, xb, flip_);
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
        t[v] = stored(acc, a0 + 16 * v);
        if (mf.sign != 0) t[v] = add_correction(t[v], &corr_[a0 + 16 * v]);
      }
      writer_.store64(t, y + a0, byte_mask(g_.m - a0));
    }
  }

 private:
  // Accumulators av .. av + 15 of a row's acc, with their bias where acc lacks it (the bias holds
  // whole blocks of 16 outputs, acc whole blocks of 64: lanes past m are never stored).
  __m512i stored(const std::int32_t* acc, std::int64_t av) const {
    const __m512i a = _mm512_loadu_si512(acc + av);
    if (stored_bias_ == nullptr) return a;
    return _mm512_add_epi32(a, _mm512_maskz_loadu_epi32(avx512::first_lanes(g_.m - av), stored_bias_ + av));
  }

  // The int32 paths hold when n <= 65,536 (|acc| <= 2^30) and sum_c |xb[c]| < 2^23 (|p| < 2^30):
  // acc + s floor(p / 2^S) then fits int32. Rank 1: p = xb A[a].
  void row_rank1_int32(const std::int32_t* acc, std::int32_t xb, const MemberFactors& mf, std::int8_t* y) {
    const __m512i xbv = _mm512_set1_epi32(xb);
    const __m512i count = _mm512_set1_epi32(g_.f->shift);
    for (std::int64_t a0 = 0; a0 < g_.m; a0 += 64) {
      __m512i t[4];
      for (int v = 0; v < 4; ++v) {
        const std::int64_t av = a0 + 16 * v;
        const __m128i a8 = _mm_maskz_loadu_epi8(static_cast<__mmask16>(byte_mask(g_.m - av)), mf.a + av);
        const __m512i corr = _mm512_srav_epi32(_mm512_mullo_epi32(xbv, _mm512_cvtepi8_epi32(a8)), count);
        const __m512i a32 = stored(acc, av);
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

  // The sums of A's rows (zero past m) for the row epilogue, made once per factor block: the
  // rows of a member (and of its antithetic partner) share them.
  template <int R>
  const std::int32_t* a_sums(const std::int8_t* a_mat) {
    if (a_mat == a_sum_of_) return a_sum_.data();
    constexpr int kGroups = (R + 3) / 4;
    ensure_size(a_sum_, (g_.m + 63) / 64 * 64);  // row_rank_n_int32 loads 64 outputs at a time
    const __m512i ones = _mm512_set1_epi8(1);
    for (std::int64_t av = 0; av < g_.m; av += 16) {
      __m512i raw0, raw1, sum = _mm512_setzero_si512();
      load_a_rows<R>(a_mat, av, g_.m - av, raw0, raw1);
      for (int cg = 0; cg < kGroups; ++cg) sum = _mm512_dpbusd_epi32(sum, ones, lanes_.of<R>(cg, raw0, raw1));
      _mm512_storeu_si512(a_sum_.data() + av, sum);
    }
    a_sum_of_ = a_mat;
    return a_sum_.data();
  }

  // Ranks 2 .. 8 in int32 (rank_product), from the stored accumulators.
  template <int R>
  void row_rank_n_int32(const std::int32_t* acc, const std::int32_t* xb, const MemberFactors& mf, std::int8_t* y) {
    const RankSplit split = split_xb(xb, splits_needed(xb));
    const std::int32_t* a_sum = a_sums<R>(mf.a);
    const __m512i count = _mm512_set1_epi32(g_.f->shift);
    const __m128i bias = _mm_cvtsi32_si128(split.bias);
    for (std::int64_t a0 = 0; a0 < g_.m; a0 += 64) {
      __m512i t[4];
      for (int v = 0; v < 4; ++v) {
        const std::int64_t av = a0 + 16 * v;
        __m512i raw0, raw1;
        load_a_rows<R>(mf.a, av, g_.m - av, raw0, raw1);
        const __m512i p = rank_product<R>(split, lanes_, raw0, raw1, _mm512_sll_epi32(_mm512_loadu_si512(a_sum + av), bias));
        const __m512i corr = _mm512_srav_epi32(p, count), a32 = stored(acc, av);
        t[v] = mf.sign > 0 ? _mm512_add_epi32(a32, corr) : _mm512_sub_epi32(a32, corr);
      }
      writer_.store64(t, y + a0, byte_mask(g_.m - a0));
    }
  }

  // xb as xb_rank_n computes it (the same integers), for members with several rows: the factor
  // block's layout for xb_rows and the column sums of B are made once per factor block (an
  // antithetic pair's two members share one, lay_out_b) and kept while the rows of that block
  // last. Writes xb[0 .. 16), zero past the rank.
  void xb_laid_out(const std::int8_t* b, const std::uint8_t* xu, std::int64_t x_stride, std::int32_t* xb) {
    lay_out_b(b, x_stride);
    with_rank_2_to_8(g_.f->rank, [&](auto rank) {  // the rank as a constant keeps the sums in registers
      xb_rows<decltype(rank)::value, 1>(xu, x_stride, &xb);
    });
  }

  // The factor block b as xb_rows reads it, unless it is b's already: at ranks 2, 4, 8 and 16,
  // B's rows in groups of 4 G (G = 16 / r), 64 bytes each, int32 lane c G + h holding
  // B[4 h .. 4 h + 3][c] of the group (zero past n), and col_sum_ the lanes' sums over the groups;
  // at other ranks B^T (r rows of x_stride bytes, zero padded, then zero rows up to a multiple of
  // 4) and col_sum_ its rows' sums.
  void lay_out_b(const std::int8_t* b, std::int64_t x_stride) {
    if (b == bt_of_) return;
    const std::int64_t r = g_.f->rank, n = g_.n, rows4 = (r + 3) / 4 * 4;
    ensure_size(bt_, rows4 * x_stride);
    std::int8_t* bt = bt_.data();
    const __m512i ones = _mm512_set1_epi8(1);
    if (r == 2 || r == 4 || r == 8 || r == 16) {
      const std::int64_t groups = 16 / r;
      alignas(64) std::uint8_t idx_bytes[64];
      for (std::int64_t c = 0; c < r; ++c)
        for (std::int64_t h = 0; h < groups; ++h)
          for (std::int64_t q = 0; q < 4; ++q)
            idx_bytes[4 * (c * groups + h) + q] = static_cast<std::uint8_t>((4 * h + q) * r + c);
      const __m512i idx = _mm512_load_si512(idx_bytes);
      __m512i sum = _mm512_setzero_si512();
      for (std::int64_t k = 0; k < n; k += 4 * groups) {
        const __m512i grouped = _mm512_permutexvar_epi8(idx, _mm512_maskz_loadu_epi8(byte_mask((n - k) * r), b + k * r));
        _mm512_storeu_si512(bt + k * r, grouped);
        sum = _mm512_dpbusd_epi32(sum, ones, grouped);
      }
      _mm512_storeu_si512(col_sum_.data(), sum);
      bt_of_ = b;
      return;
    }
    if (r == 1) {  // B is its own transpose
      std::memcpy(bt, b, static_cast<std::size_t>(n));
      std::fill(bt + n, bt + x_stride, std::int8_t{0});
    } else {
      std::fill(bt, bt + rows4 * x_stride, std::int8_t{0});  // and the rows up to a multiple of 4
      avx512::transpose_bytes(b, n, r, bt, x_stride);
    }
    for (std::int64_t c = 0; c < r; ++c) {
      __m512i sum = _mm512_setzero_si512();
      for (std::int64_t k = 0; k < x_stride; k += 64)
        sum = _mm512_dpbusd_epi32(sum, ones, _mm512_loadu_si512(bt + c * x_stride + k));
      col_sum_[c] = _mm512_reduce_add_epi32(sum);
    }
    bt_of_ = b;
  }

  // xb[t] for T rows xu + t x_stride of the factor block in bt_ (lay_out_b), their dot products
  // advancing together, then summed modulo 2^32, as xb_rank_n (the true xb fits int32). Ranks 2,
  // 4, 8, 16: one vpdpbusd per group of B's rows and row, against the row's 4 G bytes broadcast,
  // then the G lanes of each rank added; xb[t][0 .. 16) written, zero past the rank. Other ranks
  // (xb_dots): 4 ranks per vector, zero past the rank. One wide store either way, which the
  // pairs' loads read without a forwarding stall.
  template <int R, int T>
  void xb_rows(const std::uint8_t* xu, std::int64_t x_stride, std::int32_t* const* xb) {
    if constexpr (R == 2 || R == 4 || R == 8 || R == 16) {
      constexpr int kG = 16 / R, kStep = 4 * kG;  // k per vector of B
      // two chains per row (even and odd steps): T chains alone wait on vpdpbusd's latency
      __m512i dot[2][T];
#pragma GCC unroll 16
      for (int e = 0; e < 2 * T; ++e) dot[e / T][e % T] = _mm512_setzero_si512();
      const std::int8_t* const bt = bt_.data();
      const std::int64_t n = g_.n;
      const __m512i flip = flip_;
      const auto step = [&](std::int64_t k, int chain) [[gnu::always_inline]] {
        const __m512i bv = _mm512_loadu_si512(bt + k * R);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t)
          dot[chain][t] =
              _mm512_dpbusd_epi32(dot[chain][t], _mm512_xor_si512(x_groups<kG>(xu + t * x_stride + k), flip), bv);
      };
      std::int64_t k = 0;
      for (; k + 2 * kStep <= n; k += 2 * kStep) {
        step(k, 0);
        step(k + kStep, 1);
      }
      for (; k < n; k += kStep) step(k, 0);
      const __m512i col = _mm512_slli_epi32(_mm512_loadu_si512(col_sum_.data()), 7);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
        _mm512_storeu_si512(xb[t], fold_groups<kG>(_mm512_sub_epi32(_mm512_add_epi32(dot[0][t], dot[1][t]), col)));
    } else if constexpr (R == 1) {  // one sum per row, four rows' reduced together
      alignas(64) std::int32_t dots[T][16];
      xb_dots<1, T, 1>(xu, x_stride, bt_.data(), dots, flip_);
      const std::int32_t col = static_cast<std::int32_t>(static_cast<std::uint32_t>(col_sum_[0]) << 7);
      if constexpr (T % 4 == 0) {
        for (int t = 0; t < T; t += 4) {
          alignas(16) std::int32_t sums[4];
          _mm_store_si128(reinterpret_cast<__m128i*>(sums),
                          _mm_sub_epi32(lane_sums4(_mm512_load_si512(dots[t]), _mm512_load_si512(dots[t + 1]),
                                                   _mm512_load_si512(dots[t + 2]), _mm512_load_si512(dots[t + 3])),
                                        _mm_set1_epi32(col)));
          for (int u = 0; u < 4; ++u) xb[t + u][0] = sums[u];
        }
      } else {
        for (int t = 0; t < T; ++t)
          xb[t][0] = static_cast<std::int32_t>(static_cast<std::uint32_t>(_mm512_reduce_add_epi32(_mm512_load_si512(dots[t]))) -
                                               static_cast<std::uint32_t>(col));
      }
    } else {
      constexpr int kGroups = (R + 3) / 4;
      alignas(64) std::int32_t dots[T * 4 * kGroups][16];
      xb_dots<R, T, 4 * kGroups>(xu, x_stride, bt_.data(), dots, flip_);
      for (int t = 0; t < T; ++t)
        for (int cg = 0; cg < kGroups; ++cg) {
          four_sums(dots + t * 4 * kGroups + 4 * cg, col_sum_.data() + 4 * cg, xb[t] + 4 * cg);
        }
    }
  }

  // out[q] = the 16 lanes of d[q] summed, less 128 col[q], for q < 4 (modulo 2^32): four ranks' x . B
  // from xb_dots's sums against B^T rows (x + 128 against B: the + 128's share is 128 B's sum).
  static void four_sums(const std::int32_t (*d)[16], const std::int32_t* col, std::int32_t* out) {
    const __m128i sums =
        lane_sums4(_mm512_load_si512(d[0]), _mm512_load_si512(d[1]), _mm512_load_si512(d[2]), _mm512_load_si512(d[3]));
    const __m128i share = _mm_slli_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col)), 7);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_sub_epi32(sums, share));
  }

  // The 4 G bytes at x in every group of G int32 lanes.
  template <int G>
  static __m512i x_groups(const std::uint8_t* x) {
    if constexpr (G == 1) return _mm512_set1_epi32(load_u32(x));
    if constexpr (G == 2) return _mm512_set1_epi64(load_u64(x));
    if constexpr (G == 4) return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
    if constexpr (G == 8) return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
  }

  // Lane c of the result = the sum of lanes c G .. c G + G - 1 of v (modulo 2^32) for c < 16 / G;
  // zero above.
  template <int G>
  static __m512i fold_groups(__m512i v) {
    if constexpr (G == 1) return v;
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int s = 1; s < G; s *= 2)
      v = _mm512_add_epi32(v, _mm512_permutexvar_epi32(_mm512_xor_si512(lane, _mm512_set1_epi32(s)), v));
    constexpr int kLog2G = G == 2 ? 1 : (G == 4 ? 2 : 3);
    const __mmask16 ranks = static_cast<__mmask16>((1u << (16 / G)) - 1);
    return _mm512_maskz_permutexvar_epi32(ranks, _mm512_slli_epi32(lane, kLog2G), v);
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
    if (r > 16 && g_.n <= 65536) return correction_above_16(mf, xu, x_stride);
    if (r > 16) {
      lowrank_row_scalar(g_.m, g_.n, r, g_.f->shift, mf, g_.x + i * g_.n, xb64_.data(), corr_.data());
      return;
    }
    alignas(64) std::int32_t xb[16];
    if (r == 1)
      xb_rank1(xu, x_stride, g_.n, mf.b, xb, flip_);
    else
      xb_rank_n(xu, g_.n, r, mf.b, xb, flip_);
    corr_from_xb(g_.m, r, g_.f->shift, mf.sign, mf.a, xb, corr_.data());
  }

  // correction() at ranks above 16 (n <= 65,536, so x . B fits int32): x . B from B^T (lay_out_b)
  // four ranks at a time, then p[a] = sum_c xb[c] A[a][c] from A^T (made once per factor block):
  // in int32, 16 outputs a vector, where sum_c |xb[c]| < 2^24 bounds |p| below 2^31, else in int64,
  // 8 a vector; corr_ as corr_from_xb's.
  void correction_above_16(const MemberFactors& mf, const std::uint8_t* xu, std::int64_t x_stride) {
    const std::int64_t r = g_.f->rank, m = g_.m;
    lay_out_b(mf.b, x_stride);
    for (std::int64_t c = 0; c < r; c += 4) {
      alignas(64) std::int32_t dots[4][16];
      xb_dots<4, 1, 4>(xu, x_stride, bt_.data() + c * x_stride, dots, flip_);
      four_sums(dots, col_sum_.data() + c, xb_wide_.data() + c);
    }
    if (mf.a != at_of_) {
      ensure_size(at_, r * m);
      avx512::transpose_bytes(mf.a, m, r, at_.data(), m);
      at_of_ = mf.a;
    }
    std::int64_t total = 0;  // sum_c |xb[c]|: |p| < 128 total
    for (std::int64_t c = 0; c < r; ++c) total += std::abs(static_cast<std::int64_t>(xb_wide_[static_cast<std::size_t>(c)]));
    if (total < (std::int64_t{1} << 24)) {  // p fits int32: 16 outputs a vector
      const __m512i counts = _mm512_set1_epi32(g_.f->shift);
      for (std::int64_t a0 = 0; a0 < m; a0 += 16) {
        const __mmask16 present = static_cast<__mmask16>(byte_mask(m - a0));
        __m512i p = _mm512_setzero_si512();
        for (std::int64_t c = 0; c < r; ++c)
          p = _mm512_add_epi32(p, _mm512_mullo_epi32(_mm512_set1_epi32(xb_wide_[static_cast<std::size_t>(c)]),
                                                     _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(present, at_.data() + c * m + a0))));
        p = _mm512_srav_epi32(p, counts);
        if (mf.sign < 0) p = _mm512_sub_epi32(_mm512_setzero_si512(), p);
        _mm512_storeu_si512(corr_.data() + a0, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(p)));
        _mm512_storeu_si512(corr_.data() + a0 + 8, _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(p, 1)));
      }
      return;
    }
    const __m128i count = _mm_cvtsi32_si128(g_.f->shift);
    for (std::int64_t a0 = 0; a0 < m; a0 += 8) {
      const __mmask16 present = static_cast<__mmask16>(byte_mask(m - a0));
      __m512i p = _mm512_setzero_si512();
      for (std::int64_t c = 0; c < r; ++c)
        p = _mm512_add_epi64(p, _mm512_mul_epi32(_mm512_set1_epi64(xb_wide_[static_cast<std::size_t>(c)]),
                                                 _mm512_cvtepi8_epi64(_mm_maskz_loadu_epi8(present, at_.data() + c * m + a0))));
      p = _mm512_sra_epi64(p, count);
      if (mf.sign < 0) p = _mm512_sub_epi64(_mm512_setzero_si512(), p);
      _mm512_storeu_si512(corr_.data() + a0, p);
    }
  }

  const QmmArgs& g_;
  const std::int32_t* stored_bias_;  // (m64) or null: added to acc as row() reads it
  const __m512i flip_;               // x_flip: what the x . B loads xor their bytes with
  bool short_ = false;               // fused_rows: every x . B of the block fits int16
  ByteWriter writer_;
  std::vector<std::int64_t> corr_;  // (m64 + 16)
  std::vector<std::int64_t> xb64_;  // (r), for ranks above 16
  // the factor block bt_of_ as xb_rows reads it (lay_out_b)
  UnsetVector<std::int8_t>& bt_ = kept_buffer<std::int8_t, 0>();
  const std::int8_t* bt_of_ = nullptr;
  std::vector<std::int32_t> col_sum_;  // max(16, r rounded up to 4) values, zero past the rank
  // sums of A's rows for the factor block a_sum_of_ (a_sums)
  UnsetVector<std::int32_t>& a_sum_ = kept_buffer<std::int32_t, 0>();
  const std::int8_t* a_sum_of_ = nullptr;
  RankLanes lanes_;
  // A fused block's rows: their factors and x . B (zero past the rank), and A as int16 pairs per
  // factor block met (fused_pair_rows).
  MemberFactors block_mf_[kRowBlock];
  alignas(16) std::int32_t xb_[kRowBlock][16] = {};
  UnsetVector<std::int16_t>& a16_ = kept_buffer<std::int16_t, 0>();
  UnsetVector<std::int32_t>& a32_ = kept_buffer<std::int32_t, 1>();  // the fused rank-1 rows' A as int32
  // ranks above 16: x . B (zero past the rank), and A^T (r, m) of the factor block at_of_
  std::vector<std::int32_t> xb_wide_;
  UnsetVector<std::int8_t>& at_ = kept_buffer<std::int8_t, 5>();
  const std::int8_t* at_of_ = nullptr;
};

}  // namespace eggroll::cpu_int8::detail
