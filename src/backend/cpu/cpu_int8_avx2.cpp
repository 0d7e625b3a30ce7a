// The cpu int8 matmul (qmm) at the AVX2 level (compiled with -mavx2; chosen at run time when the CPU
// has AVX2 but not AVX-512 VNNI; the update's kernels: cpu_int8_update_avx2.cpp). int8 operands are widened to int16 and multiplied with vpmaddwd, so no
// product or pair sum can saturate. Results equal the scalar level bit for bit.
#include "backend/cpu/cpu_parallel.hpp"
#include "backend/cpu/line_queue.hpp"
#include "backend/int8_ops.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/int8_planes_avx2.hpp"

namespace eggroll::cpu_int8::detail {
namespace {

using namespace planes_avx2;

// qmm tiling: kRowTile rows x kColBlocks * 8 outputs of int32 accumulators in registers.
constexpr int kRowTile = 6;
constexpr int kColBlocks = 2;
constexpr std::int64_t kRowBlock = 12 * kRowTile;

std::int64_t round_up(std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; }

using avx2::load_u32;

// The calling thread's grow-only buffer `which` of at least n values: reused by its later calls, so
// neither allocated, cleared nor faulted in again (fresh pages cost more than the conversion into
// them).
template <typename T>
T* thread_buffer(int which, std::int64_t n) {
  thread_local UnsetVector<T> buffers[2];
  UnsetVector<T>& v = buffers[which];
  if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

// W of one qmm call as int16 k-pairs: wp (m_blocks, n_pairs, 8, 2) int16 = W[8 blk + l][2 p + e],
// zero padded (the calling thread's buffer, shared by the team). The rows of x are widened a block
// at a time by the thread that computes them (widen_rows).
struct Packed {
  std::int64_t n_pairs = 0, m_blocks = 0;
  std::int16_t* wp = nullptr;
};

// xp (rows i0 .. i1 of x, n_pairs int32 each) = (x[i][2 p], x[i][2 p + 1]) widened to int16, zero
// past n.
void widen_rows(const QmmArgs& g, std::int64_t n_pairs, std::int64_t i0, std::int64_t i1, std::int16_t* xp) {
  for (std::int64_t i = i0; i < i1; ++i) {
    std::int16_t* xi = xp + (i - i0) * 2 * n_pairs;
    const std::int8_t* x = g.x + i * g.n;
    for (std::int64_t k = 0; k < g.n; ++k) xi[k] = x[k];
    if (g.n % 2 != 0) xi[g.n] = 0;
  }
}

void pack_w_block(const QmmArgs& g, Packed& p, std::int64_t blk) {
  std::int16_t* out = p.wp + blk * p.n_pairs * 16;
  for (std::int64_t kp = 0; kp < p.n_pairs; ++kp)
    for (std::int64_t l = 0; l < 8; ++l)
      for (std::int64_t e = 0; e < 2; ++e) {
        const std::int64_t a = blk * 8 + l, k = 2 * kp + e;
        out[kp * 16 + l * 2 + e] = (a < g.m && k < g.n) ? g.w[a * g.n + k] : 0;
      }
}

// acc (RT, 8 CT) = x pairs . packed W panel^T over all k-pairs (flat, fully unrolled accumulators).
template <int RT, int CT>
void tile_kernel(const std::int16_t* xp, std::int64_t x_stride, const std::int16_t* wp, std::int64_t panel,
                 std::int64_t n_pairs, std::int32_t* acc, std::int64_t acc_stride) {
  __m256i c[RT * CT];
#pragma GCC unroll 16
  for (int e = 0; e < RT * CT; ++e) c[e] = _mm256_setzero_si256();
  for (std::int64_t kp = 0; kp < n_pairs; ++kp) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + kp * 16));
    const __m256i w1 = CT > 1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + panel + kp * 16)) : w0;
#pragma GCC unroll 8
    for (int i = 0; i < RT; ++i) {
      const __m256i xv = _mm256_set1_epi32(load_u32(xp + i * x_stride + 2 * kp));
      c[i * CT] = _mm256_add_epi32(c[i * CT], _mm256_madd_epi16(xv, w0));
      if constexpr (CT > 1) c[i * CT + 1] = _mm256_add_epi32(c[i * CT + 1], _mm256_madd_epi16(xv, w1));
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < RT; ++i)
#pragma GCC unroll 2
    for (int t = 0; t < CT; ++t)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + i * acc_stride + t * 8), c[i * CT + t]);
}

using TileFn = void (*)(const std::int16_t*, std::int64_t, const std::int16_t*, std::int64_t, std::int64_t,
                        std::int32_t*, std::int64_t);

TileFn tile_for(int rt, int ct) {
  static const TileFn table[kRowTile][kColBlocks] = {{tile_kernel<1, 1>, tile_kernel<1, 2>},
                                                     {tile_kernel<2, 1>, tile_kernel<2, 2>},
                                                     {tile_kernel<3, 1>, tile_kernel<3, 2>},
                                                     {tile_kernel<4, 1>, tile_kernel<4, 2>},
                                                     {tile_kernel<5, 1>, tile_kernel<5, 2>},
                                                     {tile_kernel<6, 1>, tile_kernel<6, 2>}};
  return table[rt - 1][ct - 1];
}

// y[0 .. 32) (first `count`) = clip(floor(t / D_n)) for 32 int32 values t (in four vectors), as
// FloorClip.
void store32(const __m256i (&t)[4], const FloorClip& div, int shift, std::int8_t* y, std::int64_t count) {
  __m256i q[4];
  for (int v = 0; v < 4; ++v) {
    const __m256i tv = t[v];
    if (shift >= 0) {
      q[v] = _mm256_sra_epi32(tv, _mm_cvtsi32_si128(shift));
      continue;
    }
    const __m256i lo = _mm256_set1_epi32(static_cast<std::int32_t>(-128 * div.d));
    const __m256i hi = _mm256_set1_epi32(static_cast<std::int32_t>(128 * div.d - 1));
    const __m256i magic = _mm256_set1_epi64x(static_cast<std::int64_t>(div.magic));
    const __m256i u = _mm256_sub_epi32(_mm256_min_epi32(_mm256_max_epi32(tv, lo), hi), lo);
    const __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(u, magic), FloorClip::kShift);
    const __m256i odd = _mm256_srli_epi64(_mm256_mul_epu32(_mm256_srli_epi64(u, 32), magic), FloorClip::kShift);
    q[v] = _mm256_sub_epi32(_mm256_or_si256(even, _mm256_slli_epi64(odd, 32)), _mm256_set1_epi32(128));
  }
  // packs work per 128-bit lane: lane L holds q0[4L..], q1[4L..], q2[4L..], q3[4L..] (4 bytes each)
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  const __m256i ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  const __m256i clipped = _mm256_max_epi8(ordered, _mm256_set1_epi8(-127));
  if (count >= 32) {  // stored directly: a copy out of a stack buffer waits on the store before it
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), clipped);
    return;
  }
  alignas(32) std::int8_t out[32];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), clipped);
  std::memcpy(y, out, static_cast<std::size_t>(count));
}

// store32 of 32 int32 values in memory.
void store32(const std::int32_t* t, const FloorClip& div, int shift, std::int8_t* y, std::int64_t count) {
  __m256i tv[4];
  for (int v = 0; v < 4; ++v) tv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + 8 * v));
  store32(tv, div, shift, y, count);
}

// A row's int32 accumulators (m32 of them) -> bytes, with the member's correction (int64, scalar)
// added and saturated to int32 first when the member is perturbed.
class RowEpilogue {
 public:
  RowEpilogue(const QmmArgs& g, std::int64_t m32)
      : g_(g), t_(static_cast<std::size_t>(m32)), p_(static_cast<std::size_t>(g.m)),
        at_(plane_rank(g.f->rank) ? 0 : static_cast<std::size_t>(g.f->rank * g.m)),
        xb32_(static_cast<std::size_t>(g.f->rank)), bt_(static_cast<std::size_t>(g.f->rank * g.n)),
        ap_(plane_rank(g.f->rank) ? static_cast<std::size_t>(g.f->rank * g.m) : 0),
        corr_(static_cast<std::size_t>(m32)), xb_(static_cast<std::size_t>(g.f->rank)) {
    for (int s = 0; s < 31; ++s)
      if (g.div.d == (std::int64_t{1} << s)) shift_ = s;
  }
  void row(std::int64_t i, std::int32_t* acc) {
    const MemberFactors mf = member_factors(*g_.f, i / g_.batch.rows_per_member);
    std::int8_t* y = g_.y + i * g_.m;
    const std::int32_t* t = acc;  // the unperturbed row's values, else the buffer's
    if (mf.sign != 0) {
      const int done = rank_int32(mf, g_.x + i * g_.n, acc, y);
      if (done == kStored) return;
      if (done == kOutOfBound) {
        lowrank_row_scalar(g_.m, g_.n, g_.f->rank, g_.f->shift, mf, g_.x + i * g_.n, xb_.data(), corr_.data());
        for (std::int64_t a = 0; a < g_.m; ++a)
          t_[a] = static_cast<std::int32_t>(std::clamp<std::int64_t>(acc[a] + corr_[a], INT32_MIN, INT32_MAX));
      }
      t = t_.data();
    }
    for (std::int64_t a0 = 0; a0 < g_.m; a0 += 32) store32(t + a0, g_.div, shift_, y + a0, g_.m - a0);
  }

 private:
  // Any rank, with n <= 65,536 and sum_c |x . B[:, c]| < 2^23: p = (x . B) . A[a] is exact in int32
  // (|p| < 2^23 127 < 2^30) and so is t = acc + s floor(p / 2^S) (as the AVX-512 level's int32
  // path). B^T and A^T, widened once per factor block met (a member's rows, or a pair's, share
  // it), make both products loops over contiguous values that the compiler vectorises (at ranks 2,
  // 4, 8, 16 A^T as planes of rank pairs, for planes_int32). At rank 1 and at those ranks the
  // row's bytes go from registers into y (kStored); at the others t is left in t_ (kInBuffer).
  // kOutOfBound when the bounds do not hold (the caller then takes the int64 path).
  static constexpr int kOutOfBound = 0, kInBuffer = 1, kStored = 2;
  int rank_int32(const MemberFactors& mf, const std::int8_t* x, const std::int32_t* acc, std::int8_t* y) {
    const std::int64_t r = g_.f->rank, n = g_.n, m = g_.m;
    if (n > 65536) return kOutOfBound;
    const int shift = g_.f->shift, sign = mf.sign;
    if (r == 1) {  // B and A are contiguous already: no widened copies, one pass over the outputs
      std::int32_t xb = 0;
      for (std::int64_t k = 0; k < n; ++k) xb += std::int32_t{x[k]} * mf.b[k];
      if (xb <= -(1 << 23) || xb >= (1 << 23)) return kOutOfBound;
      const __m256i xbv = _mm256_set1_epi32(xb), sv = _mm256_set1_epi32(sign);
      const __m128i sh = _mm_cvtsi32_si128(shift);
      store_row(
          [&](std::int64_t e) {
            const __m256i a = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mf.a + e)));
            const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + e));
            return _mm256_add_epi32(av, _mm256_sign_epi32(_mm256_sra_epi32(_mm256_mullo_epi32(xbv, a), sh), sv));
          },
          [&](std::int64_t e) { return acc[e] + sign * ((xb * mf.a[e]) >> shift); }, y);
      return kStored;
    }
    if (mf.b != widened_) {
      widened_ = mf.b;
      const bool shuffled = with_plane_rank(r, [&](auto rank) {
        widen_planes<decltype(rank)::value>(mf.b, n, bt_.data());
        widen_pair_planes<decltype(rank)::value>(mf.a, m, ap_.data());
      });
      if (!shuffled)
        for (std::int64_t c = 0; c < r; ++c) {
          for (std::int64_t k = 0; k < n; ++k) bt_[c * n + k] = mf.b[k * r + c];
          for (std::int64_t a = 0; a < m; ++a) at_[c * m + a] = mf.a[a * r + c];
        }
    }
    int planes = 0;  // R = 2, 4, 8, 16: 1 done, -1 out of int32's bound
    with_plane_rank(r, [&](auto rank) { planes = planes_int32<decltype(rank)::value>(mf.sign, x, acc, y); });
    if (planes != 0) return planes > 0 ? kStored : kOutOfBound;
    std::int64_t total = 0;
    for (std::int64_t c = 0; c < r; ++c) {
      const std::int16_t* b = bt_.data() + c * n;
      std::int32_t dot = 0;  // |dot| <= 2^14 n <= 2^30
      for (std::int64_t k = 0; k < n; ++k) dot += std::int32_t{x[k]} * std::int32_t{b[k]};
      xb32_[c] = dot;
      total += dot < 0 ? -std::int64_t{dot} : dot;
    }
    if (total >= (1 << 23)) return kOutOfBound;
    std::fill(p_.begin(), p_.end(), 0);
    for (std::int64_t c = 0; c < r; ++c) {
      const std::int32_t xb = xb32_[c];
      const std::int32_t* a = at_.data() + c * m;
      for (std::int64_t e = 0; e < m; ++e) p_[e] += xb * a[e];
    }
    for (std::int64_t e = 0; e < m; ++e) t_[e] = acc[e] + sign * (p_[e] >> shift);
    return kInBuffer;
  }

  // y (the row's m bytes) from t, 8 values at an output e (a multiple of 8) from t8(e), one from
  // t1(e): 32 outputs a store32 from registers while 32 remain, the last ones through t_.
  template <class T8, class T1>
  void store_row(const T8& t8, const T1& t1, std::int8_t* y) {
    const std::int64_t m = g_.m, m32 = m / 32 * 32;
    for (std::int64_t e = 0; e < m32; e += 32) {
      const __m256i tv[4] = {t8(e), t8(e + 8), t8(e + 16), t8(e + 24)};
      store32(tv, g_.div, shift_, y + e, 32);
    }
    if (m32 == m) return;
    std::int64_t e = m32;
    for (; e + 8 <= m; e += 8) _mm256_storeu_si256(reinterpret_cast<__m256i*>(t_.data() + e), t8(e));
    for (; e < m; ++e) t_[e] = t1(e);
    store32(t_.data() + m32, g_.div, shift_, y + m32, m - m32);
  }

  // rank_int32 for R = 2, 4, 8, 16 from the widened planes: the R dot products x . B in passes over
  // x of up to 8 columns (vpmaddwd on int16), then per 8 outputs the rank sum (vpmaddwd on rank
  // pairs), shift, sign and accumulator add in registers, and the row's bytes stored into y. 1 when
  // done, -1 when the int32 bound does not hold (nothing written).
  template <int R>
  int planes_int32(int sign, const std::int8_t* x, const std::int32_t* acc, std::int8_t* y) {
    const std::int64_t n = g_.n, m = g_.m;
    constexpr int G = R < 8 ? R : 8;  // columns a pass over x: their sums, x and B's vector in registers
    const std::int64_t n16 = n / 16 * 16;
    std::int32_t xb[R];
    std::int64_t total = 0;
    for (int c0 = 0; c0 < R; c0 += G) {
      __m256i s[G];
      for (int c = 0; c < G; ++c) s[c] = _mm256_setzero_si256();
      for (std::int64_t k = 0; k < n16; k += 16) {
        const __m256i xv = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + k)));
        for (int c = 0; c < G; ++c) {
          const __m256i bv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bt_.data() + (c0 + c) * n + k));
          s[c] = _mm256_add_epi32(s[c], _mm256_madd_epi16(xv, bv));
        }
      }
      for (int c = 0; c < G; ++c) {
        alignas(32) std::int32_t lane[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(lane), s[c]);
        std::int32_t dot = 0;  // |dot| <= 2^14 n <= 2^30
        for (int l = 0; l < 8; ++l) dot += lane[l];
        for (std::int64_t q = n16; q < n; ++q) dot += std::int32_t{x[q]} * bt_[(c0 + c) * n + q];
        xb[c0 + c] = dot;
        total += dot < 0 ? -std::int64_t{dot} : dot;
      }
    }
    if (total >= (1 << 23)) return -1;
    // p = (x . B) . A[e] by vpmaddwd on the rank pairs: x . B as int16 pairs when every |x . B[:, c]|
    // < 2^15, else split in hi = xb >> 8 (|hi| <= 2^15) and lo = xb & 255 with p = 256 P(hi) + P(lo):
    // every partial sum is within int32 since p and P(lo) (<= 255 128 R) are.
    bool split = false;
    for (int c = 0; c < R; ++c) split = split || xb[c] < -(1 << 15) || xb[c] >= (1 << 15);
    __m256i hi[R / 2], lo[R / 2];
    const auto pair = [](std::int32_t a, std::int32_t b) {
      return _mm256_set1_epi32(static_cast<std::int32_t>((static_cast<std::uint32_t>(a) & 0xFFFF) |
                                                         (static_cast<std::uint32_t>(b) << 16)));
    };
    for (int q = 0; q < R / 2; ++q) {
      const std::int32_t a = xb[2 * q], b = xb[2 * q + 1];
      hi[q] = split ? pair(a >> 8, b >> 8) : pair(a, b);
      lo[q] = pair(a & 255, b & 255);
    }
    const __m128i shift = _mm_cvtsi32_si128(g_.f->shift);
    const __m256i sv = _mm256_set1_epi32(sign);
    const std::int16_t* ap = ap_.data();
    const auto a_pairs = [&](int q, std::int64_t e) {
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ap + q * 2 * m + 2 * e));
    };
    store_row(
        [&](std::int64_t e) {
          __m256i pv = _mm256_setzero_si256();
          for (int q = 0; q < R / 2; ++q) pv = _mm256_add_epi32(pv, _mm256_madd_epi16(hi[q], a_pairs(q, e)));
          if (split) {
            __m256i pl = _mm256_setzero_si256();
            for (int q = 0; q < R / 2; ++q) pl = _mm256_add_epi32(pl, _mm256_madd_epi16(lo[q], a_pairs(q, e)));
            pv = _mm256_add_epi32(_mm256_slli_epi32(pv, 8), pl);
          }
          const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + e));
          return _mm256_add_epi32(av, _mm256_sign_epi32(_mm256_sra_epi32(pv, shift), sv));
        },
        [&](std::int64_t e) {
          std::int32_t pe = 0;
          for (int c = 0; c < R; ++c) pe += xb[c] * ap[(c / 2) * 2 * m + 2 * e + c % 2];
          return acc[e] + sign * (pe >> g_.f->shift);
        },
        y);
    return 1;
  }

  const QmmArgs& g_;
  int shift_ = -1;  // log2 D_n when D_n is a power of two
  std::vector<std::int32_t> t_, p_, at_, xb32_;  // at_: A^T at the ranks without pair planes
  std::vector<std::int16_t> bt_, ap_;            // ap_: A's rank pairs at the plane ranks
  const std::int8_t* widened_ = nullptr;  // the factor block bt_ and at_ or ap_ hold
  std::vector<std::int64_t> corr_, xb_;
};

}  // namespace

void qmm_avx2(const QmmArgs& g) {
  const std::int64_t rows = g.batch.rows();
  Packed p;
  p.n_pairs = (g.n + 1) / 2;
  p.m_blocks = (g.m + 7) / 8;
  p.wp = thread_buffer<std::int16_t>(1, p.m_blocks * p.n_pairs * 16);
  const std::int64_t m32 = round_up(g.m, 32), n_tiles = (rows + kRowTile - 1) / kRowTile;
  cpu_parallel::team(rows * g.m * g.n > kParallelMinWork, [&](std::int64_t t, std::int64_t n_threads) {
    const auto [b0, b1] = cpu_parallel::share(p.m_blocks, t, n_threads);
    for (std::int64_t blk = b0; blk < b1; ++blk) pack_w_block(g, p, blk);
    cpu_parallel::barrier(n_threads);  // W packed before any tile
    const std::int64_t begin = std::min(rows, n_tiles * t / n_threads * kRowTile);
    const std::int64_t end = std::min(rows, n_tiles * (t + 1) / n_threads * kRowTile);
    RowEpilogue epi(g, m32);
    std::int32_t* acc = thread_buffer<std::int32_t>(0, kRowBlock * m32);  // this team thread's own
    // this team thread's own too: its block's rows of x, widened while they are in cache (all rows
    // at once, before the tiles, wrote and reread megabytes: docs/results.md, "Masked loads and
    // stores on a Zen 3")
    std::int16_t* xp = thread_buffer<std::int16_t>(0, kRowBlock * 2 * p.n_pairs);
    cpu::LineQueue ahead;  // the next block's factor blocks and addend, fetched among this block's tiles
    queue_block(g, begin, std::min(end, begin + kRowBlock), ahead);
    ahead.pump(-1);
    const std::int64_t tiles_per_block = (kRowBlock / kRowTile) * ((p.m_blocks + kColBlocks - 1) / kColBlocks);
    for (std::int64_t i0 = begin; i0 < end; i0 += kRowBlock) {
      const std::int64_t i1 = std::min(end, i0 + kRowBlock);
      queue_block(g, i1, std::min(end, i1 + kRowBlock), ahead);
      widen_rows(g, p.n_pairs, i0, i1, xp);
      const std::int64_t per_tile = (ahead.lines_left() + tiles_per_block - 1) / tiles_per_block;
      for (std::int64_t b0 = 0; b0 < p.m_blocks; b0 += kColBlocks) {
        const int ct = static_cast<int>(std::min<std::int64_t>(kColBlocks, p.m_blocks - b0));
        for (std::int64_t i = i0; i < i1; i += kRowTile, ahead.pump(per_tile))
          tile_for(static_cast<int>(std::min<std::int64_t>(kRowTile, i1 - i)), ct)(
              xp + (i - i0) * 2 * p.n_pairs, 2 * p.n_pairs, p.wp + b0 * p.n_pairs * 16, p.n_pairs * 16, p.n_pairs,
              acc + (i - i0) * m32 + b0 * 8, m32);
      }
      ahead.pump(-1);
      for (std::int64_t i = i0; i < i1; ++i) epi.row(i, acc + (i - i0) * m32);
      add_addend(g, i0, i1);
    }
  });
}

}  // namespace eggroll::cpu_int8::detail
#endif
