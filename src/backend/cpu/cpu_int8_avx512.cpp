// The cpu int8 kernels at the AVX-512 VNNI level (compiled with -mavx512*; chosen at run time when
// the CPU has avx512f/bw/vl/vnni/vbmi). Results equal the scalar level bit for bit (integer math).
#include "backend/int8_ops.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

// GCC 12's AVX-512 headers trip a false -Wmaybe-uninitialized on their own _mm512_undefined
// operands (GCC bug 105593); the warning is about header internals, not this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace eggroll::cpu_int8::detail {
namespace {

// qmm tiling: a tile is kRowTile rows x kColBlocks * 16 outputs of int32 accumulators in registers;
// rows are processed in blocks of kRowBlock so a block's activations and a W panel stay in cache.
constexpr int kRowTile = 6;
constexpr int kColBlocks = 4;
constexpr std::int64_t kRowBlock = 8 * kRowTile;

std::int64_t round_up(std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; }

std::int32_t load_u32(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The operands of one qmm call in the layouts the VNNI kernels read.
struct Packed {
  std::int64_t n_groups = 0;    // k in groups of 4: ceil(n / 4)
  std::int64_t x_stride = 0;    // row stride of xu: n rounded up to 64
  std::int64_t m_blocks = 0;    // outputs in blocks of 16: ceil(m / 16)
  std::vector<std::uint8_t> xu;    // (rows, x_stride): x + 128 as u8, zero padded
  std::vector<std::int8_t> wp;     // (m_blocks, n_groups, 16, 4): W[16 b + l][4 g + q], zero padded
  std::vector<std::int32_t> bias;  // (16 m_blocks): -128 * sum_k W[a][k], undoing the +128 on x
};

// W (m, n) -> the packed blocks and the +128 offset correction, one block of 16 outputs at a time.
void pack_w_block(const QmmArgs& g, Packed& p, std::int64_t blk) {
  std::int8_t* out = p.wp.data() + blk * p.n_groups * 64;
  for (std::int64_t l = 0; l < 16; ++l) {
    const std::int64_t a = blk * 16 + l;
    std::int32_t sum = 0;
    for (std::int64_t k = 0; k < 4 * p.n_groups; ++k) {
      const std::int8_t v = (a < g.m && k < g.n) ? g.w[a * g.n + k] : 0;
      out[(k / 4) * 64 + l * 4 + k % 4] = v;
      sum += v;
    }
    p.bias[blk * 16 + l] = -128 * sum;
  }
}

// acc (RT, 16 CT) = xu rows . packed W panel^T + bias: all n_groups k-groups, registers only.
template <int RT, int CT>
void tile_kernel(const std::uint8_t* xu, std::int64_t x_stride, const std::int8_t* wp, std::int64_t panel,
                 std::int64_t n_groups, const std::int32_t* bias, std::int32_t* acc, std::int64_t acc_stride) {
  __m512i c[RT][CT];
#pragma GCC unroll 8
  for (int i = 0; i < RT; ++i)
#pragma GCC unroll 4
    for (int t = 0; t < CT; ++t) c[i][t] = _mm512_setzero_si512();
  for (std::int64_t grp = 0; grp < n_groups; ++grp) {
    __m512i wv[CT];
#pragma GCC unroll 4
    for (int t = 0; t < CT; ++t) wv[t] = _mm512_loadu_si512(wp + t * panel + grp * 64);
#pragma GCC unroll 8
    for (int i = 0; i < RT; ++i) {
      const __m512i xv = _mm512_set1_epi32(load_u32(xu + i * x_stride + grp * 4));
#pragma GCC unroll 4
      for (int t = 0; t < CT; ++t) c[i][t] = _mm512_dpbusd_epi32(c[i][t], xv, wv[t]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < RT; ++i)
#pragma GCC unroll 4
    for (int t = 0; t < CT; ++t)
      _mm512_storeu_si512(acc + i * acc_stride + t * 16,
                          _mm512_add_epi32(c[i][t], _mm512_loadu_si512(bias + t * 16)));
}

using TileFn = void (*)(const std::uint8_t*, std::int64_t, const std::int8_t*, std::int64_t, std::int64_t,
                        const std::int32_t*, std::int32_t*, std::int64_t);

template <int RT>
TileFn tile_for_cols(int ct) {
  switch (ct) {
    case 1: return tile_kernel<RT, 1>;
    case 2: return tile_kernel<RT, 2>;
    case 3: return tile_kernel<RT, 3>;
    default: return tile_kernel<RT, 4>;
  }
}

TileFn tile_for(int rt, int ct) {
  switch (rt) {
    case 1: return tile_for_cols<1>(ct);
    case 2: return tile_for_cols<2>(ct);
    case 3: return tile_for_cols<3>(ct);
    case 4: return tile_for_cols<4>(ct);
    case 5: return tile_for_cols<5>(ct);
    default: return tile_for_cols<6>(ct);
  }
}


// clip(floor(acc / d)) of 16 int32 accumulators, as FloorClip: clamp, offset, multiply-high.
__m128i floor_clip_i32(__m512i acc, const FloorClip& div) {
  const __m512i lo = _mm512_set1_epi32(static_cast<std::int32_t>(-128 * div.d));
  const __m512i hi = _mm512_set1_epi32(static_cast<std::int32_t>(128 * div.d - 1));
  const __m512i magic = _mm512_set1_epi64(static_cast<std::int64_t>(div.magic));
  const __m512i u = _mm512_sub_epi32(_mm512_min_epi32(_mm512_max_epi32(acc, lo), hi), lo);  // [0, 256 d)
  const __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(u, magic), FloorClip::kShift);
  const __m512i odd = _mm512_srli_epi64(_mm512_mul_epu32(_mm512_srli_epi64(u, 32), magic), FloorClip::kShift);
  const __m512i q = _mm512_sub_epi32(_mm512_or_si512(even, _mm512_slli_epi64(odd, 32)), _mm512_set1_epi32(128));
  return _mm512_cvtepi32_epi8(_mm512_max_epi32(q, _mm512_set1_epi32(-127)));
}

// The same for 8 int64 accumulators; the 8 result bytes are the low half of the return value.
__m128i floor_clip_i64(__m512i acc, const FloorClip& div) {
  const __m512i lo = _mm512_set1_epi64(-128 * div.d);
  const __m512i hi = _mm512_set1_epi64(128 * div.d - 1);
  const __m512i magic = _mm512_set1_epi64(static_cast<std::int64_t>(div.magic));
  const __m512i u = _mm512_sub_epi64(_mm512_min_epi64(_mm512_max_epi64(acc, lo), hi), lo);
  const __m512i q = _mm512_sub_epi64(_mm512_srli_epi64(_mm512_mul_epu32(u, magic), FloorClip::kShift),
                                     _mm512_set1_epi64(128));
  return _mm512_cvtepi64_epi8(_mm512_max_epi64(q, _mm512_set1_epi64(-127)));
}

// The row's output bytes [a0, min(a0 + 16, m)).
__mmask16 tail_mask16(std::int64_t a0, std::int64_t m) {
  const std::int64_t left = m - a0;
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}
__mmask64 byte_mask(std::int64_t count) { return count >= 64 ? ~__mmask64{0} : (__mmask64{1} << count) - 1; }

// xb[c] = x . B[:, c] for rank 1: B is one contiguous column, so 64 k per step; xu is x + 128.
void xb_rank1(const std::uint8_t* xu, std::int64_t x_stride, std::int64_t n, const std::int8_t* b, std::int32_t* xb) {
  __m512i dot = _mm512_setzero_si512(), col = _mm512_setzero_si512();
  const __m512i ones = _mm512_set1_epi8(1);
  for (std::int64_t k = 0; k < x_stride; k += 64) {
    const __m512i bv = _mm512_maskz_loadu_epi8(byte_mask(n - k), b + k);
    dot = _mm512_dpbusd_epi32(dot, _mm512_loadu_si512(xu + k), bv);
    col = _mm512_dpbusd_epi32(col, ones, bv);
  }
  xb[0] = _mm512_reduce_add_epi32(dot) - 128 * _mm512_reduce_add_epi32(col);
}

// xb[c] = x . B[:, c] for 2 <= r <= 16: each group of 4 rows of B (4 r bytes) is permuted so lane c
// holds B[4 g .. 4 g + 3][c], then one vpdpbusd against the broadcast x group covers all c.
void xb_rank_n(const std::uint8_t* xu, std::int64_t n, std::int64_t r, const std::int8_t* b, std::int32_t* xb) {
  alignas(64) std::uint8_t idx_bytes[64] = {};
  for (std::int64_t c = 0; c < r; ++c)
    for (std::int64_t q = 0; q < 4; ++q) idx_bytes[4 * c + q] = static_cast<std::uint8_t>(q * r + c);
  const __m512i idx = _mm512_load_si512(idx_bytes), ones = _mm512_set1_epi8(1);
  const __mmask64 lanes = byte_mask(4 * r);
  __m512i dot[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()}, col[2] = {dot[0], dot[1]};
  const std::int64_t n_groups = (n + 3) / 4;
  for (std::int64_t grp = 0; grp < n_groups; ++grp) {
    const std::int64_t valid_rows = std::min<std::int64_t>(4, n - 4 * grp);
    const __m512i raw = _mm512_maskz_loadu_epi8(byte_mask(valid_rows * r), b + 4 * grp * r);
    const __m512i bv = _mm512_maskz_permutexvar_epi8(lanes, idx, raw);
    const __m512i xv = _mm512_set1_epi32(load_u32(xu + 4 * grp));
    dot[grp & 1] = _mm512_dpbusd_epi32(dot[grp & 1], xv, bv);
    col[grp & 1] = _mm512_dpbusd_epi32(col[grp & 1], ones, bv);
  }
  const __m512i sum = _mm512_sub_epi32(_mm512_add_epi32(dot[0], dot[1]),
                                       _mm512_slli_epi32(_mm512_add_epi32(col[0], col[1]), 7));
  _mm512_mask_storeu_epi32(xb, static_cast<__mmask16>((1u << r) - 1), sum);
}

// corr[a] = s floor((xb . A[a]) / 2^shift) for a < m (int64; rows past m get 0). A block of ab
// outputs (ab r <= 128 bytes) is loaded once and permuted per c into A[a0 + l][c], l < ab.
void corr_from_xb(std::int64_t m, std::int64_t r, int shift, int sign, const std::int8_t* a_mat,
                  const std::int32_t* xb, std::int64_t* corr) {
  const std::int64_t ab = r <= 8 ? 16 : 8;
  alignas(64) std::uint8_t base[64] = {};
  for (std::int64_t l = 0; l < ab; ++l) base[l] = static_cast<std::uint8_t>(l * r);
  const __m512i base_idx = _mm512_load_si512(base);
  const __m128i count = _mm_cvtsi32_si128(shift);
  for (std::int64_t a0 = 0; a0 < m; a0 += ab) {
    const std::int64_t bytes = std::min(ab, m - a0) * r;
    const __m512i v0 = _mm512_maskz_loadu_epi8(byte_mask(bytes), a_mat + a0 * r);
    const __m512i v1 = _mm512_maskz_loadu_epi8(byte_mask(bytes - 64), a_mat + a0 * r + 64);
    __m512i p_lo = _mm512_setzero_si512(), p_hi = _mm512_setzero_si512();
    for (std::int64_t c = 0; c < r; ++c) {
      const __m512i col = _mm512_permutex2var_epi8(v0, _mm512_add_epi8(base_idx, _mm512_set1_epi8(static_cast<char>(c))), v1);
      const __m512i xc = _mm512_set1_epi64(xb[c]);
      p_lo = _mm512_add_epi64(p_lo, _mm512_mul_epi32(xc, _mm512_cvtepi8_epi64(_mm512_castsi512_si128(col))));
      if (ab == 16)
        p_hi = _mm512_add_epi64(p_hi, _mm512_mul_epi32(xc, _mm512_cvtepi8_epi64(_mm_srli_si128(_mm512_castsi512_si128(col), 8))));
    }
    p_lo = _mm512_sra_epi64(p_lo, count);
    p_hi = _mm512_sra_epi64(p_hi, count);
    if (sign < 0) {
      p_lo = _mm512_sub_epi64(_mm512_setzero_si512(), p_lo);
      p_hi = _mm512_sub_epi64(_mm512_setzero_si512(), p_hi);
    }
    _mm512_storeu_si512(corr + a0, p_lo);
    if (ab == 16) _mm512_storeu_si512(corr + a0 + 8, p_hi);
  }
}

// Per thread: turns a row's int32 accumulators into output bytes, adding the member's low-rank
// correction first when the member is perturbed.
class RowEpilogue {
 public:
  RowEpilogue(const QmmArgs& g, std::int64_t m16)
      : g_(g), corr_(static_cast<std::size_t>(m16 + 16)), xb64_(static_cast<std::size_t>(g.f->rank)) {}

  void row(std::int64_t i, const std::int32_t* acc, const std::uint8_t* xu, std::int64_t x_stride) {
    const MemberFactors mf = member_factors(*g_.f, i / g_.batch.rows_per_member);
    std::int8_t* y = g_.y + i * g_.m;
    if (mf.sign == 0) {
      for (std::int64_t a0 = 0; a0 < g_.m; a0 += 16)
        _mm_mask_storeu_epi8(y + a0, tail_mask16(a0, g_.m), floor_clip_i32(_mm512_loadu_si512(acc + a0), g_.div));
      return;
    }
    correction(mf, i, xu, x_stride);
    for (std::int64_t a0 = 0; a0 < g_.m; a0 += 16) {
      const __m512i v = _mm512_loadu_si512(acc + a0);
      const __m512i lo = _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(v)), _mm512_loadu_si512(&corr_[a0]));
      const __m512i hi = _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(v, 1)),
                                          _mm512_loadu_si512(&corr_[a0 + 8]));
      const __m128i bytes = _mm_unpacklo_epi64(floor_clip_i64(lo, g_.div), floor_clip_i64(hi, g_.div));
      _mm_mask_storeu_epi8(y + a0, tail_mask16(a0, g_.m), bytes);
    }
  }

 private:
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
  std::vector<std::int64_t> corr_;  // (m16 + 16)
  std::vector<std::int64_t> xb64_;  // (r), for ranks above 16
};

}  // namespace

void qmm_avx512_vnni(const QmmArgs& g) {
  const std::int64_t rows = g.batch.rows();
  Packed p;
  p.n_groups = (g.n + 3) / 4;
  p.x_stride = round_up(g.n, 64);
  p.m_blocks = (g.m + 15) / 16;
  p.xu.resize(static_cast<std::size_t>(rows * p.x_stride));
  p.wp.resize(static_cast<std::size_t>(p.m_blocks * p.n_groups * 64));
  p.bias.resize(static_cast<std::size_t>(p.m_blocks * 16));
  const std::int64_t m16 = p.m_blocks * 16, n_row_blocks = (rows + kRowBlock - 1) / kRowBlock;
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (std::int64_t blk = 0; blk < p.m_blocks; ++blk) pack_w_block(g, p, blk);
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < rows; ++i) {
      std::uint8_t* out = p.xu.data() + i * p.x_stride;
      for (std::int64_t k = 0; k < g.n; ++k) out[k] = static_cast<std::uint8_t>(g.x[i * g.n + k] ^ 0x80);
      std::fill(out + g.n, out + p.x_stride, std::uint8_t{0});
    }
    RowEpilogue epi(g, m16);
    std::vector<std::int32_t> acc(static_cast<std::size_t>(kRowBlock * m16));
#pragma omp for schedule(static)
    for (std::int64_t rb = 0; rb < n_row_blocks; ++rb) {
      const std::int64_t i0 = rb * kRowBlock, i1 = std::min(rows, i0 + kRowBlock);
      for (std::int64_t b0 = 0; b0 < p.m_blocks; b0 += kColBlocks) {
        const int ct = static_cast<int>(std::min<std::int64_t>(kColBlocks, p.m_blocks - b0));
        for (std::int64_t i = i0; i < i1; i += kRowTile) {
          const int rt = static_cast<int>(std::min<std::int64_t>(kRowTile, i1 - i));
          tile_for(rt, ct)(p.xu.data() + i * p.x_stride, p.x_stride, p.wp.data() + b0 * p.n_groups * 64,
                           p.n_groups * 64, p.n_groups, p.bias.data() + b0 * 16, acc.data() + (i - i0) * m16 + b0 * 16,
                           m16);
        }
      }
      for (std::int64_t i = i0; i < i1; ++i) epi.row(i, acc.data() + (i - i0) * m16, p.xu.data() + i * p.x_stride, p.x_stride);
    }
  }
}

void update_avx512_vnni(const UpdateArgs& args) { update_scalar(args); }

}  // namespace eggroll::cpu_int8::detail
#endif
