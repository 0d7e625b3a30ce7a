// The fp32 GEMM at the AVX-512F level (compiled with -mavx512f -mfma; chosen at run time when the
// CPU has avx512f): 6 rows x 64 outputs of zmm accumulators per micro-tile (12 x 4 in xmm for
// m <= 4), the blocked driver of cpu_sgemm_blocked.hpp. Same bits as the scalar level (one FMA
// chain per element over k).
#include "backend/cpu/cpu_sgemm.hpp"

#if defined(__x86_64__)
// GCC 12's AVX-512 shuffle intrinsics pass _mm512_undefined_ps() as the merge source, which
// -Wmaybe-uninitialized reports inside the header (GCC bug 105593), not in this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "backend/cpu/avx512_columns.hpp"
#include "backend/cpu/cpu_sgemm_blocked.hpp"

namespace eggroll::cpu_sgemm::detail {
namespace {

// 16-lane zmm traits for Blocked (cpu_sgemm_blocked.hpp). 6 x 4 accumulators + 4 panel vectors
// + 1 broadcast = 29 of the 32 zmm registers: per k, 4 loads and 6 broadcasts feed 24 FMAs (12 x 2
// took 2 loads and 12 broadcasts, and ran the large model 7-8% slower on a Zen 4).
struct Zmm {
  using Reg = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kNv = 4;
  static constexpr int kMr = 6;

  static __mmask16 first_lanes(int count) {
    return count >= 16 ? static_cast<__mmask16>(0xFFFF)
                       : (count <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << count) - 1u));
  }
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static Reg broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg relu(Reg v) { return _mm512_max_ps(v, zero()); }  // 0 for NaN (the second operand)
  static Reg load_first(const float* p, int count) { return _mm512_maskz_loadu_ps(first_lanes(count), p); }
  static Reg rank_fma(const float* p, std::int64_t rank, int count, const float* s, Reg acc) {
    if (avx512::with_power_of_two_rank(rank, [&](auto r) { acc = avx512::rank_fma<decltype(r)::value>(p, count, s, acc); }))
      return acc;
    const __m512i index = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                             _mm512_set1_epi32(static_cast<int>(rank)));
    for (std::int64_t c = 0; c < rank; ++c)
      acc = fma(broadcast(s + c), _mm512_mask_i32gather_ps(zero(), first_lanes(count), index, p + c, 4), acc);
    return acc;
  }
  static void store_first(float* p, Reg v, int count) { _mm512_mask_storeu_ps(p, first_lanes(count), v); }
  static void transpose(Reg r[16]) { avx512::transpose16(r); }
  template <int R>
  static void columns(const float* p, Reg (&out)[R]) { avx512::columns<R>(p, kLanes, out); }
  // A row's four x . B chains added as the level's rank-1 x . B adds its own (cpu_float_avx512.cpp,
  // dot_rows): the pairs, then the pair sums, then the lanes.
  static float xb_sum(const float* chains) {
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(load(chains), load(chains + 16)),
                                              _mm512_add_ps(load(chains + 32), load(chains + 48))));
  }
};

// 4-lane xmm traits for outputs m <= 4 (the small MLP's 2 outputs). The per-element chain is
// the same; only the width differs: a zmm tile would spend 16 lanes on m outputs, and on CPUs
// that split a zmm FMA into two 256-bit halves (AMD Zen 4) xmm FMAs issue twice as often.
struct Xmm {
  using Reg = __m128;
  static constexpr int kLanes = 4;
  static constexpr int kNv = 1;
  static constexpr int kMr = 12;

  // All-ones in lanes < count: the mask operand of vmaskmovps.
  static __m128i first_lanes(int count) { return _mm_cmpgt_epi32(_mm_set1_epi32(count), _mm_setr_epi32(0, 1, 2, 3)); }
  static Reg zero() { return _mm_setzero_ps(); }
  static Reg load(const float* p) { return _mm_loadu_ps(p); }
  static Reg broadcast(const float* p) { return _mm_broadcast_ss(p); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm_fmadd_ps(a, b, c); }
  static void store(float* p, Reg v) { _mm_storeu_ps(p, v); }
  static Reg add(Reg a, Reg b) { return _mm_add_ps(a, b); }
  static Reg relu(Reg v) { return _mm_max_ps(v, zero()); }  // 0 for NaN (the second operand)
  static Reg load_first(const float* p, int count) { return _mm_maskload_ps(p, first_lanes(count)); }
  static Reg rank_fma(const float* p, std::int64_t rank, int count, const float* s, Reg acc) {
    const __m128i index = _mm_mullo_epi32(_mm_setr_epi32(0, 1, 2, 3), _mm_set1_epi32(static_cast<int>(rank)));
    for (std::int64_t c = 0; c < rank; ++c)
      acc = fma(broadcast(s + c), _mm_mask_i32gather_ps(zero(), p + c, index, _mm_castsi128_ps(first_lanes(count)), 4), acc);
    return acc;
  }
  static void store_first(float* p, Reg v, int count) { _mm_maskstore_ps(p, first_lanes(count), v); }
  static void transpose(Reg r[4]) {
    const Reg t0 = _mm_unpacklo_ps(r[0], r[1]), t1 = _mm_unpackhi_ps(r[0], r[1]);
    const Reg t2 = _mm_unpacklo_ps(r[2], r[3]), t3 = _mm_unpackhi_ps(r[2], r[3]);
    r[0] = _mm_movelh_ps(t0, t2);
    r[1] = _mm_movehl_ps(t2, t0);
    r[2] = _mm_movelh_ps(t1, t3);
    r[3] = _mm_movehl_ps(t3, t1);
  }
};

}  // namespace

void gemm_nt_avx512(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w, float* y,
                    const RowFinish* finish, const PackedWeights* packed) {
  if (m <= Xmm::kLanes) return Blocked<Xmm>::run(rows, m, n, x, w, y, nullptr, finish, packed);
  Blocked<Zmm>::run(rows, m, n, x, w, y, nullptr, finish, packed);
}

void gemm_nt_lowrank_avx512(std::int64_t rows, std::int64_t m, std::int64_t n, const float* x, const float* w,
                            const LowRankEpilogue& e, float* y, const RowFinish* finish,
                            const PackedWeights* packed) {
  if (m <= Xmm::kLanes) return Blocked<Xmm>::run(rows, m, n, x, w, y, &e, finish, packed);
  Blocked<Zmm>::run(rows, m, n, x, w, y, &e, finish, packed);
}

std::shared_ptr<const PackedWeights> pack_avx512(std::int64_t m, std::int64_t n) {
  if (m <= Xmm::kLanes) return Blocked<Xmm>::pack_with(m, n);
  return Blocked<Zmm>::pack_with(m, n);
}

}  // namespace eggroll::cpu_sgemm::detail
#endif
