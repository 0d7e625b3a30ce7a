// The cpu backend's int8 ops (ALGORITHM.md section 2): the SIMD level chosen once at run time,
// the elementwise ops (OpenMP over rows), and the scalar-level qmm and update kernels.
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <typeinfo>
#include <vector>

#include "backend/cpu/cpu_int8_amx.hpp"
#include "backend/cpu/cpu_parallel.hpp"
#include "backend/cpu/line_queue.hpp"
#include "backend/int8_ops.hpp"
#include "core/simd_choice.hpp"
#include "eggroll/core/error.hpp"
#include "eggroll/quant/qmath.hpp"

namespace eggroll::cpu_int8 {
namespace {

using q::clip8;

// The best level this machine runs (and this build compiled).
SimdChoice::Level detect_level() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi"))
    return detail::amx_usable() ? SimdChoice::above_avx512 : SimdChoice::avx512;
  if (__builtin_cpu_supports("avx2")) return SimdChoice::avx2;
#endif
  return SimdChoice::scalar;
}

SimdChoice& choice() {
  static SimdChoice c("cpu int8", "avx512_vnni", detect_level(), "avx512_amx");
  return c;
}

SimdChoice::Level current_level() { return choice().level(); }

// avx512_vnni or avx512_amx: the AVX-512 kernels run at both (AMX only accumulates qmm's tiles).
bool at_avx512() { return current_level() >= SimdChoice::avx512; }

}  // namespace

const char* level() { return choice().name(); }

// Also accepts run.simd's spellings: "auto" (the detected level) and "avx512" (= avx512_vnni).
void set_level(const char* name) { choice().set(name); }

std::vector<std::string> levels() { return choice().levels(); }

bool amx_available() { return choice().levels().back() == "avx512_amx"; }

namespace detail {

void lowrank_row_scalar(std::int64_t m, std::int64_t n, std::int64_t r, int shift, const MemberFactors& mf,
                        const std::int8_t* x, std::int64_t* xb, std::int64_t* corr) {
  for (std::int64_t c = 0; c < r; ++c) xb[c] = 0;
  for (std::int64_t k = 0; k < n; ++k)
    for (std::int64_t c = 0; c < r; ++c) xb[c] += std::int32_t{x[k]} * mf.b[k * r + c];
  for (std::int64_t a = 0; a < m; ++a) {
    std::int64_t p = 0;
    for (std::int64_t c = 0; c < r; ++c) p += xb[c] * mf.a[a * r + c];
    corr[a] = mf.sign * (p >> shift);  // arithmetic shift = floor(p / 2^shift)
  }
}

// Per row: int32 dot products (exact for n <= 133,143), the member's correction, FloorClip.
void qmm_scalar(const QmmArgs& g) {
  const std::int64_t m = g.m, n = g.n, r = g.f->rank;
  cpu_parallel::team(g.batch.rows() * m * n > kParallelMinWork, [&](std::int64_t t, std::int64_t nt) {
    std::vector<std::int64_t> corr(static_cast<std::size_t>(m)), xb(static_cast<std::size_t>(r));
    const auto [first, last] = cpu_parallel::share(g.batch.rows(), t, nt);
    for (std::int64_t i = first; i < last; ++i) {
      const std::int8_t* xi = g.x + i * n;
      const MemberFactors mf = member_factors(*g.f, i / g.batch.rows_per_member);
      if (mf.sign != 0) lowrank_row_scalar(m, n, r, g.f->shift, mf, xi, xb.data(), corr.data());
      for (std::int64_t a = 0; a < m; ++a) {
        const std::int8_t* wa = g.w + a * n;
        std::int32_t acc = 0;
        for (std::int64_t k = 0; k < n; ++k) acc += std::int32_t{xi[k]} * wa[k];
        g.y[i * m + a] = g.div(mf.sign != 0 ? acc + corr[a] : acc);
      }
      add_addend(g, i, i + 1);
    }
  });
}

void add_row_scalar(std::int64_t d, const std::int8_t* a, const std::int8_t* b, const std::int8_t* v, std::int8_t* y) {
  for (std::int64_t k = 0; k < d; ++k) {
    const std::int32_t s = a[k] + (b != nullptr ? b[k] : 0) + (v != nullptr ? v[k] : 0);
    y[k] = static_cast<std::int8_t>(s < -127 ? -127 : (s > 127 ? 127 : s));
  }
}

void add_addend(const QmmArgs& g, std::int64_t i0, std::int64_t i1) {
  if (g.add.empty()) return;
  const bool avx512 = at_avx512();
  for (std::int64_t i = i0; i < i1; ++i) {
    std::int8_t* yi = g.y + i * g.m;
    const std::int8_t* ri = g.add.rows != nullptr ? g.add.rows + i * g.m : nullptr;
    const std::int8_t* vi = g.add.vec != nullptr ? g.add.vec + (i / g.batch.rows_per_member) * g.add.vec_stride : nullptr;
#if defined(__x86_64__)
    if (avx512) {
      qadd_row_avx512(g.m, yi, ri, vi, yi);
      continue;
    }
#endif
    add_row_scalar(g.m, yi, ri, vi, yi);
  }
}

void queue_block(const QmmArgs& g, std::int64_t i0, std::int64_t i1, cpu::LineQueue& queue) {
  queue.clear();
  if (i0 >= i1) return;
  if (g.add.rows != nullptr) queue.add(g.add.rows + i0 * g.m, (i1 - i0) * g.m);
  if (g.f->blocks == nullptr && g.add.vec == nullptr) return;
  const std::int8_t* last = nullptr;
  for (std::int64_t j = i0 / g.batch.rows_per_member; j <= (i1 - 1) / g.batch.rows_per_member; ++j) {
    if (g.add.vec != nullptr && g.add.vec_stride != 0) queue.add(g.add.vec + j * g.add.vec_stride, g.m);
    const MemberFactors mf = member_factors(*g.f, j);
    if (mf.sign == 0 || mf.b == last) continue;
    last = mf.b;
    queue.add(mf.b, g.f->rank * (g.n + g.m));
  }
}

void update_dispatch(const UpdateArgs& args) {
  switch (current_level()) {
#if defined(__x86_64__)
    case SimdChoice::above_avx512:
    case SimdChoice::avx512: return update_avx512_vnni(args);
    case SimdChoice::avx2: return update_avx2(args);
#endif
    default: return update_scalar(args);
  }
}

bool update_signs_dispatch(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                           const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t* z) {
#if defined(__x86_64__)
  if (current_level() == SimdChoice::above_avx512 && update_signs_amx(m, n, r, n_pairs, blocks, d, z)) return true;
  if (at_avx512()) return update_signs_avx512_vnni(m, n, r, n_pairs, blocks, d, z);
  if (current_level() == SimdChoice::avx2) return update_signs_avx2(m, n, r, n_pairs, blocks, d, z);
#endif
  return false;
}

bool apply_signs_dispatch(std::int64_t m, std::int64_t n, std::int64_t r, std::int64_t n_pairs,
                          const std::int8_t* const* blocks, const std::int8_t* d, std::int64_t threshold,
                          std::int8_t* w, std::int64_t* moved) {
#if defined(__x86_64__)
  if (at_avx512() && current_level() != SimdChoice::above_avx512)
    return apply_signs_avx512_vnni(m, n, r, n_pairs, blocks, d, threshold, w, moved);
#endif
  return false;
}

bool pack_b_pairs_available(std::int64_t r) {
#if defined(__x86_64__)
  return current_level() != SimdChoice::scalar && (r == 2 || r == 4 || r == 8 || r == 16);
#else
  return false;
#endif
}

std::int64_t pack_b_rank1_dispatch(const std::int8_t* b0, const std::int8_t* b1, std::int64_t jp, const UpdateArgs& g,
                                   std::int16_t* bp) {
#if defined(__x86_64__)
  if (current_level() != SimdChoice::scalar) return pack_b_rank1_avx2(b0, b1, jp, g, bp);
#endif
  return 0;
}

bool pack_coef_pairs_dispatch(std::int64_t r, const std::int8_t* const* a_of, const std::int16_t* dk,
                              std::int64_t pairs, std::int64_t a0, std::int64_t a1, std::int64_t width,
                              std::int16_t* coef) {
#if defined(__x86_64__)
  if (current_level() != SimdChoice::scalar && (r == 1 || r == 4 || r == 8 || r == 16)) {
    pack_coef_pairs_avx2(r, a_of, dk, pairs, a0, a1, width, coef);
    return true;
  }
#endif
  return false;
}

}  // namespace detail

std::shared_ptr<const PackedWeights> qpack(std::int64_t m, std::int64_t n, const std::int8_t* w) {
#if defined(__x86_64__)
  if (at_avx512() && m > 0 && n > 0) return detail::pack_avx512_vnni(m, n, w);
#endif
  return nullptr;
}

void qmm(const MemberRows& batch, std::int64_t m, std::int64_t n, const std::int8_t* x, const std::int8_t* w,
         const QFactors& f, std::int8_t* y, const QAddend& add, const PackedWeights* packed) {
  check(n <= 133143, "qmm: input width n = ", n, ", expected <= 133,143 (int32 accumulation, ALGORITHM.md 2.1)");
  if (f.blocks != nullptr)
    check(f.m == m && f.n == n && f.rank >= 1 && f.shift >= 0 && f.shift < 63, "qmm: factors are for (", f.m, ", ",
          f.n, ") at rank ", f.rank, " shift ", f.shift, ", expected (", m, ", ", n, ") at rank >= 1, shift 0 .. 62");
  if (batch.rows() == 0 || m == 0) return;
  // packed weights of another backend or level are not this kernel's layout: pack W again then
  // (PackedW is final: comparing the type is exact, and cheaper than a dynamic_cast in every call)
  const auto* pw = packed != nullptr && typeid(*packed) == typeid(detail::PackedW)
                       ? static_cast<const detail::PackedW*>(packed) : nullptr;
  if (pw != nullptr)
    check(pw->m == m && pw->n == n, "qmm: packed weights are for (", pw->m, ", ", pw->n, "), expected (", m, ", ", n, ")");
  QFactors none;
  const detail::QmmArgs args{batch, m, n, x, w, f.blocks != nullptr ? &f : &none, y, FloorClip(qmm_divisor(n)), add, pw};
  switch (current_level()) {
#if defined(__x86_64__)
    // a single 64-byte k-step per tile leaves AMX no faster than the VNNI tiles' in-register epilogue
    // (docs/results.md, "The int8 matmul on AMX tiles")
    case SimdChoice::above_avx512: return detail::qmm_avx512_vnni(args, n >= 128);
    case SimdChoice::avx512: return detail::qmm_avx512_vnni(args, false);
    case SimdChoice::avx2: return detail::qmm_avx2(args);
#endif
    default: return detail::qmm_scalar(args);
  }
}

void qembedding(const MemberRows& batch, std::int64_t vocab, std::int64_t d, const std::int32_t* tokens,
                const std::int8_t* w, const QFactors& f, std::int8_t* y) {
  if (f.blocks != nullptr)
    check(f.m == vocab && f.n == d && f.rank >= 1 && f.shift >= 0 && f.shift < 63, "qembedding: factors are for (",
          f.m, ", ", f.n, ") at rank ", f.rank, ", expected (", vocab, ", ", d, ") at rank >= 1, shift 0 .. 62");
  for (std::int64_t i = 0; i < batch.rows(); ++i)
    check(tokens[i] >= 0 && tokens[i] < vocab, "qembedding: token ", tokens[i], " at row ", i, ", expected 0 .. ",
          vocab - 1);
  const std::int64_t r = f.rank;
  const bool avx512 = at_avx512();
  cpu_parallel::for_each(batch.rows(), batch.rows() * d * r > detail::kParallelMinWork, [&](std::int64_t i) {
    const std::int64_t t = tokens[i];
    const detail::MemberFactors mf = detail::member_factors(f, i / batch.rows_per_member);
    const std::int8_t* wt = w + t * d;
    std::int8_t* yi = y + i * d;
    if (mf.sign == 0) {
      std::memcpy(yi, wt, static_cast<std::size_t>(d));
      return;
    }
    const std::int8_t* at = mf.a + t * r;
#if defined(__x86_64__)
    if (avx512 && r == 1) {
      detail::qembedding_rank1_row_avx512(d, wt, at[0], mf.b, mf.sign, f.shift, yi);
      return;
    }
#endif
    for (std::int64_t k = 0; k < d; ++k) {
      std::int32_t p = 0;  // |p| <= 128^2 r
      for (std::int64_t c = 0; c < r; ++c) p += std::int32_t{at[c]} * mf.b[k * r + c];
      yi[k] = static_cast<std::int8_t>(clip8(wt[k] + std::int64_t{mf.sign} * (std::int64_t{p} >> f.shift)));
    }
  });
}

// How many rows ahead the row-wise elementwise ops prefetch their inputs.
constexpr std::int64_t kAhead = 8;

// floor(x w / mav) clipped: x w is in [-2^14, 2^14] and mav in [1, 128], within FloorClip's range.
void ql1_norm(const MemberRows& batch, std::int64_t d, const std::int8_t* x, const std::int8_t* w, std::int64_t w_stride,
              std::int8_t* y) {
  const bool avx512 = at_avx512();
  cpu_parallel::for_each(batch.rows(), batch.rows() * d > detail::kParallelMinWork, [&](std::int64_t i) {
    const std::int8_t* xi = x + i * d;
    const std::int8_t* wi = w + (i / batch.rows_per_member) * w_stride;
    if (i + kAhead < batch.rows())  // a few rows ahead: the rows come from memory, not cache
      for (std::int64_t k = 0; k < d; k += 64) {
        __builtin_prefetch(xi + kAhead * d + k, 0, 2);
        if (w_stride != 0) __builtin_prefetch(w + ((i + kAhead) / batch.rows_per_member) * w_stride + k, 0, 2);
      }
#if defined(__x86_64__)
    if (avx512) return detail::ql1_norm_row_avx512(d, xi, wi, y + i * d);
#endif
    std::int64_t sum = 0;
    for (std::int64_t k = 0; k < d; ++k) sum += xi[k] < 0 ? -std::int32_t{xi[k]} : std::int32_t{xi[k]};
    const FloorClip by_mav(std::max<std::int64_t>(sum / d, 1));
    for (std::int64_t k = 0; k < d; ++k) y[i * d + k] = by_mav(std::int32_t{xi[k]} * wi[k]);
  });
}

void qadd(const MemberRows& batch, std::int64_t d, const std::int8_t* a, const std::int8_t* b, const std::int8_t* v,
          std::int64_t v_stride, std::int8_t* y) {
  const bool avx512 = at_avx512();
  cpu_parallel::for_each(batch.rows(), batch.rows() * d > detail::kParallelMinWork, [&](std::int64_t i) {
    const std::int8_t* vi = v != nullptr ? v + (i / batch.rows_per_member) * v_stride : nullptr;
    const std::int8_t* ai = a + i * d;
    const std::int8_t* bi = b != nullptr ? b + i * d : nullptr;
    std::int8_t* yi = y + i * d;
    if (i + kAhead < batch.rows())
      for (std::int64_t k = 0; k < d; k += 64) {
        __builtin_prefetch(ai + kAhead * d + k, 0, 2);
        if (bi != nullptr) __builtin_prefetch(bi + kAhead * d + k, 0, 2);
      }
#if defined(__x86_64__)
    if (avx512) return detail::qadd_row_avx512(d, ai, bi, vi, yi);
#endif
    detail::add_row_scalar(d, ai, bi, vi, yi);
  });
}

namespace {

// fn(begin, end) over [0, n) in chunks of 4096 values, OpenMP over the chunks.
template <typename Fn>
void for_chunks(std::int64_t n, Fn fn) {
  constexpr std::int64_t kChunk = 4096;
  cpu_parallel::for_each((n + kChunk - 1) / kChunk, n > detail::kParallelMinWork,
                         [&](std::int64_t c) { fn(c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

}  // namespace

void qgru_gate(std::int64_t n, const std::int8_t* f, const std::int8_t* h, std::int8_t* g) {
  const bool avx512 = at_avx512();
  for_chunks(n, [&](std::int64_t begin, std::int64_t end) {
#if defined(__x86_64__)
    if (avx512) return detail::qgru_gate_avx512(begin, end, f, h, g);
#endif
    for (std::int64_t k = begin; k < end; ++k) g[k] = static_cast<std::int8_t>(((std::int32_t{f[k]} + 127) * h[k]) >> 8);
  });
}

namespace {

// qgru_update over values [begin, end).
void gru_update_range(bool avx512, std::int64_t begin, std::int64_t end, const std::int8_t* f, const std::int8_t* hh,
                      std::int8_t* h) {
#if defined(__x86_64__)
  if (avx512) return detail::qgru_update_avx512(begin, end, f, hh, h);
#endif
  for (std::int64_t k = begin; k < end; ++k) {
    const std::int32_t s = h[k] + (((std::int32_t{f[k]} + 127) * (std::int32_t{hh[k]} - h[k])) >> 8);
    h[k] = static_cast<std::int8_t>(s < -127 ? -127 : (s > 127 ? 127 : s));
  }
}

}  // namespace

void qgru_update(std::int64_t n, const std::int8_t* f, const std::int8_t* hh, std::int8_t* h) {
  const bool avx512 = at_avx512();
  for_chunks(n, [&](std::int64_t begin, std::int64_t end) { gru_update_range(avx512, begin, end, f, hh, h); });
}

void qgru_update_add(std::int64_t n, const std::int8_t* f, const std::int8_t* hh, std::int8_t* h, const std::int8_t* x,
                     std::int8_t* y) {
  const bool avx512 = at_avx512();
  for_chunks(n, [&](std::int64_t begin, std::int64_t end) {  // the chunk's h' is still in L1 for the add
    gru_update_range(avx512, begin, end, f, hh, h);
#if defined(__x86_64__)
    if (avx512) return detail::qadd_row_avx512(end - begin, x + begin, h + begin, nullptr, y + begin);
#endif
    detail::add_row_scalar(end - begin, x + begin, h + begin, nullptr, y + begin);
  });
}

// Chunks in parallel, each value on its own, so the threads change nothing; the count is an
// integer sum. z != 0 and |z| >= threshold is |z| >= max(threshold, 1).
std::int64_t qapply_moves(std::int64_t n, const std::int64_t* z, std::int64_t threshold, std::int8_t* w) {
  constexpr std::int64_t kChunk = 4096;
  const bool avx512 = at_avx512();
  const std::int64_t t = std::max<std::int64_t>(threshold, 1);
  std::int64_t moved = 0;
  // In parallel from 4 chunks on: z is 8 bytes a value, and the update that wrote it has just
  // run on the team (woken).
#pragma omp parallel for schedule(static) reduction(+ : moved) if (n >= 4 * kChunk)
  for (std::int64_t c = 0; c < (n + kChunk - 1) / kChunk; ++c) {
    const std::int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
#if defined(__x86_64__)
    if (avx512) {
      moved += detail::qapply_moves_avx512(begin, end, z, t, w);
      continue;
    }
#endif
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int32_t step = z[i] >= t ? 1 : (z[i] <= -t ? -1 : 0);
      const std::int32_t next = q::clip8(w[i] + step);
      moved += next != w[i];
      w[i] = static_cast<std::int8_t>(next);
    }
  }
  return moved;
}

void qloglik(std::int64_t rows, const std::int8_t* logits, const std::int32_t* targets, std::int32_t* ll) {
  for (std::int64_t i = 0; i < rows; ++i)
    check(targets[i] >= 0 && targets[i] < 256, "qloglik: target ", targets[i], " at row ", i, ", expected 0 .. 255");
  cpu_parallel::for_each(rows, rows * 256 > detail::kParallelMinWork,
                         [&](std::int64_t i) { ll[i] = q::loglik(logits + i * 256, targets[i]); });
}

}  // namespace eggroll::cpu_int8
